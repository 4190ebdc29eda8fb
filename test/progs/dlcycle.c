/*
 * Loads and unloads a plugin built without frame pointers (libdlcfi.so) N
 * times while the CPU profile runs at 1000 Hz, every allocation is sampled
 * (heap rate 1) and another thread writes goroutine and heap profiles
 * without pause (each signals every thread, whose handler walks through
 * code that may be unloading). Then loads it once more, works in it for
 * half a CPU second and writes the CPU profile to stdout, so the test can
 * check the stacks through the plugin.
 *   dlcycle LIBRARY N
 * Exit status 0 when the program survived; messages on stderr.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static atomic_int stop;

static void *writer(void *arg) {
  (void)arg;
  static const char *const names[] = {"goroutine", "heap", "threadcreate"};
  for (unsigned i = 0; !atomic_load(&stop); i++) {
    cprof_buf buf = {0};
    cprof_sink sink = cprof_sink_buf(&buf);
    cprof_profile_write(names[i % 3], (int)(i & 1), &sink);
    cprof_buf_free(&buf);
  }
  return NULL;
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t run_plugin(const char *path,
                                                     double seconds,
                                                     uint64_t n) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(1);
  }
  uint64_t (*work)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "dlcfi_work");
  if (!work) exit(1);
  uint64_t r = 0;
  double t0 = cpu_now();
  do r += work(n);
  while (cpu_now() - t0 < seconds);
  dlclose(h);
  return r;
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  int cycles = atoi(argv[2]);
  cprof_heap_set_rate(1);
  if (cprof_cpu_start(1000) != 0) return 1;
  /* A first profile here loads the libraries cprof opens on first use
   * (libdw, libelf) before the plugin cycles start: the dynamic loader's
   * own allocations, made under its lock by one thread's dlopen and freed
   * by another's dlclose, look like a race to ThreadSanitizer, which does
   * not see that lock. */
  cprof_buf first = {0};
  cprof_sink first_sink = cprof_sink_buf(&first);
  cprof_profile_write("threadcreate", 0, &first_sink);
  cprof_buf_free(&first);
  pthread_t t;
  pthread_create(&t, NULL, writer, NULL);
  uint64_t r = 0;
  for (int i = 0; i < cycles; i++) r += run_plugin(argv[1], 0, 2000);
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  cprof_buf drop = {0};
  cprof_sink drop_sink = cprof_sink_buf(&drop);
  cprof_cpu_stop(&drop_sink);
  cprof_buf_free(&drop);

  /* The stacks through the plugin while it is loaded: a fresh profile. */
  void *keep = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!keep) return 1;
  if (cprof_cpu_start(1000) != 0) return 1;
  r += run_plugin(argv[1], 0.5, 200000);
  cprof_sink out = cprof_sink_fd(STDOUT_FILENO);
  int err = cprof_cpu_stop(&out);
  dlclose(keep);
  fprintf(stderr, "%d cycles done (%llu)\n", cycles, (unsigned long long)r);
  return err != 0;
}
