/*
 * The heap sampler's sampling: the per-thread byte countdowns and the
 * rate, the maths (the exponential draw, ln and exp without libm,
 * unsampling, the size classes), the record of a sampled allocation (the
 * stack walk from the application's call site, interning, the striped
 * aggregation), and the module's setup. The interposers (heap_interpose.c)
 * charge the countdown inline (cprof__heap_should_sample, heap_sampler.h)
 * and call here when it runs out and to record a sample; the profiles read
 * the aggregation and the rate.
 *
 * It may call base, the capture layer (walker, stack table, labels,
 * aggregation), the live set (heap_live.h) to track a recorded block, and
 * heap_interpose.c once, at setup, to register the interposers. The
 * countdown's functions run uninstrumented in every context the
 * application allocates from: they must never allocate through the
 * application's path, take a lock or change errno (the one reading of
 * CPROF_HEAP_RATE is made inside the guard). cprof__heap_record runs
 * inside the guard too, so that what the functions it calls allocate is
 * neither sampled nor charged, and it keeps errno. Nothing is sampled
 * before the setup has run (cprof__heap_hot.set_up).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/env.h"
#include "base/mem.h"
#include "base/sys.h"
#include "base/rng.h"
#include "capture/saferead.h"
#include "capture/agg.h"
#include "capture/sample.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "source/heap_live.h"
#include "source/heap_sampler.h"
#include "source/threads.h"

#define NO_SAN CPROF__HEAP_NO_SAN
#define LOAD(v) atomic_load_explicit(&(v), memory_order_relaxed)

CPROF__HIDDEN extern const char __start_cprof_alloc_text[];
CPROF__HIDDEN extern const char __stop_cprof_alloc_text[];

/*
 * Sampling. Each thread owns a countdown of bytes; the rate is read only
 * when a countdown runs out. While sampling is off a thread still takes the
 * slow path once per OFF_RECHECK bytes, so turning it on reaches every
 * thread soon.
 */
#define OFF_RECHECK ((uint64_t)1 << 20)

/* Named cprof__heap_tls outside this file, where malloc and the C++
 * allocation functions charge it inline (heap_sampler.h). */
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

static void read_rate(void) {
  int unread = RATE_UNREAD;
  if (!environ || !atomic_compare_exchange_strong(&rate_state, &unread,
                                                  RATE_READING))
    return;
  long long rate;
  cprof__guard_enter();
  if (cprof__env_int("CPROF_HEAP_RATE", 0, (long long)1 << 40,
                     "heap sampling keeps its default rate of 524288", &rate))
    cprof__heap_rate_exchange((long)rate);
  cprof__guard_exit();
  atomic_store(&rate_state, RATE_READ);
}

#ifdef __SANITIZE_THREAD__
/* TSan's runtime allocates (pthread_getattr_np) while it starts a thread,
 * before that thread may run instrumented code such as
 * cprof__heap_record(). Under TSan the first few slow-path allocations of
 * every thread but the main one are therefore never sampled. */
#include <sys/syscall.h>
#define TSAN_START_ALLOCS 16
static __thread unsigned tsan_allocs CPROF__TLS;
#endif

NO_SAN __attribute__((noinline)) bool cprof__heap_countdown_expired(size_t n) {
  if (CPROF__UNLIKELY(!atomic_load_explicit(&cprof__heap_hot.set_up,
                                            memory_order_acquire)) ||
      cprof__guarded())
    return false;
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
      (uint64_t)cprof__heap_rate(), n);
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

/* Samples this thread recorded, for when to refresh the tables. */
static __thread uint32_t tls_samples CPROF__TLS;
#define REFRESH_EVERY 64u

/* Called by the allocator functions only, which all live in
 * cprof_alloc_text: the stack starts at the first frame outside it, the
 * application's call site. */
/* seq is bumped by every recorded sample. The heap-peak tracker, after an
 * interval in which none was taken, sleeps on it (cprof__heap_wait_sample)
 * with sleeper set, and the next sample wakes it: an idle program's
 * tracker does not wake at all. In a line of their own (the struct's
 * alignment is its size): every sample writes the count, and what shared
 * its line went from core to core with it (the set-up flag did, read at
 * every sample). */
static struct {
  _Alignas(64) _Atomic uint32_t seq;
  _Atomic bool sleeper;
} sample_wake;

uint32_t cprof__heap_sample_seq(void) { return atomic_load(&sample_wake.seq); }

void cprof__heap_wait_sample(uint32_t seen) {
  /* Sequentially consistent, as the sampler's side: either it sees
   * sleeper set, or this sees its new count. */
  atomic_store(&sample_wake.sleeper, true);
  while (atomic_load(&sample_wake.seq) == seen)
    cprof__sys4(SYS_futex, (long)(uintptr_t)&sample_wake.seq,
                FUTEX_WAIT_PRIVATE, (long)seen, 0);
}

/* After a sample: counts it, and wakes a sleeping tracker. Signal-safe. */
static inline void sample_taken(void) {
  atomic_fetch_add(&sample_wake.seq, 1);
  if (atomic_load(&sample_wake.sleeper) &&
      atomic_exchange(&sample_wake.sleeper, false))
    cprof__sys4(SYS_futex, (long)(uintptr_t)&sample_wake.seq,
                FUTEX_WAKE_PRIVATE, INT_MAX, 0);
}

CPROF__ALLOC_TEXT __attribute__((noinline)) void cprof__heap_record(
    void *p, size_t n, _Atomic uint64_t *meta) {
  int saved = errno;
  cprof__guard_enter();
  cprof__agg *agg =
      atomic_load_explicit(&cprof__heap_hot.samples, memory_order_acquire);
  if (CPROF__UNLIKELY(!agg)) {
    /* A program linked with the static library may have no constructor of
     * cprof's at all: the first sample sets the module up. */
    cprof__heap_sampler_init();
    agg =
        atomic_load_explicit(&cprof__heap_hot.samples, memory_order_acquire);
  }
  if (agg) {
    /* The stack table is made by the first sample rather than at start-up,
     * so that a program that never samples never reserves it. */
    cprof__stacktab_init();
    /* A refresh's check is a dl_iterate_phdr under the loader's lock,
     * which two allocating threads contend for: more than half of what
     * a sample cost. It is made at a thread's first sample and every
     * REFRESH_EVERY-th after (an object unloaded and another loaded in
     * its place), and when the walk meets code the tables do not know (a
     * library loaded since), which is then walked again. */
    if ((tls_samples++ & (REFRESH_EVERY - 1)) == 0) {
      (void)cprof__stack_foreign_take(CPROF__FOREIGN_HEAP);
      (void)cprof__stack_refresh_try();
    }
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
    if (cprof__stack_foreign_take(CPROF__FOREIGN_HEAP) &&
        cprof__stack_refresh_try())
      depth = cprof__stack_walk_here(pcs, CPROF__ARRAY_LEN(pcs), skip);
    /* The CFI walk steps through operator new by its row; the frame
     * pointer walk needs the caller added back. */
    if (depth >= 1 && cprof__stack_mode() == CPROF__UNWIND_FP &&
        in_operator_new(pcs[0]))
      depth = add_new_caller(pcs, depth, CPROF__ARRAY_LEN(pcs), fp);
    /* A thread that keeps allocating from one place (as the sampled ones
     * mostly do) finds its stack by its hash, not in the shared table. */
    const cprof__sample_at at = {.from = CPROF__SAMPLE_WALKED, .pcs = pcs,
                                 .n = depth, .cap = CPROF__ARRAY_LEN(pcs)};
    cprof__stack_id sid = cprof__sample_stack(
        &at, CPROF__SAMPLE_LABELS | CPROF__SAMPLE_SAME_AS_LAST);
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
      if (!tracked) cprof__heap_count_untracked();
    }
    cprof__heap_copy_earn(cprof__heap_rate());
    sample_taken();
  }
  cprof__guard_exit();
  errno = saved;
}

NO_SAN bool cprof__heap_take(size_t n) { return cprof__heap_should_sample(n); }

NO_SAN bool cprof__heap_ready(void) {
  return atomic_load_explicit(&cprof__heap_hot.set_up, memory_order_acquire);
}

NO_SAN uint64_t cprof__heap_hold(void) {
  uint64_t c = tls_sampler.countdown;
  tls_sampler.countdown = CPROF__HEAP_HELD;
  return c;
}

NO_SAN void cprof__heap_unhold(uint64_t countdown) {
  tls_sampler.countdown = countdown;
}

/*
 * Setup and the rate. After a fork the forking thread draws a fresh seed
 * (heap_interpose.c's child handler calls cprof__heap_reseed) so parent
 * and child do not sample in lockstep.
 */
#define HEAP_RECORDS 32768 /* (stack, size class, stripe) keys */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void cprof__heap_reseed(void) {
  cprof__heap_sampler *s = &tls_sampler;
  long rate = cprof__heap_rate();
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

static void init_once_fn(void) {
  /* Everything here may allocate; none of it may sample, or the sample
   * would wait for this very initialisation. */
  cprof__guard_hooks(cprof__heap_park, cprof__heap_unpark);
  cprof__threads_hooks(NULL, cprof__heap_thread_exit);
  cprof__guard_enter();
  read_rate();
  /* The live set and the region are mapped chunk by chunk as samples
   * need them (heap_live.c): nothing is reserved here. */
  cprof__agg *agg = cprof__agg_new(2, HEAP_RECORDS);
  atomic_store_explicit(&cprof__heap_hot.samples, agg, memory_order_release);
  find_operator_new();
  cprof__heap_reseed();
  atomic_store_explicit(&cprof__heap_hot.set_up, true, memory_order_release);
  cprof__guard_exit();
}

void cprof__heap_sampler_init(void) { pthread_once(&init_once, init_once_fn); }

/* Whether anything asked for heap samples (cprof__heap_serving): a rate
 * the program set counts as asking, and one CPROF_HEAP_RATE sets keeps
 * sampling on as well (cprof__heap_idle_unless_asked). */
enum { HEAP_UNASKED, HEAP_ASKED, HEAP_IDLE };
static _Atomic int asked = HEAP_UNASKED;

void cprof__heap_serving(void) {
  if (atomic_load(&asked) == HEAP_ASKED ||
      atomic_exchange(&asked, HEAP_ASKED) != HEAP_IDLE)
    return;
  /* Idle: the rate is 0 unless the program set one meanwhile. */
  if (cprof__heap_rate_replace(0, CPROF__HEAP_DEFAULT_RATE))
    cprof__heap_reseed();
}

void cprof__heap_idle_unless_asked(void) {
  if (cprof__env_str("CPROF_HEAP_RATE")) return;
  int unasked = HEAP_UNASKED;
  if (!atomic_compare_exchange_strong(&asked, &unasked, HEAP_IDLE)) return;
  cprof__heap_sampler_init();
  cprof__heap_rate_exchange(0);
  cprof__heap_reseed();
}

long cprof_heap_set_rate(long rate) {
  cprof__heap_sampler_init();
  read_rate(); /* so that the environment cannot override this call later */
  if (rate < 0) return cprof__heap_rate();
  atomic_store(&asked, HEAP_ASKED);
  long prev = cprof__heap_rate_exchange(rate);
  cprof__heap_reseed();
  return prev;
}

uint64_t cprof__heap_thread_countdown(void) { return tls_sampler.countdown; }

cprof__agg *cprof__heap_samples(void) {
  cprof__heap_sampler_init();
  return atomic_load_explicit(&cprof__heap_hot.samples, memory_order_acquire);
}

cprof__stack_id cprof__heap_unstripe(cprof__stack_id sid) {
  return sid & STRIPE_SID_MASK;
}

