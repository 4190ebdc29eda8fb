/*
 * The HTTP endpoint's test program. It starts cprof_http_start() and
 * prints the bound port (0 for a unix socket) as one line on stdout, then
 * runs a small workload until SIGTERM or SIGINT, when it stops the server
 * and exits 0. The workload: one thread burning a quarter of a CPU in
 * burn_http(), and a thread created every 200 ms (so threadcreate deltas
 * have something to show) that also allocates and frees.
 *
 *   http_server [--addr A] [--token T] [--max-seconds N] [--remote]
 *               [--idle SECONDS] [--header-timeout SECONDS]
 *               [--max-connections N] [--no-stop] [--test-profiles] [--log]
 *     --no-stop leaves the server running and returns from main at
 *     SIGTERM, for what process exit does to it.
 *     --test-profiles adds two profiles through the handler's lookup seam:
 *     "nodelta" (threadcreate's records, but no ?seconds= support) and
 *     "nofuncs" (a pprof profile whose main-binary mapping has no
 *     functions, for symbolization through /debug/pprof/symbol).
 *     --log prints the server's log lines on stderr.
 *   http_server --refuse ADDR   start must fail with CPROF_ENOTLOOPBACK
 *   http_server --inuse         a second start on a bound port must fail
 *                               with CPROF_EADDRINUSE; NULL config EINVAL
 * Messages on stderr; exit status 0 on success.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"
#include "sink/http.h"
#include "encode/pprof.h"

static atomic_int quit;
static atomic_bool stop_work;
static _Atomic uint64_t sink; /* shared by the burning threads */

static void on_signal(int sig) {
  (void)sig;
  quit = 1;
}

__attribute__((noinline)) void burn_http(uint64_t n) {
  uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
  atomic_store_explicit(&sink, x, memory_order_relaxed);
}

__attribute__((noinline)) void spawn_http_worker(void);

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A quarter of a CPU: 5 ms in burn_http, then 15 ms asleep. Every CPU
 * sample of the workload still lands in burn_http, and a test's server
 * leaves the machine's other CPU time to the tests beside it. */
static void *burner(void *arg) {
  (void)arg;
  const struct timespec rest = {0, 15000000};
  while (!atomic_load(&stop_work)) {
    const int64_t until = mono_ns() + 5000000;
    while (mono_ns() < until) burn_http(20000);
    nanosleep(&rest, NULL);
  }
  return NULL;
}

static void *short_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 64; i++) {
    char *volatile p = malloc(4096 + (size_t)i * 64);
    if (p) p[0] = 1;
    free(p);
  }
  burn_http(100000);
  return NULL;
}

__attribute__((noinline)) void spawn_http_worker(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, short_worker, NULL) == 0) pthread_join(t, NULL);
}

static void *spawner(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_work)) {
    spawn_http_worker();
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void log_stderr(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "%s\n", line);
}

/* The test profiles, served through the handler's lookup seam. */
static const cprof__profile_def *threadcreate_def;

static long test_entries(void) { return 0; }
static int nodelta_collect(cprof__records *out) {
  return threadcreate_def->collect(out);
}
static int nodelta_write(const cprof__records *recs, int debug,
                         int64_t duration_ns, const cprof_sink *s) {
  return threadcreate_def->write(recs, debug, duration_ns, s);
}

/* The executable mapping that holds burn_http, from /proc/self/maps. */
static int find_mapping(uint64_t *start, uint64_t *limit, uint64_t *offset,
                        char *path, size_t pathlen) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[1024];
  int found = -1;
  uint64_t pc = (uint64_t)(uintptr_t)burn_http;
  while (found && fgets(line, sizeof line, f)) {
    uint64_t s, e, off;
    char perms[8], file[512] = "";
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %511s",
               &s, &e, perms, &off, file) >= 4 &&
        perms[2] == 'x' && pc >= s && pc < e) {
      *start = s, *limit = e, *offset = off;
      snprintf(path, pathlen, "%s", file);
      found = 0;
    }
  }
  fclose(f);
  return found;
}

static int nofuncs_collect(cprof__records *out) {
  (void)out;
  return 0;
}

/* Addresses only: a profile as a remote agent without symbols would send
 * it, which pprof must symbolize through /debug/pprof/symbol. */
static int nofuncs_write(const cprof__records *recs, int debug,
                         int64_t duration_ns, const cprof_sink *s) {
  (void)recs, (void)debug, (void)duration_ns;
  uint64_t start, limit, offset;
  char path[512];
  if (find_mapping(&start, &limit, &offset, path, sizeof path) != 0)
    return CPROF_EIO;
  cprof__pprof *p = cprof__pprof_new(s, true);
  if (!p) return CPROF_ENOMEM;
  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_period(p, "samples", "count", 1);
  cprof__pprof_mapping m = {.id = 1,
                            .memory_start = start,
                            .memory_limit = limit,
                            .file_offset = offset,
                            .filename = path};
  cprof__pprof_add_mapping(p, &m);
  cprof__pprof_location(p, 1, 1, (uint64_t)(uintptr_t)burn_http + 4, NULL, 0,
                        false);
  cprof__pprof_location(p, 2, 1, (uint64_t)(uintptr_t)spawn_http_worker + 4,
                        NULL, 0, false);
  uint64_t stack[] = {1, 2};
  int64_t v = 7;
  cprof__pprof_sample(p, stack, 2, &v, 1, NULL, 0);
  return cprof__pprof_finish(p);
}

static const cprof__profile_def nodelta_def = {
    .name = "nodelta",
    .description = "test: no delta support",
    .supports_delta = false,
    .entries = test_entries,
    .collect = nodelta_collect,
    .write = nodelta_write,
};
static const cprof__profile_def nofuncs_def = {
    .name = "nofuncs",
    .description = "test: a mapping without functions",
    .supports_delta = false,
    .entries = test_entries,
    .collect = nofuncs_collect,
    .write = nofuncs_write,
};

static const cprof__profile_def *test_find(const char *name) {
  if (strcmp(name, "nodelta") == 0) return &nodelta_def;
  if (strcmp(name, "nofuncs") == 0) return &nofuncs_def;
  return cprof__profile_find_route(name);
}

static int refuse(const char *addr) {
  cprof_http_config cfg = {.addr = addr};
  cprof_http *srv = NULL;
  int err = cprof_http_start(&cfg, &srv);
  fprintf(stderr, "start %s: %s\n", addr, cprof_strerror(err));
  return err == CPROF_ENOTLOOPBACK && !srv ? 0 : 1;
}

static int inuse(void) {
  cprof_http_config cfg = {.addr = "127.0.0.1:0", .logger = log_stderr};
  cprof_http *a = NULL, *b = NULL;
  if (cprof_http_start(NULL, &a) != CPROF_EINVAL || a) return 1;
  if (cprof_http_start(&cfg, &a) != 0) return 1;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", cprof_http_port(a));
  cfg.addr = addr;
  int err = cprof_http_start(&cfg, &b);
  fprintf(stderr, "second start on %s: %s\n", addr, cprof_strerror(err));
  cprof_http_stop(a);
  return err == CPROF_EADDRINUSE && !b ? 0 : 1;
}

int main(int argc, char **argv) {
  cprof_http_config cfg = {.addr = "127.0.0.1:0"};
  bool no_stop = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--refuse") == 0 && v) return refuse(v);
    if (strcmp(a, "--inuse") == 0) return inuse();
    if (strcmp(a, "--addr") == 0 && v) cfg.addr = v, i++;
    else if (strcmp(a, "--token") == 0 && v) cfg.token = v, i++;
    else if (strcmp(a, "--max-seconds") == 0 && v) cfg.max_cpu_seconds = atoi(v), i++;
    else if (strcmp(a, "--idle") == 0 && v) cfg.idle_timeout_seconds = (unsigned)atoi(v), i++;
    else if (strcmp(a, "--header-timeout") == 0 && v) cfg.header_timeout_seconds = (unsigned)atoi(v), i++;
    else if (strcmp(a, "--max-connections") == 0 && v) cfg.max_connections = (unsigned)atoi(v), i++;
    else if (strcmp(a, "--no-stop") == 0) no_stop = true;
    else if (strcmp(a, "--remote") == 0) cfg.allow_remote = 1;
    else if (strcmp(a, "--log") == 0) cfg.logger = log_stderr;
    else if (strcmp(a, "--test-profiles") == 0) {
      threadcreate_def = cprof__profile_find("threadcreate");
      cprof__http_find = test_find;
    } else {
      fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
      return 2;
    }
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  cprof_http *srv;
  int err = cprof_http_start(&cfg, &srv);
  if (err) {
    fprintf(stderr, "cprof_http_start: %s\n", cprof_strerror(err));
    return 1;
  }
  pthread_t burn, spawn;
  pthread_create(&burn, NULL, burner, NULL);
  pthread_create(&spawn, NULL, spawner, NULL);
  printf("%d\n", cprof_http_port(srv));
  fflush(stdout);
  while (!quit) {
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  atomic_store(&stop_work, true);
  pthread_join(burn, NULL);
  pthread_join(spawn, NULL);
  if (no_stop) {
    fprintf(stderr, "exiting with the server running\n");
    return 0;
  }
  err = cprof_http_stop(srv);
  fprintf(stderr, "stopped: %s\n", cprof_strerror(err));
  return err ? 1 : 0;
}
