/*
 * Functions that end in a tail call, built -O2 as distributions build
 * code, for the tail-call test (test/e2e/tailcall.sh). Each phase runs for
 * about the CPU seconds given (default 0.5):
 *
 *   mutex: four threads take one mutex in section(), which ends in
 *          pthread_mutex_unlock(): a tail call (jmp), so the unlocker's
 *          stack holds no frame of section; then four more in
 *          section_counted(), whose unlock is an ordinary call;
 *   cpu:   outer() works a little, then tail-calls heavy(), which burns;
 *   heap:  keep() allocates through xalloc(), which tail-calls malloc.
 *
 * Built twice: without cprof, to be preloaded (the calls go through PLT
 * stubs), and linked with cprof (direct calls).
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Each function stays a function of its own, called as written (clang has
 * no noipa, and noinline is enough there). */
#if defined(__clang__)
#define NOIPA __attribute__((noinline))
#else
#define NOIPA __attribute__((noipa))
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t shared, unlocks;
static double phase_seconds = 0.5;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each section yields the processor while it holds the lock, so that the
 * other threads block on it even on a loaded machine. */
NOIPA void section(void) {
  pthread_mutex_lock(&lock);
  sched_yield();
  for (int i = 0; i < 3000; i++) shared = shared * 3 + (uint64_t)i;
  pthread_mutex_unlock(&lock);
}

NOIPA void section_counted(void) {
  pthread_mutex_lock(&lock);
  sched_yield();
  for (int i = 0; i < 3000; i++) shared = shared * 5 + (uint64_t)i;
  pthread_mutex_unlock(&lock);
  unlocks = unlocks + 1;
}

/* Runs one of the two sections for its share of the phase: the threads of
 * one round all run the same one, so that its unlocks end all the waits. */
static void *worker(void *arg) {
  bool counted = arg != NULL;
  double t0 = cpu_seconds();
  uint64_t rounds = 0;
  while (cpu_seconds() - t0 < phase_seconds / 8) {
    if (counted)
      section_counted();
    else
      section();
    rounds++;
  }
  return (void *)(uintptr_t)rounds;
}

NOIPA uint64_t heavy(uint64_t x) {
  for (int i = 0; i < 200000; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

/* Some work of its own, so that samples land in outer too, then the tail
 * call. */
NOIPA uint64_t outer(uint64_t x) {
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    __asm__ volatile("" : "+r"(x));
  }
  return heavy(x);
}

NOIPA void *xalloc(size_t n) { return malloc(n); }

static void *kept[64];

NOIPA void keep(unsigned i) {
  free(kept[i % 64]);
  kept[i % 64] = xalloc(4096 + i % 512);
}

int main(int argc, char **argv) {
  if (argc > 1) phase_seconds = atof(argv[1]);
  static char counted;
  uint64_t rounds = 0;
  for (int k = 0; k < 2; k++) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
      pthread_create(&t[i], NULL, worker, k ? &counted : NULL);
    for (int i = 0; i < 4; i++) {
      void *r;
      pthread_join(t[i], &r);
      rounds += (uint64_t)(uintptr_t)r;
    }
  }
  uint64_t x = 1;
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < phase_seconds) x += outer(x);
  t0 = cpu_seconds();
  for (unsigned i = 0; cpu_seconds() - t0 < phase_seconds / 5; i++) keep(i);
  printf("%llu %llu\n", (unsigned long long)rounds, (unsigned long long)x);
  return 0;
}
