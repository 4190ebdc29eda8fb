/*
 * Lock contention: the mutex and block profiles, with Go's meanings. The
 * pthread blocking functions (mutex and rwlock lock/unlock, condition
 * waits, semaphores, barriers, pthread_join) are interposed, linked or
 * preloaded, and chain to the next definition. Both profiles are off by
 * default; when they are off each interposer costs one relaxed load and a
 * branch. When on, only the slow path pays: a lock is tried first and only
 * a failed try is timed.
 *
 * block: where threads waited (the waiter's stack), with
 * SetBlockProfileRate semantics (rate in ns). mutex: who made them wait
 * (the stack that released the lock), with SetMutexProfileFraction
 * semantics. Records are raw: contentions in thousandths of an event (block
 * sampling adds fractional counts, as Go's float counts do) and delay in
 * nanoseconds; the writers scale counts back to events.
 */
#ifndef CPROF_LOCK_INTERPOSE_H
#define CPROF_LOCK_INTERPOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "capture/agg.h"

/* Records count contentions in units of 1/CPROF__CONTENTION_UNIT. */
#define CPROF__CONTENTION_UNIT 1000


/* Whether each profile is recording. Thread-safe and signal-safe. */
CPROF__HIDDEN bool cprof__mutex_profile_enabled(void);
CPROF__HIDDEN bool cprof__block_profile_enabled(void);

/* Resolves the real pthread functions and applies CPROF_MUTEX_FRACTION and
 * CPROF_BLOCK_RATE. Called once from the constructor. */
CPROF__HIDDEN void cprof__contention_env_init(void);

/* Go's block sampling for one event of d ns at rate ns, given a uniform
 * random number rnd: false when the event is not sampled, else the count
 * (in 1/CPROF__CONTENTION_UNIT) and delay to add. Pure; a test seam. */
CPROF__HIDDEN bool cprof__block_weigh(int64_t d, int64_t rate, uint64_t rnd,
                                      int64_t *count, int64_t *delay);

/* For the profiles: the aggregation table of mutex (true) or block events,
 * NULL until the profile was first turned on; the mutex fraction. */
CPROF__HIDDEN cprof__agg *cprof__contention_agg(bool mutex);
CPROF__HIDDEN int cprof__mutex_fraction(void);

#endif
