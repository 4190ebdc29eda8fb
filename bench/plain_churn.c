/*
 * malloc/free churn on two threads with small random sizes and a small
 * live window, built without cprof: the same binary runs on glibc bare,
 * with cprof preloaded, on jemalloc with and without prof:true, on
 * tcmalloc with and without its heap profiler, and under heaptrack, so
 * bench/compare.sh compares heap profilers on identical work.
 *   plain_churn [MILLIONS_OF_OPERATIONS_PER_THREAD]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static long ops;

static void *churn(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  void *live[64] = {0};
  for (long i = 0; i < ops; i++) {
    seed = seed * 1103515245u + 12345u;
    unsigned slot = (seed >> 16) % 64;
    free(live[slot]);
    size_t n = 16 + (seed >> 4) % 496;
    live[slot] = malloc(n);
    if (live[slot]) *(volatile char *)live[slot] = 1;
  }
  for (int i = 0; i < 64; i++) free(live[i]);
  return NULL;
}

int main(int argc, char **argv) {
  ops = (long)((argc > 1 ? atof(argv[1]) : 20) * 1000000);
  pthread_t a, b;
  pthread_create(&a, NULL, churn, (void *)1);
  pthread_create(&b, NULL, churn, (void *)2);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  return 0;
}
