/*
 * The heap sampler's interposers (heap_sampler.h): the exported malloc
 * family, where free() sends a pointer that is not on a page boundary
 * (free_next, in the line every malloc() and free() reads, which is
 * defined here), and that target's lock and fork handlers. They charge
 * the countdown and record a sample through heap_sampler.c (an inline
 * test, a call only when the countdown runs out), place, find and forget
 * sampled blocks through heap_live.c (inline tests, a call only for a
 * pointer on a page boundary or a sampled block), and reach the allocator
 * underneath and its bootstrap arena through base/real_alloc.h and
 * cprof's own heap through base/own_heap.h. The `heap` / `allocs`
 * profiles are profile/heap.c's.
 *
 * The interposers run in every context the application allocates from
 * (constructors, thread teardown, a fork child) and sit on the program's
 * hottest path. They must never allocate through the application's path,
 * take a lock (but the brief one that switches free()'s target, below, when
 * unaligned sampled blocks appear or are all gone), or change errno on
 * success, and their unsampled path must stay a thread-local decrement and
 * a branch (malloc) or a test of the pointer's bits (free). Only a sampled
 * allocation walks the stack (heap_sampler.c), and that path is
 * allocation-free: the walker, the stack table and the aggregation
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
#include <errno.h>
#include <pthread.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/fork.h"
#include "base/mem.h"
#include "base/own_heap.h"
#include "base/real_alloc.h"
#include "base/spin.h"
#include "capture/interposers.h"
#include "source/heap_live.h"
#include "source/heap_sampler.h"

#define NO_SAN CPROF__HEAP_NO_SAN
#define ALLOC_TEXT CPROF__ALLOC_TEXT

typedef cprof__malloc_fn malloc_fn;
typedef cprof__free_fn free_fn;
typedef cprof__calloc_fn calloc_fn;
typedef cprof__realloc_fn realloc_fn;
typedef cprof__posix_memalign_fn posix_memalign_fn;
typedef cprof__memalign_fn memalign_fn;
typedef cprof__usable_size_fn usable_size_fn;

static void free_slow(void *p);

#define LOAD(v) atomic_load_explicit(&(v), memory_order_relaxed)

#define PAGE CPROF__HEAP_PAGE

/* The largest tracked block that realloc moves off a page boundary and
 * cprof moves down to the allocator's own pointer, untracked; a larger
 * one is moved up to a page boundary and stays tracked (realloc_tracked).
 * Either move is one copy more, after the allocator's own, paid from the
 * budget; an untracked block takes no node of the live set. */
#define UNTRACK_MAX ((size_t)64 << 10)

/* A sampled realloc result is moved to a page boundary by one copy: one
 * left off a page boundary sends every free() the program makes to a
 * slower path while it lives (a compiler keeps a vector of 512 KiB so
 * from its first second to its exit). The copy is made once, as the block
 * is first sampled: from then on it is tracked, and realloc keeps it on a
 * page boundary (realloc_tracked) with no copy of cprof's unless the
 * allocator copied it too. Every copy is paid from the budget that
 * samples earn (cprof__heap_copy_spend), as a realloc of n bytes is
 * sampled about n / rate of the time but nearly always past the rate: a
 * program that grows large buffers in place or with mremap would
 * otherwise pay a copy of each. The budget pays for no copy past its
 * bound (16 MiB): a larger result stays where it is, rather than hold
 * twice its size while it is copied.
 *
 * settle: a block the allocator underneath returned for a sampled request,
 * moved to a page boundary if it is not on one (copying its n bytes when
 * copy is set, and only when the budget pays for them), or left where it
 * is, for cprof__heap_record to track there. */
NO_SAN static void *settle(void *q, size_t n, bool copy,
                           _Atomic uint64_t **meta) {
  *meta = NULL;
  if (((uintptr_t)q & (PAGE - 1)) == 0 ||
      (copy && !cprof__heap_copy_spend(n)))
    return q;
  void *r = cprof__heap_place_sampled(n, false, meta);
  if (!r) return q;
  if (copy) memcpy(r, q, n);
  CPROF__ALLOC_LOAD(free)(q);
  return r;
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

/* free()'s target for a pointer off a page boundary while sampled blocks
 * live off one (cprof__heap_update_free_next): one that none of them can
 * be goes straight to the allocator underneath. */
NO_SAN static void free_unaligned(void *p) {
  if (CPROF__UNLIKELY(cprof__heap_free_checks(p))) {
    free_slow(p);
    return;
  }
  CPROF__ALLOC_LOAD(free)(p);
}

/* A block of n bytes as malloc makes it: whether it is sampled goes to
 * *sample and its tracking word (see cprof__heap_record) to *meta, for the
 * caller to record from cprof_alloc_text. */
NO_SAN static void *alloc_block(size_t n, bool *sample,
                                _Atomic uint64_t **meta) {
  *meta = NULL;
  *sample = cprof__heap_should_sample(n);
  void *p = *sample ? cprof__heap_place_sampled(n, false, meta) : NULL;
  if (!p) p = CPROF__ALLOC_LOAD(malloc)(n);
  if (!p) *sample = false;
  return p;
}

/* The exported allocator. Each one that can sample calls cprof__heap_record
 * from a function in cprof_alloc_text, so that every sampled stack starts
 * at the application's call site. */

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
  if (CPROF__UNLIKELY(sample)) cprof__heap_record(p, n, meta);
  return p;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* On x86-64 the countdown is charged by one read-modify-write whose
 * borrow (or zero) flag is the test: four instructions in all, where the
 * C below takes seven. CHARGE_OR(n, label) charges n and jumps to label
 * when that used the countdown up; the code at label gives the charge back
 * before its slow path. The countdown is an input that the instruction
 * writes: asm goto with outputs loses its jump path with gcc 12, and the
 * memory clobber tells the compiler that the countdown changed. */
#define CHARGE_OR(n, label)                                   \
  __asm__ goto("subq %1, %0\n\t"                              \
               "jbe %l[" #label "]"                           \
               :                                              \
               : "m"(cprof__heap_tls.countdown), "r"(n)       \
               : "cc", "memory"                               \
               : label)

NO_SAN ALLOC_TEXT CPROF_EXPORT void *malloc(size_t n) {
  CHARGE_OR(n, slow);
  return CPROF__ALLOC_LOAD(malloc)(n);
slow:
  cprof__heap_tls.countdown += n;
  return malloc_slow(n);
}

#else
NO_SAN ALLOC_TEXT CPROF_EXPORT void *malloc(size_t n) {
  cprof__heap_sampler *s = &cprof__heap_tls;
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

/* calloc's every case but the common one: before the allocator is
 * found, on a guarded thread, an overflowing request, and a countdown that
 * ran out. */
NO_SAN ALLOC_TEXT static __attribute__((noinline)) void *calloc_slow(
    size_t n, size_t size) {
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
  if (overflow || CPROF__LIKELY(!cprof__heap_should_sample(total)))
    return f(n, size);
  _Atomic uint64_t *meta = NULL;
  void *p = cprof__heap_place_sampled(total, true, &meta);
  if (!p) p = f(n, size);
  if (p) cprof__heap_record(p, total, meta);
  return p;
}

/* calloc's common case is malloc's: the countdown charged by one
 * read-modify-write (it reads 0 on a guarded thread, and before the
 * thread's first draw, so those go to the slow path), then a tail call to
 * the allocator's calloc once it is found. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
NO_SAN ALLOC_TEXT CPROF_EXPORT void *calloc(size_t n, size_t size) {
  size_t total;
  if (CPROF__UNLIKELY(__builtin_mul_overflow(n, size, &total)))
    return calloc_slow(n, size);
  CHARGE_OR(total, slow);
  calloc_fn f = CPROF__ALLOC_LOAD(calloc);
  if (CPROF__LIKELY(f != NULL)) return f(n, size);
slow:
  cprof__heap_tls.countdown += total;
  return calloc_slow(n, size);
}

#else
NO_SAN ALLOC_TEXT CPROF_EXPORT void *calloc(size_t n, size_t size) {
  cprof__heap_sampler *s = &cprof__heap_tls;
  size_t total;
  calloc_fn f = CPROF__ALLOC_LOAD(calloc);
  if (CPROF__LIKELY(!__builtin_mul_overflow(n, size, &total) &&
                    total < s->countdown && f != NULL)) {
    s->countdown -= total;
    return f(n, size);
  }
  return calloc_slow(n, size);
}
#endif

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
 * same offset in front, so the data stays where the offset says, and a
 * page more when there is an offset, so that the data can be moved back
 * to a page boundary. */
NO_SAN static void *realloc_tracked(void *p, uint64_t meta, uint32_t delta,
                                    size_t n, bool *sample,
                                    _Atomic uint64_t **out_meta) {
  realloc_fn f = CPROF__ALLOC_LOAD(realloc);
  unsigned char *base = (unsigned char *)p - delta;
  /* A zero size reaches the allocator as zero: it decides what that
   * means (glibc frees the block and returns NULL). */
  size_t want = n == 0 ? 0 : n + (delta ? PAGE : 0);
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
  unsigned char *q = nb + delta;
  *sample = cprof__heap_should_sample(n);
  if (delta == 0) return *sample ? settle(q, n, true, out_meta) : q;
  /* Growing in place and glibc's mremap keep the block's offset in its
   * page; the allocator copied a block it put at another offset. Off a
   * page boundary the block would send every free() to a slower path
   * while it lives: a small one moves down to the allocator's own
   * pointer, untracked (and is settled as a new block when sampled), a
   * larger one up to the first page boundary, in the page asked for
   * above; either when the budget allows the copy. */
  if (((uintptr_t)q & (PAGE - 1)) != 0 && cprof__heap_copy_spend(n)) {
    if (n <= UNTRACK_MAX) {
      memmove(nb, q, n);
      return *sample ? settle(nb, n, true, out_meta) : nb;
    }
    unsigned char *a =
        (unsigned char *)(((uintptr_t)nb + PAGE - 1) & ~(PAGE - 1));
    memmove(a, q, n);
    q = a;
    delta = (uint32_t)(a - nb);
  }
  /* The new block stays tracked, sampled or not (with a stack id of 0
   * when not). If the live set is full, the data moves down to the
   * allocator's own pointer instead. */
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
 * result is to be sampled, with *meta as for cprof__heap_record (the caller
 * records it, for the stack's sake). */
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
  if (q && CPROF__UNLIKELY(cprof__heap_should_sample(n))) {
    *sample = true;
    q = settle(q, n, true, meta);
  }
  return q;
}

/* realloc's every case but the common one (see realloc below). */
NO_SAN ALLOC_TEXT static __attribute__((noinline)) void *realloc_slow(
    void *p, size_t n) {
  bool sample;
  _Atomic uint64_t *meta;
  void *q = realloc_impl(p, n, &sample, &meta);
  if (CPROF__UNLIKELY(sample)) cprof__heap_record(q, n, meta);
  return q;
}

/* Whether realloc(p, n) may skip realloc_impl's tests: a block of the
 * allocator underneath, neither cprof's (the bootstrap arena, its own
 * heap's small blocks; its large ones and the region's lie on a page
 * boundary) nor possibly a sampled one (on a page boundary, or off one
 * while sampled blocks live off one). */
NO_SAN static inline __attribute__((always_inline)) bool realloc_plain(
    const void *p) {
  return p != NULL && ((uintptr_t)p & (PAGE - 1)) != 0 &&
         !cprof__in_arena(p) &&
         !(CPROF__OWN_ENABLED && cprof__own_small(p)) &&
         atomic_load_explicit(&cprof__heap_hot.unaligned_live,
                              memory_order_relaxed) == 0;
}

/* realloc's common case is malloc's: a plain block (realloc_plain), the
 * countdown charged by one read-modify-write (it reads 0 on a guarded
 * thread, and before the thread's first draw, so those go to the slow
 * path, as does a charge that would use it up), then a tail call to the
 * allocator's realloc once it is found. The compiler calls realloc about
 * 120,000 times a run; through realloc_impl each call cost a frame and a
 * call more. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
NO_SAN ALLOC_TEXT CPROF_EXPORT void *realloc(void *p, size_t n) {
  if (CPROF__UNLIKELY(!realloc_plain(p))) return realloc_slow(p, n);
  CHARGE_OR(n, slow);
  realloc_fn f = CPROF__ALLOC_LOAD(realloc);
  if (CPROF__LIKELY(f != NULL)) return f(p, n);
slow:
  cprof__heap_tls.countdown += n;
  return realloc_slow(p, n);
}

#else
NO_SAN ALLOC_TEXT CPROF_EXPORT void *realloc(void *p, size_t n) {
  cprof__heap_sampler *s = &cprof__heap_tls;
  realloc_fn f = CPROF__ALLOC_LOAD(realloc);
  if (CPROF__LIKELY(realloc_plain(p) && n < s->countdown && f != NULL)) {
    s->countdown -= n;
    return f(p, n);
  }
  return realloc_slow(p, n);
}
#endif

NO_SAN ALLOC_TEXT CPROF_EXPORT void *reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  bool sample;
  _Atomic uint64_t *meta;
  void *q = realloc_impl(p, total, &sample, &meta);
  if (CPROF__UNLIKELY(sample)) cprof__heap_record(q, total, meta);
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
  if (p && CPROF__UNLIKELY(cprof__heap_should_sample(n))) {
    _Atomic uint64_t *meta;
    p = settle(p, n, false, &meta);
    cprof__heap_record(p, n, meta);
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

/*
 * Fork. free()'s target lock is held across fork, so that a child never
 * inherits it held; every other table of the heap sampler is lock-free,
 * so none can be caught half-locked and a child keeps them as they were.
 * In the child a resolution interrupted by the fork is started over, and
 * the forking thread draws a fresh seed so parent and child do not sample
 * in lockstep.
 */
static void atfork_prepare(void) { cprof__heap_free_next_lock(); }
static void atfork_parent(void) { cprof__heap_free_next_unlock(); }

static void atfork_child(void) {
  cprof__heap_free_next_release_stale();
  cprof__alloc_atfork_child();
  cprof__heap_reseed();
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_once_fn(void) {
  cprof__heap_live_slow_free(free_unaligned);
  /* The allocation interposers, as a program's calls reach them, for the
   * tail-call frames (profile.c). */
  static const uintptr_t mine[] = {
      (uintptr_t)malloc,        (uintptr_t)calloc,
      (uintptr_t)realloc,       (uintptr_t)reallocarray,
      (uintptr_t)posix_memalign, (uintptr_t)aligned_alloc,
      (uintptr_t)memalign,      (uintptr_t)valloc,
      (uintptr_t)pvalloc,       (uintptr_t)free};
  cprof__interposers_register(mine, CPROF__ARRAY_LEN(mine));
  cprof__atfork(CPROF__FORK_HEAP, atfork_prepare, atfork_parent,
                atfork_child);
  cprof__heap_sampler_init();
}

void cprof__heap_init(void) { pthread_once(&init_once, init_once_fn); }


/* This module's own constructor: a program linked with the static library
 * always pulls in heap_interpose.o (it defines malloc) but not necessarily
 * the library's constructor in init.c. */
__attribute__((constructor)) static void heap_constructor(void) {
  cprof__heap_init();
}

