/*
 * Fault tests: the things that break profilers in production. Each mode
 * exits 0 when cprof survived it and the program behaved as it would have
 * without cprof; messages on stderr.
 *   faults fork        fork with and without exec while CPU and heap run
 *   faults dlopen LIB  dlopen/dlclose LIB in a loop while profiling; its
 *                      function is symbolized right after every load and
 *                      the last CPU profile goes to stdout
 *   faults exits       threads start and exit during goroutine dumps
 *   faults blocked     some threads block SIGPROF and the goroutine signal
 *   faults handlers    the program's own SIGUSR1 handler with dumps on
 *   faults deep        recursion deeper than the stack cap at 1000 Hz; the
 *                      CPU profile goes to stdout
 *   faults nofp        code without frame pointers at 1000 Hz
 *   faults oom         the allocator returns NULL while every allocation
 *                      is sampled
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"
#include "encode/symbolize.h"

static __thread volatile uint64_t sink; /* per thread: no race */

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void burn(double secs) {
  double end = cpu_now() + secs;
  uint64_t x = sink;
  while (cpu_now() < end)
    for (int i = 0; i < 10000; i++) x = x * 6364136223846793005ull + 1;
  sink = x;
}

static int write_cpu(void) {
  cprof_sink out = cprof_sink_fd(STDOUT_FILENO);
  int err = cprof_cpu_stop(&out);
  if (err) fprintf(stderr, "cpu stop: %s\n", cprof_strerror(err));
  return err ? 1 : 0;
}

static int mode_fork(void) {
  if (cprof_cpu_start(1000) || cprof_heap_set_rate(1) < 0) return 1;
  for (int round = 0; round < 20; round++) {
    void *p = malloc(1000);
    pid_t pid = fork();
    if (pid == 0) {
      if (round % 2 == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(126);
      }
      /* Without exec: the child allocates, profiles on its own, exits. */
      free(p);
      void *q = malloc(5000);
      burn(0.01);
      cprof_buf b = {0};
      int err = cprof_profilez("heap", 0, 0, &b);
      cprof_buf_free(&b);
      free(q);
      _exit(err == 0 || err == CPROF_ENOTENABLED ? 0 : 3);
    }
    burn(0.005);
    free(p);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      fprintf(stderr, "child of round %d failed: status %d\n", round, status);
      return 1;
    }
  }
  cprof_buf b = {0};
  cprof_sink s = cprof_sink_buf(&b);
  int err = cprof_cpu_stop(&s);
  cprof_buf_free(&b);
  fprintf(stderr, "fork: 20 rounds (10 with exec), parent profile: %s\n",
          cprof_strerror(err));
  return err ? 1 : 0;
}

static int mode_dlopen(const char *lib) {
  if (cprof_cpu_start(1000)) return 1;
  for (int round = 0; round < 30; round++) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    void (*spin)(double) = (void (*)(double))dlsym(h, "dlo_spin");
    if (!spin) return 1;
    spin(0.01);
    cprof__sym_lock();
    cprof__sym_refresh();
    const cprof__sym_result *r = cprof__sym_lookup((uintptr_t)spin + 4);
    int named = r && r->nframes > 0 &&
                strcmp(r->frames[r->nframes - 1].name, "dlo_spin") == 0;
    cprof__sym_unlock();
    if (!named) {
      fprintf(stderr, "round %d: dlo_spin not symbolized after dlopen\n",
              round);
      return 1;
    }
    if (round < 29) dlclose(h);
  }
  fprintf(stderr, "dlopen: 30 loads, each symbolized\n");
  return write_cpu();
}

static atomic_bool stop_churn;

static void *short_thread(void *arg) {
  (void)arg;
  burn(0.0005);
  return NULL;
}

static void *churn_threads(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_churn)) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_thread, NULL) == 0) pthread_detach(t);
    usleep(200);
  }
  return NULL;
}

static int mode_exits(void) {
  pthread_t c[2];
  for (int i = 0; i < 2; i++) pthread_create(&c[i], NULL, churn_threads, NULL);
  int failures = 0;
  for (int i = 0; i < 50; i++) {
    cprof_buf b = {0};
    cprof_sink s = cprof_sink_buf(&b);
    int err = cprof_profile_write("goroutine", i % 3, &s);
    if (err) {
      fprintf(stderr, "dump %d: %s\n", i, cprof_strerror(err));
      failures++;
    }
    cprof_buf_free(&b);
  }
  atomic_store(&stop_churn, true);
  for (int i = 0; i < 2; i++) pthread_join(c[i], NULL);
  fprintf(stderr, "exits: 50 goroutine dumps while threads came and went\n");
  return failures ? 1 : 0;
}

static void *blocking_thread(void *arg) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  burn(*(double *)arg);
  return NULL;
}

static int mode_blocked(void) {
  if (cprof_cpu_start(1000)) return 1;
  double secs = 0.3;
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, blocking_thread, &secs);
  usleep(50000);
  cprof_buf b = {0};
  cprof_sink s = cprof_sink_buf(&b);
  int err = cprof_profile_write("goroutine", 2, &s);
  int ok = err == 0 && b.len > 0;
  fprintf(stderr, "blocked: goroutine dump with 2 threads blocking every "
                  "signal: %s\n%.*s",
          cprof_strerror(err), (int)(b.len > 2000 ? 2000 : b.len),
          (const char *)b.data);
  cprof_buf_free(&b);
  burn(0.1);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  cprof_buf c = {0};
  s = cprof_sink_buf(&c);
  err = cprof_cpu_stop(&s);
  cprof_buf_free(&c);
  return ok && err == 0 ? 0 : 1;
}

static atomic_int usr1_seen;
static void on_usr1(int sig) {
  (void)sig;
  usr1_seen++;
}

static int mode_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  char why[160];
  if (cprof_dump_configure("threadcreate", why, sizeof why)) {
    fprintf(stderr, "dump: %s\n", why);
    return 1;
  }
  for (int i = 0; i < 3; i++) {
    kill(getpid(), SIGUSR1);
    usleep(100000);
  }
  fprintf(stderr, "handlers: the program's SIGUSR1 handler ran %d times\n",
          (int)usr1_seen);
  return usr1_seen == 3 ? 0 : 1;
}

__attribute__((noinline)) static uint64_t recurse(int depth) {
  if (depth == 0) {
    burn(0.3);
    return sink;
  }
  uint64_t r = recurse(depth - 1) + (uint64_t)depth;
  __asm__ volatile("" ::: "memory");
  return r;
}

static int mode_deep(void) {
  if (cprof_cpu_start(1000)) return 1;
  recurse(500);
  return write_cpu();
}

/* Functions that use rbp as an ordinary register: a walk through them
 * finds garbage where a frame pointer should be. */
__attribute__((noinline, optimize("omit-frame-pointer"))) static uint64_t
nofp_leaf(uint64_t n) {
  uint64_t a = n, b = n * 3, c = n * 5, d = n * 7, e = n * 11, f = n * 13;
  for (uint64_t i = 0; i < 200000; i++) {
    a += b ^ i;
    b += c ^ a;
    c += d ^ b;
    d += e ^ c;
    e += f ^ d;
    f += a ^ e;
  }
  return a ^ b ^ c ^ d ^ e ^ f;
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static uint64_t
nofp_middle(uint64_t n) {
  uint64_t r = 0;
  for (int i = 0; i < 4; i++) r += nofp_leaf(n + (uint64_t)i);
  return r;
}

static int mode_nofp(void) {
  if (cprof_cpu_start(1000)) return 1;
  double end = cpu_now() + 0.5;
  uint64_t r = 0;
  while (cpu_now() < end) r += nofp_middle(r);
  sink = r;
  cprof_buf b = {0};
  cprof_sink s = cprof_sink_buf(&b);
  int err = cprof_cpu_stop(&s);
  cprof_buf_free(&b);
  fprintf(stderr, "nofp: 0.5 s in code without frame pointers: %s\n",
          cprof_strerror(err));
  return err ? 1 : 0;
}

static int mode_oom(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  fprintf(stderr, "oom: skipped: an address-space limit breaks the "
                  "sanitizer's shadow memory\n");
  return 0;
#else
  cprof_heap_set_rate(1);
  if (cprof_cpu_start(1000)) return 1;
  struct rlimit rl = {512u << 20, 512u << 20};
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 1;
  void *blocks[4096];
  int n = 0, nulls = 0, bad_errno = 0;
  for (int i = 0; i < 4096; i++) {
    errno = 0;
    void *p = malloc(1u << 20);
    if (!p) {
      nulls++;
      if (errno != ENOMEM) bad_errno++;
      continue;
    }
    memset(p, 1, 4096);
    blocks[n++] = p;
  }
  for (int i = 0; i < n; i++) free(blocks[i]);
  cprof_buf b = {0};
  cprof_sink s = cprof_sink_buf(&b);
  int err = cprof_profile_write("heap", 0, &s);
  cprof_buf_free(&b);
  cprof_buf c = {0};
  s = cprof_sink_buf(&c);
  cprof_cpu_stop(&s);
  cprof_buf_free(&c);
  fprintf(stderr,
          "oom: %d allocations of 1 MiB succeeded, %d returned NULL (%d "
          "without ENOMEM); heap profile after: %s\n",
          n, nulls, bad_errno, cprof_strerror(err));
  return nulls > 0 && bad_errno == 0 ? 0 : 1;
#endif
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODE [ARG]\n", argv[0]);
    return 2;
  }
  const char *m = argv[1];
  if (!strcmp(m, "fork")) return mode_fork();
  if (!strcmp(m, "dlopen") && argc == 3) return mode_dlopen(argv[2]);
  if (!strcmp(m, "exits")) return mode_exits();
  if (!strcmp(m, "blocked")) return mode_blocked();
  if (!strcmp(m, "handlers")) return mode_handlers();
  if (!strcmp(m, "deep")) return mode_deep();
  if (!strcmp(m, "nofp")) return mode_nofp();
  if (!strcmp(m, "oom")) return mode_oom();
  fprintf(stderr, "unknown mode %s\n", m);
  return 2;
}
