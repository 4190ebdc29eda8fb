/*
 * cprof's one spinlock, for the rare writer-side sections that fork
 * handlers hold across fork (the heap sampler's free target, the unwind
 * tables' writer). It records the holder's pid: in a fork child, a lock
 * still held under the parent's pid is stale, since its holder does not
 * exist there, and the next taker takes it over. That matters when a fork
 * handler registered before cprof's runs first in the child and allocates
 * (ThreadSanitizer's starts a thread): without the takeover it would spin
 * forever on the lock cprof's own child handler has not released yet.
 * Normal context; never for a signal handler (the holder may be the very
 * thread it interrupted). A vfork child must not take it (it may not
 * allocate either).
 */
#ifndef CPROF_SPIN_H
#define CPROF_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "base/sys.h"

typedef struct {
  _Atomic int owner; /* the holder's pid, 0 when free */
} cprof__spin;

/*
 * The functions, defined in each file that uses the lock with that file's
 * sanitizer attributes (ATTR): the heap sampler's must stay
 * uninstrumented, since it runs before a sanitizer's runtime is set up,
 * while the unwind tables' writer wants ThreadSanitizer to see the lock.
 * One definition, expanded per file:
 *   spin_try_as(l, pid)   takes a free lock, or a stale one (held under
 *                         another pid)
 *   spin_trylock(l), spin_lock(l), spin_unlock(l)
 *   spin_release_stale(l) for a fork child's handler: releases the lock
 *                         the parent's prepare handler left held, unless a
 *                         taker in the child already took it over
 */
/* The process's pid, kept by base/fork.c so that taking a lock costs no
 * system call: 0 (ask the kernel) from a fork's prepare handlers until
 * its parent or child handlers, so that a fork handler registered before
 * cprof's, running first in the child, sees the child's pid. A child of
 * _Fork or of a raw clone, where no handler runs, still holds its
 * parent's pid here: a taker that finds the lock held asks the kernel
 * again before it waits (spin_lock), so such a child takes over a lock
 * its parent's thread held instead of waiting on itself. */
extern _Atomic int cprof__pid_cache;

#define CPROF__SPIN_FUNCTIONS(ATTR)                                        \
  ATTR static int spin_real_pid(void) {                                     \
    return (int)cprof__sys4(SYS_getpid, 0, 0, 0, 0);                        \
  }                                                                         \
  ATTR static int spin_pid(void) {                                          \
    int p = atomic_load_explicit(&cprof__pid_cache, memory_order_relaxed);  \
    return p ? p : spin_real_pid();                                         \
  }                                                                         \
  ATTR static bool spin_try_as(cprof__spin *l, int me) {                    \
    int cur = 0;                                                            \
    if (atomic_compare_exchange_strong_explicit(&l->owner, &cur, me,        \
                                                memory_order_acquire,       \
                                                memory_order_relaxed))      \
      return true;                                                          \
    return cur != me && atomic_compare_exchange_strong_explicit(            \
                            &l->owner, &cur, me, memory_order_acquire,      \
                            memory_order_relaxed);                          \
  }                                                                         \
  ATTR __attribute__((unused)) static bool spin_trylock(cprof__spin *l) {   \
    int me = spin_pid(), real;                                              \
    return spin_try_as(l, me) ||                                            \
           ((real = spin_real_pid()) != me && spin_try_as(l, real));         \
  }                                                                         \
  ATTR static void spin_lock(cprof__spin *l) {                              \
    int me = spin_pid();                                                    \
    if (spin_try_as(l, me)) return;                                         \
    me = spin_real_pid();                                                   \
    while (!spin_try_as(l, me)) sched_yield();                              \
  }                                                                         \
  ATTR static void spin_unlock(cprof__spin *l) {                            \
    atomic_store_explicit(&l->owner, 0, memory_order_release);              \
  }                                                                         \
  ATTR static void spin_release_stale(cprof__spin *l) {                     \
    int cur = atomic_load_explicit(&l->owner, memory_order_relaxed);        \
    if (cur != 0 && cur != spin_real_pid())                                 \
      atomic_compare_exchange_strong_explicit(                              \
          &l->owner, &cur, 0, memory_order_release, memory_order_relaxed);  \
  }

#endif
