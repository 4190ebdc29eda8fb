/*
 * A server-like program for the labels tests: a pool of worker threads
 * serves requests of two kinds, "api" (heavier) and "static", each handled
 * under its own label set {phase=serve, kind=<kind>}; the sets are made
 * from the labels the workers inherited from the main thread. A request
 * burns CPU, allocates (keeping a few blocks live) and takes a shared
 * mutex that it holds for a while; the program measures per kind the CPU
 * its workers used (thread CPU clock), the bytes it allocated and kept,
 * and the time it waited for the mutex:
 *   labels_server OUTDIR [REQUESTS]   (default 750, at most 20000)
 * writes OUTDIR/{cpu,heap,mutex,block}.pb.gz and prints key=value lines
 * (cpu_ns_<kind>, alloc_bytes_<kind>, inuse_bytes_<kind>, wait_ns_<kind>,
 * inherited=1 when every worker started with the main thread's labels).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cprof.h"

#define WORKERS 4
#define MAX_REQUESTS 20000
#define KEEP_EVERY 16

enum { API, STATIC, KINDS };
static const char *const kind_name[KINDS] = {"api", "static"};

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int next_request;
static _Atomic int64_t cpu_ns[KINDS], alloc_bytes[KINDS], inuse_bytes[KINDS],
    wait_ns[KINDS];
static _Atomic int inherited;
static const cprof_labels *main_labels;

static int requests = 750;
static void *kept[MAX_REQUESTS];
static _Atomic int nkept;

static int64_t clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void spin_cpu(int64_t ns) {
  int64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
  volatile uint64_t x = 1;
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
    for (int i = 0; i < 5000; i++) x = x * 6364136223846793005ull + 1;
}

__attribute__((noinline)) static void handle(int kind) {
  spin_cpu(kind == API ? 12000000 : 4000000);
  int blocks = kind == API ? 20 : 10;
  size_t size = kind == API ? 3000 : 1500;
  for (int i = 0; i < blocks; i++) {
    char *p = malloc(size);
    if (!p) abort();
    p[0] = (char)i;
    alloc_bytes[kind] += (int64_t)size;
    if (atomic_fetch_add(&next_request, 0) % KEEP_EVERY == 0 && i == 0) {
      kept[atomic_fetch_add(&nkept, 1)] = p;
      inuse_bytes[kind] += (int64_t)size;
    } else {
      free(p);
    }
  }
  int64_t t0 = clock_ns(CLOCK_MONOTONIC);
  pthread_mutex_lock(&shared);
  wait_ns[kind] += clock_ns(CLOCK_MONOTONIC) - t0;
  spin_cpu(kind == API ? 800000 : 400000);
  pthread_mutex_unlock(&shared);
}

static void *worker(void *arg) {
  (void)arg;
  const cprof_labels *base = cprof_labels_current();
  if (base == main_labels) inherited++;
  const cprof_labels *sets[KINDS];
  for (int k = 0; k < KINDS; k++) {
    const char *kv[2] = {"kind", kind_name[k]};
    if (cprof_labels_new(base, kv, 1, &sets[k]) != 0) abort();
  }
  for (;;) {
    int i = atomic_fetch_add(&next_request, 1);
    if (i >= requests) break;
    int kind = i % 3 == 0 ? API : STATIC;
    const cprof_labels *prev = cprof_labels_push(sets[kind]);
    int64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    handle(kind);
    cpu_ns[kind] += clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    cprof_labels_pop(prev);
  }
  return NULL;
}

static void write_profile(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.pb.gz", dir, name);
  int err = cprof_profile_write_file(name, 0, path);
  if (err) {
    fprintf(stderr, "%s: %s\n", name, cprof_strerror(err));
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: labels_server OUTDIR [REQUESTS]\n");
    return 2;
  }
  if (argc == 3) requests = atoi(argv[2]);
  if (requests < 1 || requests > MAX_REQUESTS) return 2;
  cprof_heap_set_rate(4096);
  cprof_set_mutex_profile_fraction(1);
  cprof_set_block_profile_rate(1);
  if (cprof_cpu_start(1000) != 0) return 1;
  const char *kv[2] = {"phase", "serve"};
  if (cprof_labels_new(NULL, kv, 1, &main_labels) != 0) return 1;
  const cprof_labels *prev = cprof_labels_push(main_labels);
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++) pthread_create(&t[i], NULL, worker, NULL);
  cprof_labels_pop(prev);
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);

  char path[4096];
  snprintf(path, sizeof path, "%s/cpu.pb.gz", argv[1]);
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  cprof_sink sink = cprof_sink_fd(fileno(f));
  if (cprof_cpu_stop(&sink) != 0) return 1;
  fclose(f);
  write_profile(argv[1], "heap");
  write_profile(argv[1], "mutex");
  write_profile(argv[1], "block");
  for (int k = 0; k < KINDS; k++)
    printf("cpu_ns_%s=%lld\nalloc_bytes_%s=%lld\ninuse_bytes_%s=%lld\n"
           "wait_ns_%s=%lld\n",
           kind_name[k], (long long)cpu_ns[k], kind_name[k],
           (long long)alloc_bytes[k], kind_name[k], (long long)inuse_bytes[k],
           kind_name[k], (long long)wait_ns[k]);
  printf("inherited=%d\n", inherited == WORKERS);
  for (int i = 0; i < nkept; i++) free(kept[i]);
  return 0;
}
