/*
 * cprof's fork handlers in one pthread_atfork registration, run in the
 * fixed order of their slots (fork.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
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

static handlers table[CPROF__FORK_SLOTS];
#define LAST_MAX 4
static void (*last[LAST_MAX])(void); /* cprof__atfork_child_last's */
static _Atomic int nlast;
static _Atomic uint32_t filled;  /* bit per slot of table filled in */
static uint32_t forked;          /* filled when the fork began */
static CPROF__FORK_LOCK pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool child_running;
static pthread_once_t once = PTHREAD_ONCE_INIT;

_Static_assert(CPROF__FORK_SLOTS <= 32, "a bit per slot");

/* The registration lock is held from the first prepare handler to the
 * end of the fork, as glibc holds its own: a module that registers while
 * a fork is under way (and then takes the lock its handlers would have
 * taken) waits until the fork is over, instead of leaving the child its
 * lock held with none of its handlers run. */
static void run_prepare(void) {
  cprof__lock(&register_lock);
  atomic_store(&cprof__pid_cache, 0);
  forked = atomic_load(&filled);
  for (int i = CPROF__FORK_SLOTS; i-- > 0;)
    if ((forked >> i & 1) && table[i].prepare) table[i].prepare();
}

static void run_parent(void) {
  atomic_store(&cprof__pid_cache, (int)getpid());
  for (int i = 0; i < CPROF__FORK_SLOTS; i++)
    if ((forked >> i & 1) && table[i].parent) table[i].parent();
  cprof__unlock(&register_lock);
}

static void run_child(void) {
  atomic_store(&cprof__pid_cache, (int)getpid());
  atomic_store(&child_running, true);
  pthread_mutex_init(&register_lock, NULL);
  for (int i = 0; i < CPROF__FORK_SLOTS; i++)
    if ((forked >> i & 1) && table[i].child) table[i].child();
  for (int i = 0, n = atomic_load(&nlast); i < n; i++) last[i]();
  atomic_store(&child_running, false);
}

/* 0 when slot's handlers are h, else EINVAL. */
static int same(const handlers *slot, const handlers *h) {
  return slot->prepare == h->prepare && slot->parent == h->parent &&
                 slot->child == h->child
             ? 0
             : EINVAL;
}

static void first(void) {
  atomic_store(&cprof__pid_cache, (int)getpid());
  table[CPROF__FORK_OWN_HEAP] =
      (handlers){cprof__own_atfork_prepare, cprof__own_atfork_parent,
                 cprof__own_atfork_child};
  atomic_store(&filled, 1u << CPROF__FORK_OWN_HEAP);
  pthread_atfork(run_prepare, run_parent, run_child);
}

int cprof__atfork(cprof__fork_slot slot, void (*prepare)(void),
                  void (*parent)(void), void (*child)(void)) {
  if ((unsigned)slot >= CPROF__FORK_SLOTS) return EINVAL;
  pthread_once(&once, first);
  const handlers h = {prepare, parent, child};
  /* A slot once filled is never changed: its handlers are read without
   * the lock, which a fork under way holds. */
  if (atomic_load(&filled) >> slot & 1) return same(&table[slot], &h);
  int err = 0;
  cprof__lock(&register_lock);
  uint32_t bits = atomic_load(&filled);
  if (bits >> slot & 1) {
    err = same(&table[slot], &h);
  } else {
    table[slot] = h;
    atomic_store(&filled, bits | 1u << slot);
  }
  cprof__unlock(&register_lock);
  return err;
}

int cprof__atfork_child_last(void (*fn)(void)) {
  pthread_once(&once, first);
  int err = 0;
  cprof__lock(&register_lock);
  int n = atomic_load(&nlast), i = 0;
  while (i < n && last[i] != fn) i++;
  if (i == n) {
    if (n == LAST_MAX) {
      err = EINVAL;
    } else {
      last[n] = fn;
      atomic_store(&nlast, n + 1);
    }
  }
  cprof__unlock(&register_lock);
  return err;
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
