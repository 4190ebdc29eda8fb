/*
 * A malloc/free-only churn for bench/bench_heap_overhead.c, built without
 * cprof so the same binary runs with and without it (LD_PRELOAD):
 *   plain_heap_churn [ITERATIONS_PER_THREAD [HOLD_MIB]]
 * Two threads each replace a random slot of a 1024-entry ring with a new
 * block of a random size in [8, 512) bytes, so nearly every malloc and
 * free takes the allocator's fast path. With HOLD_MIB, the main thread
 * first allocates that many MiB in 256-byte blocks and keeps them live
 * throughout, as a server with a large heap would.
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
  size_t hold = argc > 2 ? (size_t)atol(argv[2]) * 4096 : 0; /* blocks */
  void **held = hold ? malloc(hold * sizeof *held) : NULL;
  for (size_t i = 0; held && i < hold; i++) held[i] = malloc(256);
  pthread_t t[2];
  for (uintptr_t i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, churn, (void *)(i + 1));
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (size_t i = 0; held && i < hold; i++) free(held[i]);
  free(held);
  return 0;
}
