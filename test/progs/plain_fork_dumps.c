/*
 * A program that forks many short-lived children, as a pre-fork server or
 * a shell does, for the tests and the benchmark of what a fork child's
 * exit dump costs (e2e/fork_dumps*.sh, bench/fork_dumps.sh). It knows
 * nothing of cprof: it is run with it preloaded.
 *
 * The parent first works (about 30 ms of CPU in a few functions of its own
 * and of libc, and some allocations it keeps), as a server does before it
 * forks its workers; then it forks its children one at a time. Each child
 * works a little (CPU, allocations) and calls exit(0); the parent times
 * each child from the moment the child says it calls exit (a line on a
 * pipe, with CLOCK_MONOTONIC) until waitpid reaps it: what the child's
 * exit costs, its exit dump included.
 *
 *   plain_fork_dumps exit N        N children that exit; prints one line
 *                                  per child "child PID exit_us US cpu_us
 *                                  US" (cpu_us: the child's CPU time, all
 *                                  of its life, from wait4), then
 *                                  "children N total_ms MS", then
 *                                  "parent_cpu_us US children_cpu_us US"
 *                                  (getrusage), then, last,
 *                                  "parent_exit EPOCH_US" (CLOCK_REALTIME,
 *                                  microseconds) just before its own exit,
 *                                  so whoever waits for it can time the
 *                                  parent's exit the same way
 *   plain_fork_dumps term N STEP_US
 *                                  N children, each sent SIGTERM by the
 *                                  parent (i * STEP_US) microseconds after
 *                                  it said it calls exit (i = 0..N-1), so
 *                                  the signals land all along the exit
 *                                  dump; prints "child PID signal S" or
 *                                  "child PID status S" per child
 * Either mode takes, after its arguments, one of (only with dumps on,
 * since SIGUSR1 would otherwise end it):
 *   usr1                           raise SIGUSR1 before each fork, as a
 *                                  program that asks for a dump (or is
 *                                  sent one) while it forks
 *   warm LOG BLOCKS                before the first fork, raise SIGUSR1
 *                                  and wait (at most 60 s) until LOG holds
 *                                  BLOCKS complete blocks, so that the
 *                                  parent has written a dump before it
 *                                  forks
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t sink;
static void *volatile kept[64];

static int64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long long cpu_us(const struct rusage *ru) {
  return (long long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000 +
         ru->ru_utime.tv_usec + ru->ru_stime.tv_usec;
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define SPIN()                                                              \
  do {                                                                      \
    uint64_t x_ = atomic_load_explicit(&sink, memory_order_relaxed);        \
    for (int i_ = 0; i_ < 20000; i_++)                                      \
      x_ = x_ * 6364136223846793005ull + (uint64_t)i_;                      \
    atomic_store_explicit(&sink, x_, memory_order_relaxed);                 \
  } while (0)

__attribute__((noinline)) static void parent_burn(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end) SPIN();
}

/* Work that goes through libc, so profiles hold libc frames too. */
__attribute__((noinline)) static void parent_format(double seconds) {
  double end = cpu_now() + seconds;
  char buf[256];
  unsigned n = 0;
  while (cpu_now() < end) {
    snprintf(buf, sizeof buf, "%u %f %s", n, (double)n / 3.0, "text");
    n++;
    qsort(buf, strlen(buf), 1, (int (*)(const void *, const void *))strcmp);
  }
}

__attribute__((noinline)) static void parent_keep(void) {
  for (size_t i = 0; i < 64; i++) kept[i] = malloc(4096 << (i % 8));
}

__attribute__((noinline)) static void child_work(void) {
  double end = cpu_now() + 0.005;
  while (cpu_now() < end) SPIN();
  /* Through a volatile pointer: the compiler would take free(malloc(n))
   * away. */
  for (int i = 0; i < 16; i++) {
    char *volatile p = malloc(1 << 16);
    if (p) p[0] = (char)i;
    free(p);
  }
}

/* Reads one line from fd into buf; false at end of file. */
static bool read_line(int fd, char *buf, size_t size) {
  size_t n = 0;
  while (n + 1 < size) {
    ssize_t r = read(fd, buf + n, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (buf[n] == '\n') break;
    n++;
  }
  buf[n] = '\0';
  return n > 0;
}

/* Raises SIGUSR1 and waits until log holds `blocks` lines that end a
 * block. */
static bool wait_for_dump(const char *log, int blocks) {
  raise(SIGUSR1);
  for (int tries = 0; tries < 6000; tries++) {
    FILE *f = fopen(log, "r");
    int ends = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
      if (strncmp(line, "-----END ", 9) == 0) ends++;
    if (f) fclose(f);
    if (ends >= blocks) return true;
    struct timespec d = {0, 10 * 1000 * 1000};
    nanosleep(&d, NULL);
  }
  return false;
}

static int usage(void) {
  fprintf(stderr, "usage: plain_fork_dumps exit N | term N STEP_US "
                  "[usr1 | warm LOG BLOCKS]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  bool term = strcmp(argv[1], "term") == 0;
  if (!term && strcmp(argv[1], "exit") != 0) return usage();
  if (term && argc < 4) return usage();
  int n = atoi(argv[2]);
  long step_us = term ? atol(argv[3]) : 0;
  int opt = term ? 4 : 3;
  bool usr1 = false;
  const char *warm_log = NULL;
  int warm_blocks = 0;
  if (argc > opt && strcmp(argv[opt], "usr1") == 0) {
    usr1 = true;
  } else if (argc > opt + 2 && strcmp(argv[opt], "warm") == 0) {
    warm_log = argv[opt + 1];
    warm_blocks = atoi(argv[opt + 2]);
  } else if (argc > opt) {
    return usage();
  }

  parent_keep();
  parent_burn(0.015);
  parent_format(0.015);
  if (warm_log && !wait_for_dump(warm_log, warm_blocks)) {
    fprintf(stderr, "plain_fork_dumps: no dump of %d blocks in %s\n",
            warm_blocks, warm_log);
    return 1;
  }

  int64_t start = mono_us();
  for (int i = 0; i < n; i++) {
    if (usr1) raise(SIGUSR1);
    int fds[2];
    if (pipe(fds) != 0) {
      perror("pipe");
      return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      close(fds[0]);
      child_work();
      char line[32];
      int len = snprintf(line, sizeof line, "%lld\n", (long long)mono_us());
      if (write(fds[1], line, (size_t)len) != len) _exit(3);
      exit(0);
    }
    close(fds[1]);
    char line[64];
    bool said = read_line(fds[0], line, sizeof line);
    close(fds[0]);
    if (term && said) {
      struct timespec d = {(time_t)(i * step_us / 1000000),
                           (long)(i * step_us % 1000000) * 1000};
      nanosleep(&d, NULL);
      kill(pid, SIGTERM);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    int64_t reaped = mono_us();
    if (!said) {
      printf("child %d said nothing\n", (int)pid);
    } else if (term) {
      if (WIFSIGNALED(status))
        printf("child %d signal %d\n", (int)pid, WTERMSIG(status));
      else
        printf("child %d status %d\n", (int)pid, WEXITSTATUS(status));
    } else {
      printf("child %d exit_us %lld cpu_us %lld\n", (int)pid,
             (long long)(reaped - atoll(line)), cpu_us(&ru));
    }
  }
  printf("children %d total_ms %lld\n", n,
         (long long)((mono_us() - start) / 1000));
  struct rusage self, children;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  printf("parent_cpu_us %lld children_cpu_us %lld\n", cpu_us(&self),
         cpu_us(&children));
  printf("parent_exit %lld\n", (long long)real_us());
  fflush(stdout);
  return 0;
}
