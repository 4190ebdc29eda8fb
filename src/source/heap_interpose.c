/*
 * The heap sampler (heap_sampler.h). It owns the exported malloc family and
 * the per-thread countdowns; the region and the table of live sampled
 * objects are heap_live.c's, the allocator underneath and its bootstrap
 * arena are base/real_alloc.c's, and the `heap` / `allocs` profiles are
 * profile/heap.c's.
 *
 * The interposers run in every context the application allocates from
 * (constructors, thread teardown, a fork child) and sit on the program's
 * hottest path. They must never allocate through the application's path,
 * take a lock (but the brief one that switches free()'s target, below, when
 * unaligned sampled blocks appear or are all gone), or change errno on
 * success, and their unsampled path must
 * stay a thread-local decrement and a branch (malloc) or a test of the
 * pointer's bits (free). Only a sampled allocation walks the stack, and that
 * path is allocation-free: the walker, the stack table and the aggregation
 * table are all lock-free, and the tables that grow (the live set, the
 * region, the stack table's frames) do so by mapping a chunk with one raw
 * mmap, never through malloc.
 *
 * Recognising the free of a sampled block: sampled blocks start on a page
 * boundary (small ones in pages of cprof's own region, larger ones
 * over-allocated by a page), so free()'s fast path tests the pointer's low
 * bits and touches no table. Only page-aligned pointers go further: to the
 * region's tracking words, or to a lock-free address set in the style of
 * Chromium's LockFreeAddressHashSet (buckets of singly linked nodes that
 * are never unlinked) behind a counting filter. See "Recognising the free
 * of a sampled block" in heap_live.c and docs/heap.md for the costs.
 *
 * Profiler threads: a thread that runs cprof's code (guarded: cprof's own
 * threads for their whole life, the program's while they are inside
 * cprof) allocates from cprof's own heap (base/own_heap.h), so that none
 * of cprof's threads makes glibc give it an arena. malloc finds the guard
 * on its slow path, where a guarded thread's parked countdown sends every
 * request; the other entry points test it before the allocator's call.
 * free() sends a pointer in the own heap's range back to it, any thread's,
 * by one shift and compare after the page-boundary test.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "source/heap_live.h"
#include "source/heap_sampler.h"
#include "source/threads.h"
#include "base/hmap.h"
#include "base/mem.h"
#include "base/fork.h"
#include "base/own_heap.h"
#include "base/real_alloc.h"
#include "base/rng.h"
#include "base/spin.h"
#include "base/sys.h"
#include "capture/interposers.h"
#include "capture/stack.h"
#include "capture/labels.h"
#include "capture/stacktab.h"

#define NO_SAN CPROF__HEAP_NO_SAN

/* Every function that can stand between the application's call and
 * record() lives in one section, so that record() can leave exactly those
 * frames out of a sampled stack, however the compiler arranged the calls
 * (a tail call at -O2, a frame of its own at -O0). */
#define ALLOC_TEXT __attribute__((section("cprof_alloc_text")))
CPROF__HIDDEN extern const char __start_cprof_alloc_text[];
CPROF__HIDDEN extern const char __stop_cprof_alloc_text[];

typedef cprof__malloc_fn malloc_fn;
typedef cprof__free_fn free_fn;
typedef cprof__calloc_fn calloc_fn;
typedef cprof__realloc_fn realloc_fn;
typedef cprof__posix_memalign_fn posix_memalign_fn;
typedef cprof__memalign_fn memalign_fn;
typedef cprof__usable_size_fn usable_size_fn;

/* Where free() goes until the allocator underneath is known (see
 * free_unresolved). */
static void free_unresolved(void *p);
static void free_slow(void *p);

/* The line every malloc() and free() reads (heap_live.h). */
_Alignas(64) struct cprof__heap_hot cprof__heap_hot = {free_unresolved, 0, 0,
                                                       0, NULL};

/*
 * free_next follows unaligned_live: free_slow while it is not zero, the
 * allocator's free otherwise. It is recomputed from the count under a
 * lock whenever the count leaves or reaches zero (the live set calls
 * cprof__heap_update_free_next), and the thread whose insert raised the
 * count from zero does so before it hands its block out, so a free of any
 * unaligned sampled block finds free_slow. The lock is taken only at
 * those transitions (and around fork, so that a child never inherits it
 * held).
 */
static cprof__spin free_next_lock;
CPROF__SPIN_FUNCTIONS(NO_SAN)

NO_SAN static void lock_free_next(void) { spin_lock(&free_next_lock); }

NO_SAN static void unlock_free_next(void) { spin_unlock(&free_next_lock); }

NO_SAN void cprof__heap_update_free_next(void) {
  lock_free_next();
  free_fn f = atomic_load(&cprof__heap_hot.unaligned_live) != 0
                  ? free_slow
                  : CPROF__ALLOC_LOAD(free);
  atomic_store_explicit(&cprof__heap_hot.free_next, f, memory_order_release);
  unlock_free_next();
}

#define LOAD(v) atomic_load_explicit(&(v), memory_order_relaxed)

#define PAGE CPROF__HEAP_PAGE

/* Until the allocator underneath is found, only null and arena blocks
 * exist, and their free is ignored. Once it is (free is set before malloc,
 * so any other block implies it), free() is pointed at it for good. */
NO_SAN static void free_unresolved(void *p) {
  cprof__alloc_resolve();
  if (CPROF__ALLOC_LOAD(free) == cprof__alloc_bootstrap_free) return;
  cprof__heap_update_free_next();
  free_fn f =
      atomic_load_explicit(&cprof__heap_hot.free_next, memory_order_acquire);
  if (f != free_unresolved) f(p);
}

/*
 * Sampling. Each thread owns a countdown of bytes; the rate is read only
 * when a countdown runs out. While sampling is off a thread still takes the
 * slow path once per OFF_RECHECK bytes, so turning it on reaches every
 * thread soon.
 */
#define OFF_RECHECK ((uint64_t)1 << 20)

static _Atomic long heap_rate = CPROF__HEAP_DEFAULT_RATE;
/* Named cprof__heap_tls outside this file, where the C++ allocation
 * functions charge it inline (heap_sampler.h). */
CPROF__HIDDEN __thread cprof__heap_sampler tls_sampler
    __asm__("cprof__heap_tls") CPROF__TLS;
/* The countdown of a thread that runs profiler code, parked while it does:
 * see cprof__heap_park. */
static __thread uint64_t tls_parked CPROF__TLS;

NO_SAN void cprof__heap_park(void) {
  tls_parked = tls_sampler.countdown;
  atomic_signal_fence(memory_order_seq_cst);
  tls_sampler.countdown = 0;
}

NO_SAN void cprof__heap_unpark(void) {
  tls_sampler.countdown = tls_parked;
}
NO_SAN static uint64_t new_seed(const void *salt) {
  return cprof__rng_seed((uint64_t)(uintptr_t)salt);
}

#define LN2 0.693147180559945309417232121458

NO_SAN double cprof__heap_ln(double x) {
  if (!(x > 0)) return -1e308;
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  int e = (int)((bits >> 52) & 0x7ff);
  if (e == 0) { /* subnormal: scale into the normal range first */
    x *= 18014398509481984.0; /* 2^54 */
    memcpy(&bits, &x, sizeof bits);
    e = (int)((bits >> 52) & 0x7ff) - 54;
  }
  e -= 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m;
  memcpy(&m, &bits, sizeof m);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e++;
  }
  /* ln(m) = 2 atanh(t) with |t| <= 0.172: eleven terms reach double
   * precision. The reciprocals are constants, so that a draw (one per
   * sample) costs no division but the one for t. */
  static const double inv_odd[] = {1.0,      1.0 / 3,  1.0 / 5,  1.0 / 7,
                                   1.0 / 9,  1.0 / 11, 1.0 / 13, 1.0 / 15,
                                   1.0 / 17, 1.0 / 19, 1.0 / 21};
  double t = (m - 1) / (m + 1), t2 = t * t, p = t, sum = 0;
  for (size_t k = 0; k < sizeof inv_odd / sizeof inv_odd[0]; k++) {
    sum += p * inv_odd[k];
    p *= t2;
  }
  return e * LN2 + 2 * sum;
}

double cprof__heap_exp(double x) {
  if (x < -745) return 0;
  if (x > 709) return 1e308;
  double kf = x / LN2;
  int k = (int)(kf < 0 ? kf - 0.5 : kf + 0.5);
  double r = x - k * LN2, term = 1, sum = 1;
  for (int i = 1; i <= 16; i++) {
    term *= r / i;
    sum += term;
  }
  /* Multiply by 2^k in steps that stay within the normal range. */
  while (k > 0) {
    int s = k > 1000 ? 1000 : k;
    uint64_t b = (uint64_t)(1023 + s) << 52;
    double f;
    memcpy(&f, &b, sizeof f);
    sum *= f;
    k -= s;
  }
  while (k < 0) {
    int s = k < -1000 ? -1000 : k;
    uint64_t b = (uint64_t)(1023 + s) << 52;
    double f;
    memcpy(&f, &b, sizeof f);
    sum *= f;
    k -= s;
  }
  return sum;
}

NO_SAN uint64_t cprof__heap_draw_interval(uint64_t *rng, uint64_t rate) {
  /* u is uniform on (0, 1]; -ln(u) * rate is exponential with that mean. */
  double u = (double)((cprof__rng_next(rng) >> 11) + 1) * 0x1p-53;
  double x = -cprof__heap_ln(u) * (double)rate;
  if (x >= 0x1p62) return (uint64_t)1 << 62;
  uint64_t c = (uint64_t)x;
  if ((double)c < x) c++;
  return c ? c : 1;
}

NO_SAN bool cprof__heap_sampler_expired(cprof__heap_sampler *s, uint64_t rate,
                                 size_t n) {
  if (s->rng == 0) {
    /* The thread's first allocation: draw a real first interval, or every
     * thread's first allocation would be sampled. */
    s->rng = new_seed(s);
    if (rate > 1) {
      s->countdown = cprof__heap_draw_interval(&s->rng, rate);
      if (n < s->countdown) {
        s->countdown -= n;
        return false;
      }
    }
  }
  if (rate == 0) {
    s->countdown = OFF_RECHECK;
    return false;
  }
  if (rate == 1) {
    s->countdown = 0;
    return true;
  }
  s->countdown = cprof__heap_draw_interval(&s->rng, rate);
  return true;
}

/* CPROF_HEAP_RATE is read before the first countdown is drawn, by the
 * first allocation that needs a draw. Before libc has set up the
 * environment (allocations made by the dynamic loader) it is not read yet,
 * and those draws use the default. */
extern char **environ;
enum { RATE_UNREAD, RATE_READING, RATE_READ };
static _Atomic int rate_state;
/* Nothing is sampled before the module is set up (by a constructor): until
 * then the runtime under us (a sanitizer's, say) may not be ready for
 * anything but allocation. */
static _Atomic bool ready;

static void read_rate(void) {
  int unread = RATE_UNREAD;
  if (!environ || !atomic_compare_exchange_strong(&rate_state, &unread,
                                                  RATE_READING))
    return;
  long long rate;
  cprof__guard_enter();
  if (cprof__env_int("CPROF_HEAP_RATE", 0, (long long)1 << 40,
                     "heap sampling keeps its default rate of 524288", &rate))
    atomic_store(&heap_rate, (long)rate);
  cprof__guard_exit();
  atomic_store(&rate_state, RATE_READ);
}

#ifdef __SANITIZE_THREAD__
/* TSan's runtime allocates (pthread_getattr_np) while it starts a thread,
 * before that thread may run instrumented code such as record(). Under TSan
 * the first few slow-path allocations of every thread but the main one are
 * therefore never sampled. */
#include <sys/syscall.h>
#define TSAN_START_ALLOCS 16
static __thread unsigned tsan_allocs CPROF__TLS;
#endif

NO_SAN static __attribute__((noinline)) bool countdown_expired(size_t n) {
#ifdef __SANITIZE_THREAD__
  if (tsan_allocs < TSAN_START_ALLOCS) {
    if (tsan_allocs == 0 && syscall(SYS_gettid) == getpid())
      tsan_allocs = TSAN_START_ALLOCS; /* the main thread */
    else {
      tsan_allocs++;
      return false;
    }
  }
#endif
  if (CPROF__UNLIKELY(atomic_load_explicit(&rate_state, memory_order_acquire) !=
                      RATE_READ))
    read_rate();
  return cprof__heap_sampler_expired(
      &tls_sampler,
      (uint64_t)atomic_load_explicit(&heap_rate, memory_order_relaxed), n);
}

/* Whether the calling thread's allocation of n bytes is sampled. The
 * profiler's own allocations neither sample nor move the countdown. */
NO_SAN static inline bool should_sample(size_t n) {
  /* Before set-up nothing is sampled, and nothing instrumented (the guard
   * lives in mem.c) may run: see countdown_expired(). */
  if (CPROF__UNLIKELY(!atomic_load_explicit(&ready, memory_order_acquire)))
    return false;
  if (cprof__guarded()) return false;
  cprof__heap_sampler *s = &tls_sampler;
  if (CPROF__LIKELY(n < s->countdown)) {
    s->countdown -= n;
    return false;
  }
  return countdown_expired(n);
}

void cprof__heap_unsample(int64_t count, int64_t bytes, int64_t rate,
                          int64_t *out_count, int64_t *out_bytes) {
  if (count == 0 || bytes == 0) {
    *out_count = *out_bytes = 0;
    return;
  }
  if (rate <= 1) {
    *out_count = count;
    *out_bytes = bytes;
    return;
  }
  double avg = (double)bytes / (double)count;
  if (avg < 0) avg = -avg; /* a delta can make both negative */
  double x = avg / (double)rate;
  /* 1 - exp(-x) loses precision for tiny x; the series does not. */
  double denom = x < 1e-4 ? x * (1 - x / 2 * (1 - x / 3))
                          : 1 - cprof__heap_exp(-x);
  double scale = 1 / denom;
  *out_count = (int64_t)((double)count * scale);
  *out_bytes = (int64_t)((double)bytes * scale);
}

uint32_t cprof__heap_size_class(size_t n) {
  if (n <= 16) return (uint32_t)((n + 7) & ~(size_t)7);
  if (n > UINT32_MAX) return UINT32_MAX;
  int lg = 63 - __builtin_clzll((unsigned long long)n);
  size_t step = (size_t)1 << (lg - 2);
  size_t c = (n + step - 1) & ~(step - 1);
  return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

/* A block the allocator underneath returned for a sampled request: moved to
 * a page boundary if it is not on one (copying its n bytes when copy is
 * set, and only if they fit in a page), or left where it is, for record()
 * to track there. */
NO_SAN static void *settle(void *q, size_t n, bool copy,
                           _Atomic uint64_t **meta) {
  *meta = NULL;
  if (((uintptr_t)q & (PAGE - 1)) == 0 || (copy && n > PAGE)) return q;
  void *r = cprof__heap_place_sampled(n, false, meta);
  if (!r) return q;
  if (copy) memcpy(r, q, n);
  CPROF__ALLOC_LOAD(free)(q);
  return r;
}

/*
 * C++ operator new reaches malloc through libstdc++, whose operator new is
 * built without a frame pointer: a frame-pointer walk from malloc goes from
 * operator new straight to its caller's caller. For a sample whose first
 * frame lies in one of libstdc++'s operator new functions (their bounds are
 * found once, at init), the caller's return address is recovered from the
 * few stack words operator new occupies: the first word that points just
 * after a call instruction (e8 rel32 or ff 15 rel32) and outside operator
 * new. Checking it costs one system call, on sampled allocations from
 * operator new only.
 */
#define NEW_RANGES 8
#define NEW_SCAN_WORDS 8

static struct {
  uintptr_t lo, hi;
} new_ranges[NEW_RANGES];
static _Atomic int new_nranges;

static void find_operator_new(void) {
  static const char *const names[] = {
      "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
      "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
      "_ZnwmSt11align_val_tRKSt9nothrow_t",
      "_ZnamSt11align_val_tRKSt9nothrow_t"};
  int n = 0;
  cprof__guard_enter();
  for (size_t i = 0; i < CPROF__ARRAY_LEN(names) && n < NEW_RANGES; i++) {
    void *f = dlsym(RTLD_DEFAULT, names[i]);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (f && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
        sym->st_size) {
      new_ranges[n].lo = (uintptr_t)f;
      new_ranges[n].hi = (uintptr_t)f + sym->st_size;
      n++;
    }
  }
  cprof__guard_exit();
  atomic_store_explicit(&new_nranges, n, memory_order_release);
}

static bool in_operator_new(uintptr_t pc) {
  int n = atomic_load_explicit(&new_nranges, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (pc >= new_ranges[i].lo && pc < new_ranges[i].hi) return true;
  return false;
}

static bool after_call(uintptr_t ret) {
  unsigned char b[8]; /* b[8 - k] is the byte at ret - k */
  if (ret < 4096 || !cprof__safe_read(ret - 8, b, sizeof b)) return false;
  return b[8 - 5] == 0xe8 || (b[8 - 6] == 0xff && b[8 - 5] == 0x15);
}

/* pcs[0] is in operator new and fp is the frame of the exported function
 * operator new called: inserts the caller of operator new after pcs[0]. */
static size_t add_new_caller(uintptr_t *pcs, size_t n, size_t max,
                             uintptr_t fp) {
  const uintptr_t *words = (const uintptr_t *)(fp + 2 * sizeof(uintptr_t));
  for (int i = 0; i < NEW_SCAN_WORDS; i++) {
    uintptr_t w = words[i];
    if (in_operator_new(w - 1) || !after_call(w)) continue;
    if (n == max) n--; /* the deepest frame gives way */
    memmove(&pcs[2], &pcs[1], (n - 1) * sizeof *pcs);
    pcs[1] = w - 1;
    return n + 1;
  }
  return n;
}

static inline bool in_alloc_text(uintptr_t pc) {
  return pc - (uintptr_t)__start_cprof_alloc_text <
         (uintptr_t)(__stop_cprof_alloc_text - __start_cprof_alloc_text);
}

/* The stack a thread sampled last, by its hash: a thread that keeps
 * allocating from the same place (as the sampled ones mostly do) finds its
 * stack's id here, not in the shared table. Two different stacks with the
 * same 64-bit hash would be merged; the table itself compares frames. */
static __thread struct {
  uint64_t hash;
  size_t depth;
  cprof__stack_id sid;
} tls_last_stack CPROF__TLS;

static cprof__stack_id intern_stack(const uintptr_t *pcs, size_t depth) {
  uint64_t h = cprof__stacktab_hash(pcs, depth);
  if (h == tls_last_stack.hash && depth == tls_last_stack.depth)
    return tls_last_stack.sid;
  cprof__stack_id sid = cprof__stacktab_intern(pcs, depth);
  if (sid > CPROF__STACK_OVERFLOW) {
    tls_last_stack.hash = h;
    tls_last_stack.depth = depth;
    tls_last_stack.sid = sid;
  }
  return sid;
}

/*
 * The allocation counts are kept in HEAP_STRIPES stripes: a thread adds to
 * its own stripe's record of a (stack, size class), which the stripe
 * number in the stack id's top bits keeps apart, so that threads sampling
 * the same site do not pass its record's cache line back and forth.
 * Collecting adds the stripes up.
 */
#define HEAP_STRIPES 4
#define STRIPE_SHIFT 24
#define STRIPE_SID_MASK (((cprof__stack_id)1 << STRIPE_SHIFT) - 1)

static __thread uint32_t tls_stripe CPROF__TLS; /* stripe + 1; 0 unassigned */
static _Atomic uint32_t stripes_given;

static cprof__stack_id striped(cprof__stack_id sid) {
  if (!tls_stripe)
    tls_stripe = atomic_fetch_add_explicit(&stripes_given, 1,
                                           memory_order_relaxed) %
                     HEAP_STRIPES +
                 1;
  if (sid == CPROF__STACK_NONE || sid > STRIPE_SID_MASK) return sid;
  return sid | (cprof__stack_id)(tls_stripe - 1) << STRIPE_SHIFT;
}

/* Records a sampled allocation. Called by the allocator functions only,
 * which all live in cprof_alloc_text: the stack starts at the first frame
 * outside it, the application's call site. meta is the block's tracking
 * word when placing it already tracked it (see place_sampled); otherwise
 * the block is added to the live set here. */
ALLOC_TEXT static __attribute__((noinline)) void record(
    void *p, size_t n, _Atomic uint64_t *meta) {
  int saved = errno;
  cprof__guard_enter();
  cprof__agg *agg =
      atomic_load_explicit(&cprof__heap_hot.samples, memory_order_acquire);
  if (CPROF__UNLIKELY(!agg)) {
    /* A program linked with the static library may have no constructor of
     * cprof's at all: the first sample sets the module up. */
    cprof__heap_init();
    agg = atomic_load_explicit(&cprof__heap_hot.samples, memory_order_acquire);
  }
  if (agg) {
    /* The stack table is made by the first sample rather than at start-up,
     * so that a program that never samples never reserves it. */
    cprof__stacktab_init();
    cprof__stack_refresh_try();
    /* Leave out this frame and those of the allocator functions between
     * it and the application. All are cprof's own, built with frame
     * pointers, so their chain is safe to follow; fp ends at the frame of
     * the function the application called. */
    uintptr_t fp = *(const uintptr_t *)__builtin_frame_address(0);
    size_t skip = 2; /* this function and its caller */
    while (skip < 8 && in_alloc_text(((const uintptr_t *)fp)[1] - 1)) {
      fp = ((const uintptr_t *)fp)[0];
      skip++;
    }
    uintptr_t pcs[CPROF__STACK_BUF];
    size_t depth = cprof__stack_walk_here(pcs, CPROF__ARRAY_LEN(pcs), skip);
    /* The CFI walk steps through operator new by its row; the frame
     * pointer walk needs the caller added back. */
    if (depth >= 1 && cprof__stack_mode() == CPROF__UNWIND_FP &&
        in_operator_new(pcs[0]))
      depth = add_new_caller(pcs, depth, CPROF__ARRAY_LEN(pcs), fp);
    depth = cprof__labels_mark(pcs, depth, CPROF__ARRAY_LEN(pcs));
    cprof__stack_id sid = intern_stack(pcs, depth);
    const int64_t v[2] = {1, (int64_t)n};
    uint64_t m = cprof__heap_make_meta(sid, n);
    if (cprof__agg_add(agg, striped(sid), cprof__heap_size_class(n), v)) {
      bool tracked = false;
      if (meta) {
        /* Placing the block tracked it with a stack id of 0. */
        if (m)
          atomic_store_explicit(meta, LOAD(*meta) | m, memory_order_relaxed);
        tracked = m != 0;
      } else {
        tracked = m && cprof__heap_live_insert(p, m, 0);
      }
      if (!tracked)
        cprof__heap_count_untracked();
    }
  }
  cprof__guard_exit();
  errno = saved;
}

/* Forgets a sampled block being freed, then frees it; every other block
 * free() cannot rule out by its address is passed on. */
NO_SAN static __attribute__((noinline)) void free_slow(void *p) {
  if (!p || CPROF__UNLIKELY(cprof__in_arena(p))) return;
  if (CPROF__OWN_ENABLED && cprof__own_block(p)) {
    cprof__own_free(p);
    return;
  }
  size_t page;
  if (cprof__heap_region_page_of(p, &page)) {
    cprof__heap_region_free(p, page);
    return;
  }
  uint32_t delta = cprof__heap_live_find(p, true).delta;
  CPROF__ALLOC_LOAD(free)((unsigned char *)p - delta);
}

/* A block of n bytes as malloc makes it: whether it is sampled goes to
 * *sample and its tracking word (see record) to *meta, for the caller to
 * record from cprof_alloc_text. */
NO_SAN static void *alloc_block(size_t n, bool *sample,
                                _Atomic uint64_t **meta) {
  *meta = NULL;
  *sample = should_sample(n);
  void *p = *sample ? cprof__heap_place_sampled(n, false, meta) : NULL;
  if (!p) p = CPROF__ALLOC_LOAD(malloc)(n);
  if (!p) *sample = false;
  return p;
}

/* The exported allocator. Each one that can sample calls record() from a
 * function in cprof_alloc_text, so that every sampled stack starts at the
 * application's call site. */

/* malloc and free are the hottest entry points, so their common case is a
 * few instructions that need no stack frame: a thread-local countdown
 * charged up front (malloc) or a test of the pointer's low bits (free),
 * then a tail call to the allocator underneath. Everything else goes
 * through the slow paths. While the calling thread runs profiler code its
 * countdown is parked at 0 (cprof__heap_park), so the fast path need not
 * look at the guard. */
NO_SAN ALLOC_TEXT static __attribute__((noinline)) void *malloc_slow(size_t n) {
  /* A guarded thread (its countdown parked at 0) allocates from cprof's
   * own heap: see "Profiler threads" below. */
  if (CPROF__OWN_ENABLED && cprof__guarded()) return cprof__own_malloc(n);
  bool sample;
  _Atomic uint64_t *meta;
  void *p = alloc_block(n, &sample, &meta);
  if (CPROF__UNLIKELY(sample)) record(p, n, meta);
  return p;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* On x86-64 the countdown is charged by one read-modify-write whose
 * borrow (or zero) flag is the test: four instructions in all, where the
 * C below takes seven. The slow path gives the charge back first. */
NO_SAN ALLOC_TEXT CPROF_EXPORT void *malloc(size_t n) {
  /* The countdown is an input that the instruction writes: asm goto with
   * outputs loses its jump path with gcc 12, and the memory clobber tells
   * the compiler that the countdown changed. */
  __asm__ goto("subq %1, %0\n\t"
               "jbe %l[slow]"
               :
               : "m"(tls_sampler.countdown), "r"(n)
               : "cc", "memory"
               : slow);
  return CPROF__ALLOC_LOAD(malloc)(n);
slow:
  tls_sampler.countdown += n;
  return malloc_slow(n);
}

#else
NO_SAN ALLOC_TEXT CPROF_EXPORT void *malloc(size_t n) {
  cprof__heap_sampler *s = &tls_sampler;
  if (CPROF__LIKELY(n < s->countdown)) {
    s->countdown -= n;
    return CPROF__ALLOC_LOAD(malloc)(n);
  }
  return malloc_slow(n);
}
#endif

/* A pointer on a page boundary may be a sampled block; one in cprof's own
 * heap's range goes back there; any other goes to free_next (see
 * update_free_next). */
NO_SAN CPROF_EXPORT void free(void *p) {
  if (CPROF__UNLIKELY(((uintptr_t)p & (PAGE - 1)) == 0)) {
    free_slow(p);
    return;
  }
  if (CPROF__OWN_ENABLED && CPROF__UNLIKELY(cprof__own_small(p))) {
    cprof__own_free(p);
    return;
  }
  LOAD(cprof__heap_hot.free_next)(p);
}

NO_SAN ALLOC_TEXT CPROF_EXPORT void *calloc(size_t n, size_t size) {
  calloc_fn f = CPROF__ALLOC_GET(calloc);
  size_t total;
  bool overflow = __builtin_mul_overflow(n, size, &total);
  if (CPROF__UNLIKELY(!f)) {
    if (overflow) {
      errno = ENOMEM;
      return NULL;
    }
    return cprof__arena_alloc(16, total);
  }
  if (CPROF__OWN_ENABLED && CPROF__UNLIKELY(cprof__guarded()))
    return cprof__own_calloc(n, size);
  /* An overflowing request goes to the allocator, which fails it its way. */
  if (overflow || CPROF__LIKELY(!should_sample(total))) return f(n, size);
  _Atomic uint64_t *meta = NULL;
  void *p = cprof__heap_place_sampled(total, true, &meta);
  if (!p) p = f(n, size);
  if (p) record(p, total, meta);
  return p;
}

/* realloc of an arena block: a new block from the real allocator. */
NO_SAN static void *realloc_from_arena(void *p, size_t n) {
  if (n == 0) return NULL; /* glibc frees and returns NULL; arena blocks
                            * are never freed */
  void *q = CPROF__ALLOC_LOAD(malloc)(n);
  if (q) {
    size_t old = cprof__arena_size(p);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}

/* realloc of a block of the region (in page i): a new block, and the page
 * freed. */
NO_SAN static void *realloc_from_region(void *p, size_t i, size_t n,
                                        bool *sample,
                                        _Atomic uint64_t **meta) {
  void *q = NULL;
  if (n != 0) { /* glibc's realloc(p, 0) frees p and returns NULL */
    q = alloc_block(n, sample, meta);
    if (!q) return NULL; /* p stays as it was */
    memcpy(q, p, n < PAGE ? n : PAGE);
  }
  cprof__heap_region_free(p, i);
  return q;
}

/* realloc of a block in the live set, already taken out of it (meta and
 * delta as it had there). The allocator's block is reallocated with the
 * same offset in front, so the data stays where the offset says. */
NO_SAN static void *realloc_tracked(void *p, uint64_t meta, uint32_t delta,
                                    size_t n, bool *sample,
                                    _Atomic uint64_t **out_meta) {
  realloc_fn f = CPROF__ALLOC_LOAD(realloc);
  unsigned char *base = (unsigned char *)p - delta;
  /* A zero size reaches the allocator as zero: it decides what that
   * means (glibc frees the block and returns NULL). */
  size_t want = n == 0 ? 0 : n + delta;
  unsigned char *nb = want >= n ? f(base, want) : NULL;
  if (!nb) {
    if (n != 0) {
      /* The block is still there: it goes back as it was. */
      int saved = errno;
      if (want < n) saved = ENOMEM;
      if (!cprof__heap_live_insert(p, meta, delta))
        cprof__heap_count_untracked();
      errno = saved;
    }
    return NULL;
  }
  if (n == 0) return nb; /* an allocator that returns a block for size 0 */
  void *q = nb + delta;
  *sample = should_sample(n);
  if (delta == 0) return *sample ? settle(q, n, true, out_meta) : q;
  /* The new block keeps its offset, so it stays tracked, sampled or not
   * (with a stack id of 0 when not). If the live set is full, the data
   * moves down to the allocator's own pointer instead. */
  _Atomic uint64_t *m = cprof__heap_live_insert(q, n, delta);
  if (m) {
    *out_meta = m;
    return q;
  }
  memmove(nb, q, n);
  *sample = false;
  return nb;
}

/* The common body of realloc and reallocarray; sets *sample when the
 * result is to be sampled, with *meta as for record() (the caller records
 * it, for the stack's sake). */
NO_SAN static inline void *realloc_impl(void *p, size_t n, bool *sample,
                                        _Atomic uint64_t **meta) {
  *sample = false;
  *meta = NULL;
  if (CPROF__UNLIKELY(cprof__in_arena(p))) return realloc_from_arena(p, n);
  if (CPROF__OWN_ENABLED) {
    if (CPROF__UNLIKELY(p ? cprof__own_block(p) : cprof__guarded()))
      return cprof__own_realloc(p, n);
  }
  realloc_fn f = CPROF__ALLOC_GET(realloc);
  if (CPROF__UNLIKELY(!f)) {
    if (p) return realloc_from_arena(p, n); /* unreachable: no real block
                                             * exists before resolution */
    return cprof__arena_alloc(16, n);
  }
  if (p && CPROF__UNLIKELY(cprof__heap_free_checks(p))) {
    size_t page;
    if (cprof__heap_region_page_of(p, &page))
      return realloc_from_region(p, page, n, sample, meta);
    /* A sampled block leaves the live set before the allocator can hand
     * its address to another thread; if realloc fails it goes back. */
    cprof__heap_live_entry e = cprof__heap_live_find(p, true);
    if (e.found) return realloc_tracked(p, e.meta, e.delta, n, sample, meta);
  }
  void *q = f(p, n);
  if (q && CPROF__UNLIKELY(should_sample(n))) {
    *sample = true;
    q = settle(q, n, true, meta);
  }
  return q;
}

NO_SAN ALLOC_TEXT CPROF_EXPORT void *realloc(void *p, size_t n) {
  bool sample;
  _Atomic uint64_t *meta;
  void *q = realloc_impl(p, n, &sample, &meta);
  if (CPROF__UNLIKELY(sample)) record(q, n, meta);
  return q;
}

NO_SAN ALLOC_TEXT CPROF_EXPORT void *reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  bool sample;
  _Atomic uint64_t *meta;
  void *q = realloc_impl(p, total, &sample, &meta);
  if (CPROF__UNLIKELY(sample)) record(q, total, meta);
  return q;
}

NO_SAN static inline bool valid_alignment(size_t align) {
  return align != 0 && (align & (align - 1)) == 0;
}

/* The aligned allocators ask the allocator underneath first, which decides
 * which alignments are bad; a sampled block is then settled on a page
 * boundary, which satisfies any alignment up to a page. Their one body,
 * always inlined, so the sampled stack still starts at the application's
 * call site. */
NO_SAN static inline __attribute__((always_inline)) void *
sampled_aligned(void *p, size_t n) {
  if (p && CPROF__UNLIKELY(should_sample(n))) {
    _Atomic uint64_t *meta;
    p = settle(p, n, false, &meta);
    record(p, n, meta);
  }
  return p;
}

/* posix_memalign served by alloc (cprof's own heap, or the bootstrap
 * arena), with its checks and results and errno left as it was. */
NO_SAN ALLOC_TEXT static int posix_memalign_from(void *(*alloc)(size_t, size_t),
                                                 void **out, size_t align, size_t n) {
  if (!valid_alignment(align) || align % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  void *p = alloc(align, n);
  errno = saved;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

NO_SAN ALLOC_TEXT CPROF_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (CPROF__OWN_ENABLED && CPROF__UNLIKELY(cprof__guarded()))
    return posix_memalign_from(cprof__own_memalign, out, align, n);
  posix_memalign_fn f = CPROF__ALLOC_GET(posix_memalign);
  if (CPROF__UNLIKELY(!f))
    return posix_memalign_from(cprof__arena_alloc, out, align, n);
  int rc = f(out, align, n);
  if (rc == 0) *out = sampled_aligned(*out, n);
  return rc;
}

NO_SAN static inline __attribute__((always_inline)) void *
aligned_common(memalign_fn f, size_t align, size_t n) {
  if (CPROF__UNLIKELY(!f)) {
    if (!valid_alignment(align)) {
      errno = EINVAL;
      return NULL;
    }
    return cprof__arena_alloc(align, n);
  }
  return sampled_aligned(f(align, n), n);
}

/* The aligned allocators on a guarded thread: cprof's own heap. */
#define OWN_ALIGNED(align, n)                                    \
  do {                                                           \
    if (CPROF__OWN_ENABLED && CPROF__UNLIKELY(cprof__guarded())) \
      return cprof__own_memalign(align, n);                      \
  } while (0)

NO_SAN ALLOC_TEXT CPROF_EXPORT void *aligned_alloc(size_t align, size_t n) {
  OWN_ALIGNED(align, n);
  return aligned_common(CPROF__ALLOC_GET(aligned_alloc), align, n);
}

NO_SAN ALLOC_TEXT CPROF_EXPORT void *memalign(size_t align, size_t n) {
  OWN_ALIGNED(align, n);
  return aligned_common(CPROF__ALLOC_GET(memalign), align, n);
}

NO_SAN ALLOC_TEXT CPROF_EXPORT void *valloc(size_t n) {
  OWN_ALIGNED(PAGE, n);
  malloc_fn f = CPROF__ALLOC_GET(valloc);
  if (CPROF__UNLIKELY(!f)) return cprof__arena_alloc(4096, n);
  return sampled_aligned(f(n), n);
}

NO_SAN ALLOC_TEXT CPROF_EXPORT void *pvalloc(size_t n) {
  OWN_ALIGNED(PAGE, (n + PAGE - 1) & ~(PAGE - 1));
  malloc_fn f = CPROF__ALLOC_GET(pvalloc);
  if (CPROF__UNLIKELY(!f)) return cprof__arena_alloc(4096, (n + 4095) & ~(size_t)4095);
  return sampled_aligned(f(n), n);
}

NO_SAN CPROF_EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  if (cprof__in_arena(p)) return cprof__arena_size(p);
  if (CPROF__OWN_ENABLED && cprof__own_block(p))
    return cprof__own_usable_size(p);
  if (cprof__heap_in_region(p)) return PAGE;
  usable_size_fn f = CPROF__ALLOC_GET(usable_size);
  if (!f) return 0;
  uint32_t delta =
      cprof__heap_free_checks(p) ? cprof__heap_live_find(p, false).delta : 0;
  if (delta) return f((unsigned char *)p - delta) - delta;
  return f(p);
}

NO_SAN bool cprof__heap_take(size_t n) { return should_sample(n); }

NO_SAN bool cprof__heap_ready(void) {
  return atomic_load_explicit(&ready, memory_order_acquire);
}

NO_SAN uint64_t cprof__heap_hold(void) {
  uint64_t c = tls_sampler.countdown;
  tls_sampler.countdown = CPROF__HEAP_HELD;
  return c;
}

NO_SAN void cprof__heap_unhold(uint64_t countdown) {
  tls_sampler.countdown = countdown;
}

ALLOC_TEXT void cprof__heap_record(void *p, size_t n, _Atomic uint64_t *meta) {
  record(p, n, meta);
}

/*
 * Setup, the rate, and fork. A fork child keeps every table as it was (all
 * are lock-free, so none can be caught half-locked); the forking thread
 * draws a fresh seed so parent and child do not sample in lockstep, and a
 * resolution interrupted by the fork is started over.
 */
#define HEAP_RECORDS 32768 /* (stack, size class, stripe) keys */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void reseed_current_thread(void) {
  cprof__heap_sampler *s = &tls_sampler;
  long rate = atomic_load(&heap_rate);
  s->rng = new_seed(s) ^ (uint64_t)getpid();
  if (!s->rng) s->rng = 1;
  uint64_t countdown =
      rate > 1 ? cprof__heap_draw_interval(&s->rng, (uint64_t)rate)
      : rate == 1 ? 0
                  : OFF_RECHECK;
  /* Inside profiler code the countdown is parked: set the parked one. */
  if (cprof__guarded())
    tls_parked = countdown;
  else
    s->countdown = countdown;
}

static void atfork_prepare(void) { lock_free_next(); }
static void atfork_parent(void) { unlock_free_next(); }

static void atfork_child(void) {
  spin_release_stale(&free_next_lock);
  cprof__alloc_atfork_child();
  reseed_current_thread();
}

static void init_once_fn(void) {
  /* Everything here may allocate; none of it may sample, or the sample
   * would wait for this very initialisation. */
  cprof__guard_hooks(cprof__heap_park, cprof__heap_unpark);
  cprof__threads_hooks(NULL, cprof__heap_thread_exit);
  cprof__guard_enter();
  read_rate();
  /* The allocation interposers, as a program's calls reach them, for the
   * tail-call frames (profile.c). */
  static const uintptr_t mine[] = {
      (uintptr_t)malloc,        (uintptr_t)calloc,
      (uintptr_t)realloc,       (uintptr_t)reallocarray,
      (uintptr_t)posix_memalign, (uintptr_t)aligned_alloc,
      (uintptr_t)memalign,      (uintptr_t)valloc,
      (uintptr_t)pvalloc,       (uintptr_t)free};
  cprof__interposers_register(mine, CPROF__ARRAY_LEN(mine));
  /* The live set and the region are mapped chunk by chunk as samples
   * need them (live_insert, region_alloc): nothing is reserved here. */
  cprof__agg *agg = cprof__agg_new(2, HEAP_RECORDS);
  atomic_store_explicit(&cprof__heap_hot.samples, agg, memory_order_release);
  cprof__atfork(atfork_prepare, atfork_parent, atfork_child);
  find_operator_new();
  reseed_current_thread();
  atomic_store_explicit(&ready, true, memory_order_release);
  cprof__guard_exit();
}

void cprof__heap_init(void) { pthread_once(&init_once, init_once_fn); }

/* This module's own constructor: a program linked with the static library
 * always pulls in heap.o (it defines malloc) but not necessarily the
 * library's constructor in init.c. */
__attribute__((constructor)) static void heap_constructor(void) {
  cprof__heap_init();
}

long cprof_heap_set_rate(long rate) {
  cprof__heap_init();
  read_rate(); /* so that the environment cannot override this call later */
  if (rate < 0) return atomic_load(&heap_rate);
  long prev = atomic_exchange(&heap_rate, rate);
  reseed_current_thread();
  return prev;
}

uint64_t cprof__heap_thread_countdown(void) { return tls_sampler.countdown; }
cprof__agg *cprof__heap_samples(void) {
  cprof__heap_init();
  return atomic_load_explicit(&cprof__heap_hot.samples, memory_order_acquire);
}

cprof__stack_id cprof__heap_unstripe(cprof__stack_id sid) {
  return sid & STRIPE_SID_MASK;
}

long cprof__heap_rate(void) { return atomic_load(&heap_rate); }
