/*
 * The stripped-library test's program (test/e2e/symbolize_stripped.sh):
 * dlopens the library named by its first argument, then profiles its
 * stripped_work() for about a CPU second: the CPU profile (started after
 * the dlopen, so that cprof's unwind tables cover the library) goes to the
 * second argument, the heap profile, sampled every KiB, to the third. The
 * library stays loaded until both are written.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cprof.h"

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBRARY CPU.pb.gz HEAP.pb.gz\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  uint64_t (*work)(long) = (uint64_t(*)(long))dlsym(h, "stripped_work");
  if (!work) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  cprof_heap_set_rate(1024);
  int err = cprof_cpu_start(100);
  if (err) {
    fprintf(stderr, "cprof_cpu_start: %s\n", cprof_strerror(err));
    return 1;
  }
  uint64_t sum = 0;
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < 1.0) sum += work(200000);
  FILE *f = fopen(argv[2], "wb");
  cprof_sink out = cprof_sink_fd(f ? fileno(f) : -1);
  err = f ? cprof_cpu_stop(&out) : -1;
  if (f) fclose(f);
  if (!err) err = cprof_profile_write_file("heap", 0, argv[3]);
  if (err) {
    fprintf(stderr, "writing the profiles: %s\n", cprof_strerror(err));
    return 1;
  }
  printf("%llu\n", (unsigned long long)sum);
  return 0;
}
