/*
 * THREADS threads that sleep while the main thread burns CPU for SECONDS,
 * built without cprof: bench/thread_scan.sh runs it under `cprof run --dump
 * cpu` and reads what cprof's scanner thread (cprof-scan) cost, from its
 * /proc schedstat, while it walks /proc/self/task every 50 ms.
 *   plain_threads THREADS SECONDS
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static void *sleeper(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  double seconds = argc > 2 ? atof(argv[2]) : 3;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0) return 1;
  }
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  uint64_t x = 1;
  do {
    for (int i = 0; i < 1000000; i++) x = x * 6364136223846793005ull + 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((double)(now.tv_sec - start.tv_sec) +
               (double)(now.tv_nsec - start.tv_nsec) / 1e9 <
           seconds);
  sink = x;
  return 0;
}
