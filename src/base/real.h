/*
 * The pthread, semaphore and sigaction functions underneath cprof: the
 * next definition after cprof's own interposers (libc's, or a sanitizer's
 * interceptor), found once with dlsym(RTLD_NEXT) or dlvsym and kept in one
 * table. The interposers (lock_interpose.c, sig_interpose.c) chain to
 * these, and cprof's own locks
 * (lock.h) call them directly, so that a wait inside cprof never passes
 * through an interposer and never reaches the application's profiles.
 *
 * cprof__real() is a load and a branch once a function is resolved; the
 * first call of each resolves it (dlsym may allocate, and an allocator may
 * lock: a lookup that recurses on its thread gets glibc's __pthread_*
 * alias where there is one). It never changes errno on the resolved path.
 * Not for signal handlers.
 */
#ifndef CPROF_REAL_H
#define CPROF_REAL_H

#include <errno.h>
#include <stdatomic.h>

#include "base/internal.h"

enum cprof__real_id {
  CPROF__F_MUTEX_LOCK,
  CPROF__F_MUTEX_TRYLOCK,
  CPROF__F_MUTEX_TIMEDLOCK,
  CPROF__F_MUTEX_CLOCKLOCK,
  CPROF__F_MUTEX_UNLOCK,
  CPROF__F_RW_RDLOCK,
  CPROF__F_RW_TRYRDLOCK,
  CPROF__F_RW_TIMEDRDLOCK,
  CPROF__F_RW_CLOCKRDLOCK,
  CPROF__F_RW_WRLOCK,
  CPROF__F_RW_TRYWRLOCK,
  CPROF__F_RW_TIMEDWRLOCK,
  CPROF__F_RW_CLOCKWRLOCK,
  CPROF__F_RW_UNLOCK,
  CPROF__F_COND_WAIT,
  CPROF__F_COND_TIMEDWAIT,
  CPROF__F_COND_CLOCKWAIT,
  CPROF__F_SEM_WAIT,
  CPROF__F_SEM_TRYWAIT,
  CPROF__F_SEM_TIMEDWAIT,
  CPROF__F_SEM_CLOCKWAIT,
  CPROF__F_BARRIER_WAIT,
  CPROF__F_JOIN,
  CPROF__F_TRYJOIN,
  CPROF__F_SIGACTION,
  CPROF__F_COUNT,
};

/* The resolved functions, NULL until first used. */
CPROF__HIDDEN extern _Atomic(void *) cprof__real_fns[CPROF__F_COUNT];

/* Resolves function f; returns NULL when it cannot be found. */
CPROF__HIDDEN void *cprof__real_resolve(int f);

/* What a function that cannot be found does: fails with EAGAIN. Called
 * through the caller's pointer type; the SysV and AAPCS64 calling
 * conventions make the extra arguments harmless. */
CPROF__HIDDEN int cprof__real_missing(void);

/* The real function f, resolving it on first use. */
static inline void *cprof__real(int f) {
  void *p = atomic_load_explicit(&cprof__real_fns[f], memory_order_acquire);
  if (CPROF__LIKELY(p != NULL)) return p;
  p = cprof__real_resolve(f);
  return p ? p : (void *)cprof__real_missing;
}

/* The sigaction underneath cprof's interposer: for cprof's own
 * dispositions (source/signals.h), which must not pass through the
 * interposer as if the program had made them. */
struct sigaction;
typedef int (*cprof__sigaction_fn)(int, const struct sigaction *,
                                   struct sigaction *);
static inline int cprof__real_sigaction(int sig, const struct sigaction *act,
                                        struct sigaction *old) {
  void *f = cprof__real(CPROF__F_SIGACTION);
  if (f == (void *)cprof__real_missing) {
    errno = ENOSYS; /* as sigaction fails, not as a pthread function */
    return -1;
  }
  return ((cprof__sigaction_fn)f)(sig, act, old);
}

/* Resolves every function now (the constructor calls it, so that later
 * first uses never enter the dynamic loader). */
CPROF__HIDDEN void cprof__real_init(void);

#endif
