/*
 * The demo workload: a small multi-threaded program that links cprof, does
 * some CPU work and some allocation on several threads, and at the end
 * writes every profile cprof offers into a directory. With -p it also
 * serves /debug/pprof/ on a free loopback port (written to PORTFILE), so
 * `go tool pprof` can fetch profiles from it while it runs. `make demo`
 * does both.
 *
 *   demo [-t SECONDS] [-o DIR] [-p PORTFILE]
 */
#include <cprof.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double run_seconds = 1.0;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the workers compute, kept so that the work is not optimised away;
 * each adds its own total once, at its end. */
static _Atomic uint64_t result;
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
#define KEPT 4096
static char *recent[KEPT]; /* the last records kept: the live heap */
static unsigned nrecent;

/* Hot loop number one: a hash over a buffer. */
__attribute__((noinline)) static uint64_t crunch_numbers(const unsigned char *p,
                                                         size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Keeps a copy of a record, under a lock the workers contend on. The hash
 * under the lock holds it for a few microseconds, so the workers do wait
 * for each other, even in a build several times slower. */
__attribute__((noinline)) static void remember(const char *rec, size_t len) {
  char *copy = malloc(len);
  if (!copy) return;
  memcpy(copy, rec, len);
  pthread_mutex_lock(&results_lock);
  atomic_fetch_xor_explicit(&result,
                            crunch_numbers((const unsigned char *)copy, len),
                            memory_order_relaxed);
  char *old = recent[nrecent % KEPT];
  recent[nrecent++ % KEPT] = copy;
  pthread_mutex_unlock(&results_lock);
  free(old);
}

/* Hot loop number two: allocate, fill and parse small records. */
__attribute__((noinline)) static size_t parse_records(unsigned seed) {
  size_t total = 0;
  for (int i = 0; i < 64; i++) {
    size_t len = 64 + (seed = seed * 1103515245u + 12345u) % 4096;
    char *rec = malloc(len);
    if (!rec) continue;
    memset(rec, 'a' + i % 26, len);
    total += crunch_numbers((unsigned char *)rec, len) & 1;
    if (i % 8 == 0) remember(rec, len);
    free(rec);
  }
  return total;
}


static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  unsigned char block[16384];
  memset(block, (int)seed, sizeof block);
  uint64_t mine = 0;
  double end = now() + run_seconds;
  while (now() < end) {
    mine += crunch_numbers(block, sizeof block);
    mine += parse_records(seed++);
  }
  atomic_fetch_add_explicit(&result, mine, memory_order_relaxed);
  return NULL;
}

static void *reporter(void *arg) {
  (void)arg;
  double end = now() + run_seconds;
  while (now() < end) usleep(10000);
  return NULL;
}

/* Two different creating sites, so the threadcreate profile has two
 * stacks. */
__attribute__((noinline)) static void start_worker_pool(pthread_t *t, int n) {
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
}

__attribute__((noinline)) static void start_reporter(pthread_t *t) {
  pthread_create(t, NULL, reporter, NULL);
}

int main(int argc, char **argv) {
  const char *outdir = "demo-profiles", *portfile = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "t:o:p:")) != -1) {
    if (opt == 't') {
      run_seconds = atof(optarg);
    } else if (opt == 'o') {
      outdir = optarg;
    } else if (opt == 'p') {
      portfile = optarg;
    } else {
      fprintf(stderr, "usage: %s [-t SECONDS] [-o DIR] [-p PORTFILE]\n",
              argv[0]);
      return 2;
    }
  }
  if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
    perror(outdir);
    return 1;
  }

  printf("demo: cprof %s, running %.1f s on 5 threads\n", cprof_version(),
         run_seconds);
  /* Finer than the defaults, so that each profile the demo shows rests on
   * enough samples: the live set (4096 records of 2 KiB on average, 8 MiB)
   * is sampled every 128 KiB instead of every 512 KiB (about 64 live
   * samples), and every contended lock is recorded (Go's
   * runtime.SetMutexProfileFraction(1)). A production program keeps the
   * defaults. */
  cprof_heap_set_rate(128 * 1024);
  cprof_set_mutex_profile_fraction(1);
  cprof_http *http = NULL;
  if (portfile) {
    cprof_http_config cfg = {0};
    cfg.addr = "127.0.0.1:0";
    cfg.enable_mutex_profile = 1;
    cfg.enable_block_profile = 1;
    int err = cprof_http_start(&cfg, &http);
    FILE *f = err ? NULL : fopen(portfile, "w");
    if (f) {
      fprintf(f, "%d\n", cprof_http_port(http));
      fclose(f);
    }
  }
  int cpu_err = cprof_cpu_start(100);
  if (cpu_err)
    fprintf(stderr, "demo: CPU profile: %s\n", cprof_strerror(cpu_err));
  pthread_t workers[4], rep;
  start_worker_pool(workers, 4);
  start_reporter(&rep);
  for (int i = 0; i < 4; i++) pthread_join(workers[i], NULL);
  pthread_join(rep, NULL);

  int failed = 0;
  if (!cpu_err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cpu.pb.gz", outdir);
    FILE *f = fopen(path, "wb");
    cprof_sink sink = cprof_sink_fd(f ? fileno(f) : -1);
    int err = cprof_cpu_stop(&sink);
    if (f) fclose(f);
    if (err) {
      fprintf(stderr, "demo: cpu: %s\n", cprof_strerror(err));
      failed = 1;
    } else {
      printf("demo: wrote %s\n", path);
    }
  }
  for (size_t i = 0; i < cprof_profile_count(); i++) {
    const char *name = cprof_profile_name(i);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.pb.gz", outdir, name);
    int err = cprof_profile_write_file(name, 0, path);
    if (err) {
      fprintf(stderr, "demo: %s: %s\n", name, cprof_strerror(err));
      failed = 1;
      continue;
    }
    printf("demo: wrote %s (%ld entries)\n", path, cprof_profile_entries(name));
  }
  if (http) cprof_http_stop(http);
  return failed;
}
