/*
 * A fixed amount of CPU work on two threads, each at the bottom of a
 * ~40-frame stack, built without cprof: the same binary runs bare, with
 * cprof preloaded, under gperftools' libprofiler and under perf record, so
 * bench/compare.sh compares profilers on identical work.
 *   plain_cpu_work [MILLIONS_OF_ITERATIONS_PER_THREAD]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static volatile uint64_t sink;
static uint64_t iters;

__attribute__((noinline)) static void work(uint64_t n) {
  uint64_t x = sink;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
  sink = x;
}

__attribute__((noinline)) static void descend(int depth, uint64_t n) {
  if (depth > 0) {
    descend(depth - 1, n);
    __asm__ volatile("" ::: "memory");
  } else {
    work(n);
  }
}

static void *worker(void *arg) {
  (void)arg;
  descend(38, iters);
  return NULL;
}

int main(int argc, char **argv) {
  iters = (uint64_t)(argc > 1 ? atof(argv[1]) : 500) * 1000000;
  pthread_t a, b;
  pthread_create(&a, NULL, worker, NULL);
  pthread_create(&b, NULL, worker, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  return 0;
}
