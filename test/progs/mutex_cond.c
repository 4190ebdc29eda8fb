/*
 * A mutex released inside pthread_cond_timedwait: a drainer holds the
 * mutex about 200 us at a time and then waits on a condition variable
 * (which releases the mutex inside libc); a producer locks the mutex,
 * which the drainer holds, signals and unlocks. Every producer wait is
 * caused by the drainer's hold, whose only unlock is the condition wait
 * (with a second producer, waits behind the other producer's unlock would
 * rightly be charged to it):
 *   mutex_cond OUTDIR
 * writes OUTDIR/mutex.pb.gz (fraction 1) and prints "measured_wait_ns=N",
 * the producer's total wait measured with CLOCK_MONOTONIC.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "cprof.h"

#define PRODUCERS 1
#define ROUNDS 300

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static _Atomic int64_t waited_ns;
static _Atomic int producers_done;
static _Atomic unsigned holds; /* bumped as each hold begins */
static _Atomic int wanted;      /* the producer is about to lock */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void spin_us(int us) {
  int64_t until = now_ns() + (int64_t)us * 1000;
  while (now_ns() < until) {
  }
}

/* Waits up to 1 ms for work with the mutex held; the wait releases it. */
__attribute__((noinline)) static void holder_site(void) {
  struct timespec abs;
  clock_gettime(CLOCK_REALTIME, &abs);
  abs.tv_nsec += 1000000;
  if (abs.tv_nsec >= 1000000000) {
    abs.tv_sec++;
    abs.tv_nsec -= 1000000000;
  }
  pthread_cond_timedwait(&c, &m, &abs); /* SITE:holder */
}

static void *drainer(void *arg) {
  pthread_mutex_lock(&m);
  while (atomic_load(&producers_done) < PRODUCERS) {
    /* Hold on until the producer wants the mutex, then 200 us more: every
     * lock of the producer's contends, however the threads are scheduled. */
    atomic_fetch_add(&holds, 1);
    while (!atomic_load(&wanted) &&
           atomic_load(&producers_done) < PRODUCERS)
      sched_yield();
    spin_us(200); /* the work done holding the mutex */
    holder_site();
  }
  pthread_mutex_unlock(&m);
  return arg;
}

/* Each round begins once the drainer has begun a new hold. */
static void *producer(void *arg) {
  unsigned seen = 0;
  for (int i = 0; i < ROUNDS; i++) {
    while (atomic_load(&holds) == seen) sched_yield();
    seen = atomic_load(&holds);
    int64_t t0 = now_ns();
    atomic_store(&wanted, 1);
    pthread_mutex_lock(&m);
    atomic_store(&wanted, 0);
    atomic_fetch_add(&waited_ns, now_ns() - t0);
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
  }
  atomic_fetch_add(&producers_done, 1);
  return arg;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  cprof_set_mutex_profile_fraction(1);
  pthread_t d, p[PRODUCERS];
  pthread_create(&d, NULL, drainer, NULL);
  for (int i = 0; i < PRODUCERS; i++)
    pthread_create(&p[i], NULL, producer, NULL);
  for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
  pthread_join(d, NULL);
  char path[4096];
  snprintf(path, sizeof path, "%s/mutex.pb.gz", argv[1]);
  if (cprof_profile_write_file("mutex", 0, path) != 0) {
    fprintf(stderr, "mutex_cond: writing %s failed\n", path);
    return 1;
  }
  printf("measured_wait_ns=%lld\n", (long long)atomic_load(&waited_ns));
  return 0;
}
