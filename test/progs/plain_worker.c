/*
 * An unmodified program for `cprof run`: it knows nothing of cprof.
 *   plain_worker SECONDS [LOG_EVERY_MS]
 * Two threads burn a quarter of a CPU each in worker_spin for SECONDS,
 * then the program exits normally. With LOG_EVERY_MS, the main thread
 * also writes a log line to stderr that often, to interleave with dumps.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static double seconds;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void worker_spin(void) {
  uint64_t x = sink;
  for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ull + (uint64_t)i;
  sink = x;
}

/* A quarter of a CPU each: 5 ms in worker_spin, then 15 ms asleep, so
 * that the tests beside this one keep their CPU time. */
static void *worker(void *arg) {
  (void)arg;
  const struct timespec rest = {0, 15000000};
  double end = now() + seconds;
  while (now() < end) {
    double burst = now() + 0.005;
    while (now() < burst) worker_spin();
    if (now() < end) nanosleep(&rest, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s SECONDS [LOG_EVERY_MS]\n", argv[0]);
    return 2;
  }
  seconds = atof(argv[1]);
  int log_ms = argc > 2 ? atoi(argv[2]) : 0;
  setvbuf(stderr, NULL, _IONBF, 0);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
  printf("ready\n");
  fflush(stdout);
  if (log_ms > 0) {
    double end = now() + seconds;
    for (long n = 0; now() < end; n++) {
      fprintf(stderr, "app: working, line %ld\n", n);
      usleep((useconds_t)log_ms * 1000);
    }
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  return 0;
}
