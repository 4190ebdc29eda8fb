/*
 * The wall-clock profile's overhead on a CPU-bound program: a fixed
 * amount of CPU work on as many threads as there are CPUs (so every cycle
 * the sampler takes is a cycle the work loses), timed by the wall clock,
 * unprofiled and with a wall window open at a rate (default: the default
 * 20 Hz per thread), in alternating rounds so machine noise hits both
 * alike. Each profiled round includes starting the window and writing the
 * profile. Prints the median time of each mode, and the ratio of the
 * profiled median to the unprofiled one (1.000 = no overhead), and the
 * same for the process's CPU time (which counts the sampler's own).
 *
 *   bench_wall_overhead [ROUNDS] [WORK_MILLIONS] [HZ]
 */
#include <cprof.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "profile/wall.h"

static volatile uint64_t sink;
static uint64_t work_iters;

static double clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void work(uint64_t n) {
  uint64_t x = sink;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
  sink = x;
}

static void *worker(void *arg) {
  (void)arg;
  work(work_iters);
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int discard(void *ctx, const void *data, size_t len) {
  (void)ctx;
  (void)data;
  (void)len;
  return 0;
}

/* One round: the work on nthreads threads, with a wall window when hz is
 * set. Returns 0 and the round's wall and CPU seconds. */
static int round_once(int nthreads, long long hz, double *wall, double *cpu) {
  void *w = NULL;
  double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  if (hz && cprof__wall_profile.window->start(hz, &w) != 0) return 1;
  pthread_t t[64];
  for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  if (hz) {
    cprof_sink s = {.write = discard};
    if (cprof__wall_profile.window->stop(w, &s) != 0) return 1;
  }
  *wall = clock_s(CLOCK_MONOTONIC) - t0;
  *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  return 0;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  work_iters = (uint64_t)(argc > 2 ? atoll(argv[2]) : 1500) * 1000000;
  long long hz = argc > 3 ? atoll(argv[3]) : cprof__wall_default_hz();
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
  if (rounds < 1 || rounds > 1000 || hz < 1 || hz > CPROF__WALL_MAX_HZ) {
    fprintf(stderr, "usage: %s [ROUNDS] [WORK_MILLIONS] [HZ]\n", argv[0]);
    return 2;
  }
  double wall[2][1000], cpu[2][1000];
  double w, c;
  round_once(nthreads, 0, &w, &c); /* warm up */
  round_once(nthreads, hz, &w, &c);
  for (int r = 0; r < rounds; r++) {
    for (int m = 0; m < 2; m++) {
      int mode = (r % 2) ? 1 - m : m; /* alternate which goes first */
      if (round_once(nthreads, mode ? hz : 0, &wall[mode][r], &cpu[mode][r])) {
        fprintf(stderr, "bench_wall_overhead: the wall window failed\n");
        return 1;
      }
    }
  }
  double w0 = median(wall[0], rounds), w1 = median(wall[1], rounds);
  double c0 = median(cpu[0], rounds), c1 = median(cpu[1], rounds);
  printf("threads %d, %d rounds, wall profile at %lld Hz per thread\n",
         nthreads, rounds, hz);
  printf("unprofiled  wall %.3f s  cpu %.3f s\n", w0, c0);
  printf("profiled    wall %.3f s  cpu %.3f s\n", w1, c1);
  printf("ratio       wall %.4f    cpu %.4f\n", w1 / w0, c1 / c0);
  return 0;
}
