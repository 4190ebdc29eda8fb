/*
 * Threads the trampoline did not see (thread_scan.h). The trampoline's own
 * threads are in the task table (capture/taskread.h); this module keeps
 * the set of the others that are known (there when cprof started, or
 * already counted), reads /proc/self/task for the rest, and
 * runs the scanner thread that, while the CPU engine runs, has it arm
 * their timers. Normal context only; everything here is under one lock of
 * cprof's own, never held across a call into the CPU engine.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "source/cpu_timer.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "capture/stack.h"
#include "capture/taskread.h"
#include "source/thread_scan.h"
#include "source/threads.h"

/* What the set says of a tid (a value of 0 is an entry whose thread is
 * gone). */
enum { GONE = 0, KNOWN = 2 };

static CPROF__FORK_LOCK pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scan_cond = PTHREAD_COND_INITIALIZER;
static cprof__hmap threads_set; /* tid + 1 -> KNOWN; under scan_lock */
static size_t nlive;            /* entries not GONE */
static uint64_t unseen_total;   /* under scan_lock */
static pid_t scanner_pid;       /* the process whose scanner runs */
static bool scanner_started;    /* it is running (scanner_main began) */
/* The scanner's listing while it is in use, set and cleared under
 * scan_lock: reachable from here, so that a fork child frees it. */
static pid_t *scan_tids;
static uint64_t scan_generation; /* bumped by every wake */

static pid_t gettid_raw(void) { return (pid_t)syscall(SYS_gettid); }

/* Sets tid's state; scan_lock held. Out of memory leaves it unknown,
 * which at worst counts it in threadcreate. */
static void set_state(pid_t tid, uint64_t state) {
  uint64_t old = GONE;
  bool had = cprof__hmap_get(&threads_set, (uint64_t)tid + 1, &old);
  if (had && old == state) return;
  if (cprof__hmap_put(&threads_set, (uint64_t)tid + 1, state) != 0) return;
  if (old == GONE && state != GONE) nlive++;
  if (old != GONE && state == GONE) nlive--;
}

static uint64_t state_of(pid_t tid) {
  uint64_t v = GONE;
  cprof__hmap_get(&threads_set, (uint64_t)tid + 1, &v);
  return v;
}

/* The tids in /proc/self/task, in a buffer of cprof's; NULL when the
 * directory cannot be read whole. */
static pid_t *list_tasks(size_t *n) {
  pid_t *v;
  if (cprof__proc_tids(&v, n) != 0) {
    *n = 0;
    return NULL;
  }
  return v;
}

/* fork: the lock is held across it, so the child's set is whole; the
 * child has no scanner until its CPU engine wakes one. */
static void atfork_prepare(void) { cprof__lock(&scan_lock); }
static void atfork_parent(void) { cprof__unlock(&scan_lock); }
static void atfork_child(void) {
  /* The listing the parent's scanner was using, which no thread of the
   * child holds. */
  cprof__free(scan_tids);
  scan_tids = NULL;
  pthread_mutex_init(&scan_lock, NULL);
  pthread_cond_init(&scan_cond, NULL);
  scanner_started = false;
}

void cprof__thread_scan_init(void) {
  cprof__atfork(CPROF__FORK_THREAD_SCAN, atfork_prepare, atfork_parent,
                atfork_child);
  cprof__cpu_engine_listen(cprof__thread_scan_wake);
  size_t n;
  pid_t *tids = list_tasks(&n);
  cprof__lock(&scan_lock);
  for (size_t i = 0; i < n; i++) set_state(tids[i], KNOWN);
  if (!tids) set_state(gettid_raw(), KNOWN);
  cprof__unlock(&scan_lock);
  cprof__free(tids);
}

/* The CLOCK_REALTIME time ms from now, as scan_cond's waits take it. */
static struct timespec realtime_in(long ms) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec += ms * 1000000L;
  t.tv_sec += t.tv_nsec / 1000000000L;
  t.tv_nsec %= 1000000000L;
  return t;
}

/* Drops the entries of threads that are gone when they are most of the
 * set; scan_lock held. */
static void compact(void) {
  if (threads_set.len < 4096 || nlive * 4 > threads_set.len) return;
  cprof__hmap fresh = {0};
  for (size_t i = 0; i < threads_set.cap; i++)
    if (threads_set.keys[i] && threads_set.vals[i] != GONE &&
        cprof__hmap_put(&fresh, threads_set.keys[i], threads_set.vals[i]))
      goto fail;
  cprof__hmap_free(&threads_set);
  threads_set = fresh;
  return;
fail:
  cprof__hmap_free(&fresh);
}

/* Counts the threads in tids (all of /proc/self/task) that are not known
 * yet; returns the total. */
static uint64_t count_unseen(const pid_t *tids, size_t n) {
  cprof__lock(&scan_lock);
  {
    /* KNOWN entries of threads no longer listed are forgotten, so that a
     * new thread reusing the tid is counted. */
    cprof__hmap listed = {0};
    for (size_t i = 0; i < n; i++) cprof__hmap_put(&listed, (uint64_t)tids[i] + 1, 1);
    for (size_t i = 0; i < threads_set.cap && listed.len == n; i++) {
      uint64_t v;
      if (threads_set.keys[i] && threads_set.vals[i] == KNOWN &&
          !cprof__hmap_get(&listed, threads_set.keys[i], &v)) {
        threads_set.vals[i] = GONE;
        nlive--;
      }
    }
    cprof__hmap_free(&listed);
    for (size_t i = 0; i < n; i++) {
      uint32_t sid;
      bool own;
      if (state_of(tids[i]) != GONE ||
          cprof__task_lookup(tids[i], &sid, &own)) /* the trampoline's */
        continue;
      long age = cprof__task_age_ms(AT_FDCWD, tids[i]);
      if (age < CPROF__SCAN_SETTLE_MS) continue; /* maybe on its way in */
      set_state(tids[i], KNOWN);
      unseen_total++;
    }
    compact();
  }
  uint64_t total = unseen_total;
  cprof__unlock(&scan_lock);
  return total;
}

uint64_t cprof__thread_scan_unseen(void) {
  size_t n;
  pid_t *tids = list_tasks(&n);
  uint64_t total;
  if (tids) {
    total = count_unseen(tids, n);
  } else {
    cprof__lock(&scan_lock);
    total = unseen_total;
    cprof__unlock(&scan_lock);
  }
  cprof__free(tids);
  return total;
}

/* The scanner: while the CPU engine runs, it has the engine arm timers for
 * threads it does not time yet, and counts the threads the trampoline did
 * not see, at the intervals thread_scan.h gives (a wake, at each start of
 * the engine, goes back to the shortest). */
static void *scanner_main(void *arg) {
  (void)arg;
  long period_ms = CPROF__SCAN_MIN_MS;
  cprof__lock(&scan_lock);
  scanner_started = true;
  pthread_cond_broadcast(&scan_cond);
  for (;;) {
    while (cprof__cpu_engine_hz() == 0) {
      cprof__cond_wait(&scan_cond, &scan_lock);
      period_ms = CPROF__SCAN_MIN_MS;
    }
    uint64_t gen = scan_generation;
    /* The engine's signal is checked every CPROF__SIGNAL_CHECK_MS on
     * the way: a program that replaced its handler with a raw
     * rt_sigaction receives cprof's signals until then. */
    for (long waited = 0; waited < period_ms && scan_generation == gen;
         waited += CPROF__SIGNAL_CHECK_MS) {
      struct timespec at = realtime_in(CPROF__SIGNAL_CHECK_MS);
      while (scan_generation == gen &&
             cprof__cond_timedwait(&scan_cond, &scan_lock, &at) != ETIMEDOUT) {
      }
      cprof__unlock(&scan_lock);
      cprof__cpu_signal_check();
      /* A sample met code the unwind tables do not know: a library
       * loaded since the last refresh (a Python extension module, a
       * plugin) gets its tables now, not at the next heap sample or
       * thread creation, which may never come. */
      if (cprof__stack_foreign_take(CPROF__FOREIGN_TABLES))
        cprof__stack_refresh_try();
      cprof__lock(&scan_lock);
    }
    if (scan_generation != gen) period_ms = CPROF__SCAN_MIN_MS;
    /* The list is made and freed under scan_lock, which fork takes: a
     * fork never finds this thread inside the allocator (one that does
     * not prepare for fork, as GCC 12's AddressSanitizer's, would leave
     * the child its lock held). */
    size_t n = 0, found = 0;
    pid_t *tids = cprof__cpu_engine_hz() != 0 ? list_tasks(&n) : NULL;
    scan_tids = tids;
    cprof__unlock(&scan_lock);
    if (tids) {
      found = cprof__cpu_rescan(tids, n);
      count_unseen(tids, n);
    }
    bool listed = tids != NULL;
    cprof__lock(&scan_lock);
    cprof__free(tids);
    scan_tids = NULL;
    cprof__unlock(&scan_lock);
    if (listed) {
      period_ms = found ? CPROF__SCAN_MIN_MS
                        : period_ms * 2 > CPROF__SCAN_MAX_MS ? CPROF__SCAN_MAX_MS
                                                             : period_ms * 2;
    }
    cprof__lock(&scan_lock);
  }
  return NULL;
}

/* A scanner just started is waited for (outside a fork child's
 * handlers, where it cannot run yet): until it runs, its start-up
 * block (cprof__thread_spawn's) is on the heap, and a fork meanwhile would
 * leave the child a block nobody frees. Not for ever: in a fork child
 * (this runs in its atfork handler) a new thread may be unable to start
 * at all, when another thread of the parent held a lock of an allocator
 * that does not prepare for fork (GCC 12's AddressSanitizer) and the
 * thread's start allocates; the child then goes on after
 * SCANNER_START_WAIT_MS, to its exec or its exit, rather than hang. */
#define SCANNER_START_WAIT_MS 200
void cprof__thread_scan_wake(void) {
  cprof__lock(&scan_lock);
  pid_t pid = getpid();
  bool start = scanner_pid != pid;
  if (start) {
    scanner_pid = pid;
    scanner_started = false;
  }
  scan_generation++;
  cprof__unlock(&scan_lock);
  pthread_t t;
  if (start && cprof__thread_spawn(&t, scanner_main, NULL, "cprof-scan") == 0) {
    pthread_detach(t);
    /* From a fork child's handler the thread starts only once the
     * handlers are done (base/fork.h); its start-up block stays reachable
     * meanwhile (cprof__thread_spawn). */
    struct timespec until = realtime_in(SCANNER_START_WAIT_MS);
    cprof__lock(&scan_lock);
    while (!scanner_started && !cprof__fork_child_running() &&
           cprof__cond_timedwait(&scan_cond, &scan_lock, &until) != ETIMEDOUT) {
    }
    cprof__unlock(&scan_lock);
  } else if (start) {
    cprof__lock(&scan_lock);
    scanner_pid = 0;
    cprof__unlock(&scan_lock);
  }
  cprof__lock(&scan_lock);
  pthread_cond_broadcast(&scan_cond);
  cprof__unlock(&scan_lock);
}
