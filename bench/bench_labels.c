/*
 * The cost of profile labels. First the price of setting and restoring
 * labels: cprof_labels_push/pop pairs in a loop, ns per pair. Then the CPU
 * profile's overhead with labels changing about 100,000 times a second:
 * the same CPU work (chunks of about 10 us, two threads) unprofiled,
 * profiled at 100 Hz without labels and profiled at 100 Hz with each chunk
 * under one of two label sets, in alternating rounds, as whole-process CPU
 * time (the handlers' time counts); medians and ratios to the unprofiled
 * median, from the same run.
 *
 *   bench_labels [ROUNDS] [CHUNKS_PER_THREAD]
 */
#include <cprof.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;
static const cprof_labels *sets[2];
static long chunks = 100000;
static int labelled;

static double clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void chunk(uint64_t n) {
  uint64_t x = sink;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
  sink = x;
}

static uint64_t chunk_iters = 10000;

static void *worker(void *arg) {
  (void)arg;
  for (long i = 0; i < chunks; i++) {
    if (labelled) {
      const cprof_labels *prev = cprof_labels_push(sets[i & 1]);
      chunk(chunk_iters);
      cprof_labels_pop(prev);
    } else {
      chunk(chunk_iters);
    }
  }
  return NULL;
}

static double round_cpu(int mode) {
  labelled = mode == 2;
  if (mode) cprof_cpu_start(100);
  double t0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  if (mode) {
    cprof_buf b = {0};
    cprof_sink s = cprof_sink_buf(&b);
    cprof_cpu_stop(&s);
    cprof_buf_free(&b);
  }
  return clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 7;
  if (argc > 2) chunks = atol(argv[2]);
  if (rounds < 1 || rounds > 100 || chunks < 1) return 2;
  const char *a[2] = {"kind", "api"}, *b[2] = {"kind", "static"};
  if (cprof_labels_new(NULL, a, 1, &sets[0]) ||
      cprof_labels_new(NULL, b, 1, &sets[1]))
    return 1;

  /* Setting and restoring, in the thread's own CPU time (a shared
   * machine's other work does not count), best of five rounds. */
  const long pairs = 20000000;
  double per_pair = 1e9;
  for (int round = 0; round < 5; round++) {
    double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < pairs; i++) {
      const cprof_labels *prev = cprof_labels_push(sets[i & 1]);
      __asm__ volatile("" ::: "memory");
      cprof_labels_pop(prev);
    }
    double ns = (clock_s(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)pairs * 1e9;
    if (ns < per_pair) per_pair = ns;
  }
  printf("labels push+pop: %.2f ns per pair (CPU time, best of 5)\n",
         per_pair);

  /* Calibrate a chunk to about 10 us. */
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
  chunk(1000000);
  double per_iter = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e6;
  chunk_iters = (uint64_t)(10e-6 / per_iter);
  if (chunk_iters < 100) chunk_iters = 100;

  double v[3][100];
  for (int r = 0; r < rounds; r++)
    for (int m = 0; m < 3; m++) v[m][r] = round_cpu(m);
  double base = median(v[0], rounds), plain = median(v[1], rounds),
         lab = median(v[2], rounds);
  double changes = 2.0 * (double)chunks / base * 2; /* push + pop, per s */
  printf("unprofiled: %.3f s CPU; label changes about %.0f per second of "
         "CPU\n", base, changes / 2);
  printf("cpu 100 Hz, no labels: %.3f s (ratio %.4f)\n", plain, plain / base);
  printf("cpu 100 Hz, labels:    %.3f s (ratio %.4f; %.4f of no labels)\n",
         lab, lab / base, lab / plain);
  return 0;
}
