/*
 * cprof's fork handlers in one pthread_atfork registration (fork.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "base/lock.h"
#include "base/own_heap.h"
#include "base/spin.h"

typedef struct handlers {
  void (*prepare)(void);
  void (*parent)(void);
  void (*child)(void);
} handlers;

static handlers table[CPROF__FORK_HANDLERS];
static _Atomic size_t count;   /* entries of table filled in */
static size_t forked_count;    /* count when the fork began */
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool child_running;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The registration lock is held from the first prepare handler to the
 * end of the fork, as glibc holds its own: a module that registers while
 * a fork is under way (and then takes the lock its handlers would have
 * taken) waits until the fork is over, instead of leaving the child its
 * lock held with none of its handlers run. */
static void run_prepare(void) {
  cprof__lock(&register_lock);
  atomic_store(&cprof__pid_cache, 0);
  size_t n = atomic_load(&count);
  forked_count = n;
  for (size_t i = n; i-- > 0;)
    if (table[i].prepare) table[i].prepare();
}

static void run_parent(void) {
  atomic_store(&cprof__pid_cache, (int)getpid());
  for (size_t i = 0; i < forked_count; i++)
    if (table[i].parent) table[i].parent();
  cprof__unlock(&register_lock);
}

static void run_child(void) {
  atomic_store(&cprof__pid_cache, (int)getpid());
  atomic_store(&child_running, true);
  pthread_mutex_init(&register_lock, NULL);
  for (size_t i = 0; i < forked_count; i++)
    if (table[i].child) table[i].child();
  atomic_store(&child_running, false);
}

_Atomic int cprof__pid_cache;

static void first(void) {
  atomic_store(&cprof__pid_cache, (int)getpid());
  table[0] = (handlers){cprof__own_atfork_prepare, cprof__own_atfork_parent,
                        cprof__own_atfork_child};
  atomic_store(&count, 1);
  pthread_atfork(run_prepare, run_parent, run_child);
}

int cprof__atfork(void (*prepare)(void), void (*parent)(void),
                  void (*child)(void)) {
  pthread_once(&once, first);
  cprof__lock(&register_lock);
  size_t n = atomic_load(&count);
  if (n == CPROF__FORK_HANDLERS) {
    cprof__unlock(&register_lock);
    return ENOMEM;
  }
  table[n] = (handlers){prepare, parent, child};
  atomic_store(&count, n + 1);
  cprof__unlock(&register_lock);
  return 0;
}

bool cprof__fork_child_running(void) { return atomic_load(&child_running); }

void cprof__fork_child_wait(void) {
  for (int spins = 0; atomic_load(&child_running); spins++) {
    if (spins < 100) {
      sched_yield();
    } else {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
  }
}
