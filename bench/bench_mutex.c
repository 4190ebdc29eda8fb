/*
 * Mutex overhead: the same code built with cprof (bench_mutex) and without
 * it (plain_mutex).
 *   bench_mutex uncontended N        N lock/unlock pairs on one thread
 *   bench_mutex contended SECONDS F  4 threads on one mutex for SECONDS,
 *                                    mutex fraction F (linked build only)
 * Prints "ns_per_pair=X" or "ops_per_sec=X".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_PLAIN
#include "cprof.h"
#endif

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int stop;
static volatile uint64_t shared;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *contender(void *arg) {
  uint64_t ops = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    pthread_mutex_lock(&m);
    for (int i = 0; i < 50; i++) shared++;
    pthread_mutex_unlock(&m);
    ops++;
  }
  *(uint64_t *)arg = ops;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "uncontended") == 0) {
    long n = atol(argv[2]);
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
      pthread_mutex_lock(&m);
      shared++;
      pthread_mutex_unlock(&m);
    }
    printf("ns_per_pair=%.3f\n", (double)(now_ns() - t0) / (double)n);
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "contended") == 0) {
#ifndef BENCH_PLAIN
    cprof_set_mutex_profile_fraction(atoi(argv[3]));
#endif
    pthread_t t[4];
    uint64_t ops[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, contender, &ops[i]);
    struct timespec ts = {atoi(argv[2]), 0};
    nanosleep(&ts, NULL);
    atomic_store(&stop, 1);
    uint64_t total = 0;
    for (int i = 0; i < 4; i++) {
      pthread_join(t[i], NULL);
      total += ops[i];
    }
    printf("ops_per_sec=%.0f\n", (double)total / atoi(argv[2]));
    return 0;
  }
  fprintf(stderr, "usage: %s uncontended N | contended SECONDS FRACTION\n",
          argv[0]);
  return 2;
}
