/* A library that tests load and unload while profiling (faults dlopen). */
#include <stdint.h>
#include <time.h>

static volatile uint64_t dlo_sink;

__attribute__((visibility("default"), noinline)) void dlo_spin(double secs) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  double end = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + secs, now;
  uint64_t x = dlo_sink;
  do {
    for (int i = 0; i < 10000; i++) x = x * 2862933555777941757ull + 3;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  } while (now < end);
  dlo_sink = x;
}
