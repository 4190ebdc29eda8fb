/*
 * cprof's own locks, condition waits and joins. They call the functions
 * underneath cprof's interposers (real.h) directly, so a wait on one of
 * cprof's locks is never timed, never walks a stack and never shows up in
 * the application's mutex or block profile, whichever thread takes it. Every
 * lock cprof's own code takes goes through these; the plain pthread names
 * are for the interposers alone. Normal context only: none of it may be
 * called from a signal handler.
 */
#ifndef CPROF_LOCK_H
#define CPROF_LOCK_H

#include <pthread.h>
#include <time.h>

#include "base/real.h"

static inline void cprof__lock(pthread_mutex_t *m) {
  ((int (*)(pthread_mutex_t *))cprof__real(CPROF__F_MUTEX_LOCK))(m);
}

/* 0 when m was free and is now held. */
static inline int cprof__trylock(pthread_mutex_t *m) {
  return ((int (*)(pthread_mutex_t *))cprof__real(CPROF__F_MUTEX_TRYLOCK))(m);
}

static inline void cprof__unlock(pthread_mutex_t *m) {
  ((int (*)(pthread_mutex_t *))cprof__real(CPROF__F_MUTEX_UNLOCK))(m);
}

static inline int cprof__cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  return ((int (*)(pthread_cond_t *, pthread_mutex_t *))cprof__real(
      CPROF__F_COND_WAIT))(c, m);
}

/* Returns ETIMEDOUT once abs (CLOCK_REALTIME, or the condition's clock)
 * has passed, as pthread_cond_timedwait does. */
static inline int cprof__cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                        const struct timespec *abs) {
  return ((int (*)(pthread_cond_t *, pthread_mutex_t *,
                   const struct timespec *))cprof__real(
      CPROF__F_COND_TIMEDWAIT))(c, m, abs);
}

static inline int cprof__join(pthread_t t, void **ret) {
  return ((int (*)(pthread_t, void **))cprof__real(CPROF__F_JOIN))(t, ret);
}

#endif
