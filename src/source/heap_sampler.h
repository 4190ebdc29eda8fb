/*
 * The heap sampler: the malloc family (heap_interpose.c; and, in
 * cxx_interpose.c, C++'s operator new and delete) interposed over whatever
 * allocator lies underneath, a per-thread byte countdown that samples
 * allocations as a Poisson process over allocated bytes (Go's
 * runtime/mprof.go maths; heap_sampler.c), and the live set of sampled
 * blocks (heap_live.c, whose header the heap files share). The `heap` and
 * `allocs` profiles (profile/heap.c) read them through the accessors at
 * the end.
 *
 * The pieces below the profiles are exposed so the unit tests can check the
 * sampling maths on their own.
 */
#ifndef CPROF_HEAP_SAMPLER_H
#define CPROF_HEAP_SAMPLER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mem.h"
#include "capture/agg.h"

/* The interposers and everything they reach before a sample run
 * uninstrumented: a sanitizer runtime allocates (through them) while it is
 * still initialising, before its shadow memory exists. The heap sampler's
 * files (heap_interpose.c, heap_sampler.c, heap_live.c) mark those
 * functions with this. */
#define CPROF__HEAP_NO_SAN \
  __attribute__((no_sanitize("address", "thread", "undefined")))

/* Every function that can stand between the application's call and
 * cprof__heap_record lives in one section, so that the record can leave
 * exactly those frames out of a sampled stack, however the compiler
 * arranged the calls (a tail call at -O2, a frame of its own at -O0). */
#define CPROF__ALLOC_TEXT __attribute__((section("cprof_alloc_text")))

#define CPROF__HEAP_DEFAULT_RATE 524288
/* From this rate up, sampled blocks are placed on page boundaries, where
 * free() recognises them by their address alone (heap_live.c). */
#define CPROF__HEAP_ALIGN_MIN_RATE 65536

/* Sets the whole heap sampler up: the interposers' part (their addresses
 * for the encoder's tail-call frames, free()'s slow path, the fork
 * handlers: heap_interpose.c), then the sampler's. Idempotent and
 * thread-safe. Normal context only. */
CPROF__HIDDEN void cprof__heap_init(void);

/* The sampler's part: prepares the tables and reads CPROF_HEAP_RATE. What
 * the sampler calls when it finds itself not set up (a program linked
 * with the static library, whose heap_interpose.o brings its own
 * constructor for the rest). Idempotent and thread-safe. */
CPROF__HIDDEN void cprof__heap_sampler_init(void);

/* Heap sampling nothing can read (docs/heap.md, "Sampling nobody
 * reads"). The serving hook of the profiles made from heap samples (heap,
 * allocs, heap_peak: profile/registry.h) says a sink may read them; a
 * preloaded program with dumps whose start-up ends with no sink asking
 * (its dumps name none of them, no endpoint, no pusher) stops sampling
 * through cprof__heap_idle_unless_asked, unless CPROF_HEAP_RATE or
 * cprof_heap_set_rate set a rate. The first sink to ask later (profilez,
 * cprof_profile_write, an endpoint or dumps started by the program)
 * brings the default rate back, from then on. Thread-safe. */
CPROF__HIDDEN void cprof__heap_serving(void);
CPROF__HIDDEN void cprof__heap_idle_unless_asked(void);

/* One thread's sampling state: bytes left before the next sample, and the
 * state of its random generator (0 until the thread's first draw). */
typedef struct cprof__heap_sampler {
  uint64_t countdown;
  uint64_t rng;
} cprof__heap_sampler;

/* Park and unpark the calling thread's countdown, for the guard (mem.c)
 * as a thread enters and leaves profiler code: parked, the countdown reads
 * 0, so every allocation takes malloc's slow path, which neither samples
 * nor charges it; unparking restores it untouched. Signal-safe. */
CPROF__HIDDEN void cprof__heap_park(void);
CPROF__HIDDEN void cprof__heap_unpark(void);

/* Accounting an allocation of n bytes is, on the common path,
 *   if (n < s->countdown) s->countdown -= n;
 * and when that fails (the countdown ran out, or the sampler has never
 * drawn), this: it draws the next countdown and returns whether the
 * allocation is sampled. rate 0 never samples; rate 1 samples every
 * allocation. */
CPROF__HIDDEN bool cprof__heap_sampler_expired(cprof__heap_sampler *s,
                                               uint64_t rate, size_t n);

/* An exponentially distributed interval with mean rate bytes, rounded up
 * (at least 1). Advances *rng, which must be nonzero. */
CPROF__HIDDEN uint64_t cprof__heap_draw_interval(uint64_t *rng, uint64_t rate);

/* Go's unsampling of one (count, bytes) pair sampled at rate:
 * scale = 1 / (1 - exp(-avg / rate)) with avg = bytes / count; rate <= 1
 * leaves the values as they are. */
CPROF__HIDDEN void cprof__heap_unsample(int64_t count, int64_t bytes,
                                        int64_t rate, int64_t *out_count,
                                        int64_t *out_bytes);

/* The size class a sampled object is recorded under (the profile's tag and
 * its `bytes` label): requests up to 16 bytes round up to a multiple of 8,
 * larger ones to a multiple of a quarter of their power of two (100 -> 112,
 * 4096 -> 4096), saturating at UINT32_MAX. */
CPROF__HIDDEN uint32_t cprof__heap_size_class(size_t n);

/* ln(x) and exp(x) without libm (cprof does not link it), accurate to a
 * few units in the last place over the ranges the sampler uses. */
CPROF__HIDDEN double cprof__heap_ln(double x);
CPROF__HIDDEN double cprof__heap_exp(double x);

/* How many sampled objects are live and tracked for their free, and how
 * many sampled objects could not be tracked (the live table was full, or
 * could not grow). */
CPROF__HIDDEN uint64_t cprof__heap_live_sampled(void);
CPROF__HIDDEN uint64_t cprof__heap_untracked(void);
/* How many times mapping a chunk of the live set or the region failed
 * (`ulimit -v`): both grow by chunks as samples need them. */
CPROF__HIDDEN uint64_t cprof__heap_grow_failures(void);
/* Hands back what the calling thread keeps for its next sample (a page of
 * the region); for a thread's exit. */
CPROF__HIDDEN void cprof__heap_thread_exit(void);
/* How many pages of the region have ever been handed out (the free ones
 * included): its high-water mark. */
CPROF__HIDDEN uint64_t cprof__heap_region_pages(void);

/* How many live sampled blocks are tracked off a page boundary (while any
 * are, every free() takes the slow path). */
CPROF__HIDDEN uint64_t cprof__heap_unaligned_live(void);
/* The calling thread's countdown as malloc sees it (0 while parked). */
CPROF__HIDDEN uint64_t cprof__heap_thread_countdown(void);

/* For the profiles: the aggregation of samples by (striped stack id, size
 * class), values {count, bytes}; NULL when it could not be made. */
CPROF__HIDDEN cprof__agg *cprof__heap_samples(void);
/* The stack id a striped one stands for. */
CPROF__HIDDEN cprof__stack_id cprof__heap_unstripe(cprof__stack_id sid);
/* Calls fn with the stack id and size of every live sampled block; blocks
 * allocated or freed meanwhile may or may not be seen. */
CPROF__HIDDEN void cprof__heap_foreach_live(
    void (*fn)(cprof__stack_id sid, size_t size, void *ctx), void *ctx);
/* The sampling rate in bytes (0: off), kept in heap_live.c, where placing
 * a sampled block depends on it; the exchange returns the previous one. */
CPROF__HIDDEN long cprof__heap_rate(void);
/* A count of the samples recorded so far, and a wait until it differs
 * from seen (the next sample wakes the waiter): for the heap-peak
 * tracker, which has nothing to look at while no sample is taken. */
CPROF__HIDDEN uint32_t cprof__heap_sample_seq(void);
CPROF__HIDDEN void cprof__heap_wait_sample(uint32_t seen);
CPROF__HIDDEN long cprof__heap_rate_exchange(long rate);
/* Sets the rate to `to` if it is `from`; returns whether it did. */
CPROF__HIDDEN bool cprof__heap_rate_replace(long from, long to);

/*
 * For the C++ allocation functions (cxx_interpose.c), which sample through this
 * module: same countdown, same placement, same records, same recognition of
 * a sampled block's free. All are NO_SAN like malloc.
 *
 * cprof__heap_take(n) charges n bytes to the calling thread's countdown as
 * malloc does and says whether the allocation is sampled.
 * cprof__heap_hold() sets the countdown so high that nothing the thread
 * allocates until cprof__heap_unhold() is charged or sampled, and returns
 * the countdown for cprof__heap_unhold(): for the call to an operator new
 * underneath that may itself call malloc (libstdc++'s does), so that one
 * allocation is counted once. cprof__heap_place(n, &meta) places a sampled
 * block of n bytes where free recognises it (NULL when it cannot: the caller
 * allocates as usual, with meta NULL), and cprof__heap_record(p, n, meta)
 * records it, from cprof_alloc_text, so that the stack starts at the
 * application's call. cprof__heap_release(p) frees p if it is a block that
 * cprof placed and returns true; otherwise (not sampled, or sampled where
 * the allocator put it, which it forgets) the caller frees p as usual.
 */
#define CPROF__HEAP_HELD ((uint64_t)1 << 62)
/* The calling thread's sampler, for an inline charge as malloc's:
 *   if (n < cprof__heap_tls.countdown) cprof__heap_tls.countdown -= n;
 * else cprof__heap_take(n) decides. */
CPROF__HIDDEN extern __thread cprof__heap_sampler cprof__heap_tls CPROF__TLS;
/* How many sampled blocks are tracked off a page boundary: while it is not
 * zero, every pointer may be a sampled block (as for free). */
CPROF__HIDDEN extern _Atomic uint64_t *const cprof__heap_unaligned_count;
CPROF__HIDDEN bool cprof__heap_take(size_t n);
/* Whether the sampler is set up (before, nothing is sampled or charged
 * but by malloc's inline path). */
CPROF__HIDDEN bool cprof__heap_ready(void);
CPROF__HIDDEN uint64_t cprof__heap_hold(void);
CPROF__HIDDEN void cprof__heap_unhold(uint64_t countdown);
CPROF__HIDDEN void *cprof__heap_place(size_t n, _Atomic uint64_t **meta);
/* Records a sampled allocation of n bytes at p, the malloc family's as
 * well. meta is the block's tracking word when placing it already tracked
 * it (cprof__heap_place, cprof__heap_place_sampled); otherwise the block
 * is added to the live set here. */
CPROF__HIDDEN void cprof__heap_record(void *p, size_t n,
                                      _Atomic uint64_t *meta);
CPROF__HIDDEN bool cprof__heap_release(void *p);

/*
 * For the malloc family (heap_interpose.c): the countdown's test, inline
 * as malloc's own, and the setup's calls between the files.
 */
/* The countdown ran out (or was never drawn, or is parked): says whether
 * the allocation of n bytes is sampled, false before the sampler is set
 * up and on a guarded thread; otherwise reads the rate if it is not yet
 * read and draws the next countdown. */
CPROF__HIDDEN bool cprof__heap_countdown_expired(size_t n);

/* Whether the calling thread's allocation of n bytes is sampled. The
 * profiler's own allocations neither sample nor move the countdown: a
 * guarded thread's countdown is parked at 0, as a thread's is before its
 * first draw, so both go to cprof__heap_countdown_expired, which tests
 * the set-up (before set-up nothing instrumented, such as the guard in
 * mem.c, may run) and the guard. */
CPROF__HEAP_NO_SAN static inline bool cprof__heap_should_sample(size_t n) {
  cprof__heap_sampler *s = &cprof__heap_tls;
  if (CPROF__LIKELY(n < s->countdown)) {
    s->countdown -= n;
    return false;
  }
  return cprof__heap_countdown_expired(n);
}

/* Draws the calling thread a fresh seed and countdown: after a change of
 * the rate, and in a fork child. */
CPROF__HIDDEN void cprof__heap_reseed(void);


#endif
