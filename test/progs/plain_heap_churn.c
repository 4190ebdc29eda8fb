/*
 * A malloc/free-only churn for bench/bench_heap_overhead.c, built without
 * cprof so the same binary runs with and without it (LD_PRELOAD):
 *   plain_heap_churn [ITERATIONS_PER_THREAD]
 * Two threads each replace a random slot of a 1024-entry ring with a new
 * block of a random size in [8, 512) bytes, so nearly every malloc and
 * free takes the allocator's fast path.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define RING 1024

static long iterations = 20000000;

static void *churn(void *arg) {
  uint64_t x = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  void *ring[RING] = {0};
  for (long i = 0; i < iterations; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t slot = (size_t)(x % RING);
    free(ring[slot]);
    ring[slot] = malloc(8 + (size_t)((x >> 20) % 504));
  }
  for (int i = 0; i < RING; i++) free(ring[i]);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) iterations = atol(argv[1]);
  pthread_t t[2];
  for (uintptr_t i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, churn, (void *)(i + 1));
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  return 0;
}
