/*
 * CPU profiler overhead. A fixed amount of CPU work on two threads, each
 * running at the bottom of a ~40-frame stack, measured as whole-process CPU
 * time (CLOCK_PROCESS_CPUTIME_ID, so the signal handlers' time counts):
 * unprofiled, at 100 Hz and at 1000 Hz, in alternating rounds so machine
 * noise hits every mode alike. Profiled rounds include writing the profile.
 * Prints the median of each mode and its ratio to the unprofiled median,
 * and the cost of one sample derived from the 1000 Hz difference.
 *
 *   bench_cpu_overhead [ROUNDS] [WORK_MILLIONS]
 */
#include <cprof.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;
static uint64_t work_iters;

static double process_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void work(uint64_t n) {
  uint64_t x = sink;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
  sink = x;
}

/* Recurses to the wanted depth, then works: every sample walks ~40
 * frames. */
__attribute__((noinline)) static void descend(int depth, uint64_t n) {
  if (depth > 0) {
    descend(depth - 1, n);
    __asm__ volatile("" ::: "memory"); /* no tail call */
  } else {
    work(n);
  }
}

static void *worker(void *arg) {
  (void)arg;
  descend(38, work_iters);
  return NULL;
}

static int discard(void *ctx, const void *data, size_t len) {
  (void)ctx;
  (void)data;
  (void)len;
  return 0;
}

static double run(int hz) {
  double t0 = process_cpu();
  if (hz && cprof_cpu_start(hz) != 0) {
    fprintf(stderr, "cprof_cpu_start failed\n");
    exit(1);
  }
  pthread_t a, b;
  pthread_create(&a, NULL, worker, NULL);
  pthread_create(&b, NULL, worker, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  if (hz) {
    cprof_sink s = {discard, NULL};
    if (cprof_cpu_stop(&s) != 0) {
      fprintf(stderr, "cprof_cpu_stop failed\n");
      exit(1);
    }
  }
  return process_cpu() - t0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 7;
  work_iters = (uint64_t)(argc > 2 ? atof(argv[2]) : 400) * 1000000;
  if (rounds < 1 || rounds > 100) rounds = 7;
  static const int modes[3] = {0, 100, 1000};
  double t[3][100];
  run(0); /* warm-up: page in code, create the first threads */
  for (int r = 0; r < rounds; r++)
    for (int m = 0; m < 3; m++) t[m][r] = run(modes[m]);
  double base = median(t[0], rounds);
  printf("cpu overhead: %d rounds, 2 threads, 40-frame stacks, %.2f s CPU "
         "per round unprofiled\n",
         rounds, base);
  for (int m = 1; m < 3; m++) {
    double med = median(t[m], rounds);
    printf("cpu overhead: %4d Hz: median %.3f s, ratio %.4f\n", modes[m], med,
           med / base);
  }
  double extra = median(t[2], rounds) - base;
  double samples = base * 1000;
  printf("cpu overhead: cost per sample at 1000 Hz: %.0f ns (%.0f samples "
         "per round)\n",
         extra > 0 ? extra / samples * 1e9 : 0.0, samples);
  return 0;
}
