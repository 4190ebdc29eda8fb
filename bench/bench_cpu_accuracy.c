/*
 * CPU profile accuracy. Two threads: "busy" burns CPU for the whole run,
 * "half" burns for 10 ms then sleeps for 10 ms. Inside each burn, 3/4 of the
 * work is in a *_hot function and 1/4 in a *_cold one. Each thread measures
 * the CPU time it spends in each function with CLOCK_THREAD_CPUTIME_ID: that
 * is the truth the profile is compared against (by bench/cpu_accuracy.sh,
 * through go tool pprof).
 *
 *   bench_cpu_accuracy SECONDS OUT.pb.gz [cprof|gperftools|none] [HZ]
 *
 * With "gperftools", libprofiler is loaded with dlopen and drives the
 * profile instead (its own setitimer-based sampling), for comparison.
 * Prints "truth FUNCTION SECONDS" lines: CPU time inside each burn function,
 * each thread's whole CPU time (busy_thread, half_thread) and their sum.
 */
#include <cprof.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static volatile uint64_t sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Four distinct functions so the profile can tell them apart. Each has its
 * own loop constant so the compiler cannot fold them into one, and none is
 * inlined or tail-called. */
#define BURN(name, mult)                                            \
  __attribute__((noinline, noipa)) static void name(uint64_t n) {  \
    uint64_t x = sink;                                              \
    for (uint64_t i = 0; i < n; i++) x = x * (mult) + i;            \
    sink = x;                                                       \
  }
BURN(busy_hot, 6364136223846793005ull)
BURN(busy_cold, 2862933555777941757ull)
BURN(half_hot, 3935559000370003845ull)
BURN(half_cold, 3202034522624059733ull)

typedef struct truth {
  double hot, cold, thread; /* CPU seconds in each function, and in all */
} truth;

#define UNIT 200000

static void *busy_thread(void *arg) {
  truth *t = arg;
  double end = wall_now() + seconds;
  while (wall_now() < end) {
    double a = cpu_now();
    busy_hot(3 * UNIT);
    double b = cpu_now();
    busy_cold(UNIT);
    double c = cpu_now();
    t->hot += b - a;
    t->cold += c - b;
  }
  t->thread = cpu_now();
  return NULL;
}

static void *half_thread(void *arg) {
  truth *t = arg;
  double end = wall_now() + seconds;
  while (wall_now() < end) {
    double burst_end = cpu_now() + 0.010;
    while (cpu_now() < burst_end) {
      double a = cpu_now();
      half_hot(3 * UNIT);
      double b = cpu_now();
      half_cold(UNIT);
      double c = cpu_now();
      t->hot += b - a;
      t->cold += c - b;
    }
    struct timespec nap = {0, 10000000};
    nanosleep(&nap, NULL);
  }
  t->thread = cpu_now();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SECONDS OUT [cprof|gperftools|none] [HZ]\n",
            argv[0]);
    return 2;
  }
  seconds = atof(argv[1]);
  const char *out = argv[2];
  const char *mode = argc > 3 ? argv[3] : "cprof";
  int hz = argc > 4 ? atoi(argv[4]) : 100;

  int (*gp_start)(const char *) = NULL;
  void (*gp_stop)(void) = NULL;
  if (strcmp(mode, "gperftools") == 0) {
    void *h = dlopen("libprofiler.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      fprintf(stderr, "gperftools: %s\n", dlerror());
      return 3;
    }
    gp_start = (int (*)(const char *))dlsym(h, "ProfilerStart");
    gp_stop = (void (*)(void))dlsym(h, "ProfilerStop");
    if (!gp_start || !gp_stop || !gp_start(out)) {
      fprintf(stderr, "gperftools: cannot start\n");
      return 3;
    }
  } else if (strcmp(mode, "cprof") == 0) {
    int err = cprof_cpu_start(hz);
    if (err) {
      fprintf(stderr, "cprof_cpu_start: %s\n", cprof_strerror(err));
      return 1;
    }
  }

  truth busy = {0, 0, 0}, half = {0, 0, 0};
  pthread_t a, b;
  pthread_create(&a, NULL, busy_thread, &busy);
  pthread_create(&b, NULL, half_thread, &half);
  pthread_join(a, NULL);
  pthread_join(b, NULL);

  if (gp_stop) {
    gp_stop();
  } else if (strcmp(mode, "cprof") == 0) {
    FILE *f = fopen(out, "wb");
    if (!f) {
      perror(out);
      return 1;
    }
    cprof_sink s = cprof_sink_fd(fileno(f));
    int err = cprof_cpu_stop(&s);
    fclose(f);
    if (err) {
      fprintf(stderr, "cprof_cpu_stop: %s\n", cprof_strerror(err));
      return 1;
    }
  }
  printf("truth busy_hot %.6f\n", busy.hot);
  printf("truth busy_cold %.6f\n", busy.cold);
  printf("truth half_hot %.6f\n", half.hot);
  printf("truth half_cold %.6f\n", half.cold);
  printf("truth busy_thread %.6f\n", busy.thread);
  printf("truth half_thread %.6f\n", half.thread);
  printf("truth total %.6f\n", busy.thread + half.thread);
  return 0;
}
