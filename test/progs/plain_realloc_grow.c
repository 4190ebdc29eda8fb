/*
 * A realloc growth churn for bench/bench_heap_overhead.c, built without
 * cprof so the same binary runs with and without it (LD_PRELOAD):
 *   plain_realloc_grow [ROUNDS_PER_THREAD [MAX_BYTES]]
 * Two threads each grow a buffer from 64 bytes to MAX_BYTES (default
 * 1 MiB) by doubling it with realloc, writing each new half, then free it;
 * ROUNDS times (default 20000). Past glibc's mmap threshold realloc grows
 * the buffer with mremap, without a copy, so any copy an interposer adds
 * shows.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static long rounds = 20000;
static size_t max_bytes = (size_t)1 << 20;

static void *grow(void *arg) {
  uintptr_t sum = (uintptr_t)arg;
  for (long r = 0; r < rounds; r++) {
    size_t n = 64;
    unsigned char *p = malloc(n);
    if (!p) abort();
    memset(p, 1, n);
    while (n < max_bytes) {
      unsigned char *q = realloc(p, 2 * n);
      if (!q) abort();
      p = q;
      memset(p + n, (int)r, n);
      n *= 2;
    }
    sum += p[n / 3];
    free(p);
  }
  return (void *)sum;
}

int main(int argc, char **argv) {
  if (argc > 1) rounds = atol(argv[1]);
  if (argc > 2) max_bytes = (size_t)atol(argv[2]);
  pthread_t t[2];
  for (uintptr_t i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, grow, (void *)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  return 0;
}
