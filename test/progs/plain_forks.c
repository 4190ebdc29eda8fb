/*
 * A program that forks, execs and ends the ways real programs do, for the
 * tests of what cprof does in children (e2e/children_*.sh). It knows
 * nothing of cprof; test/progs/forks.c is the same program linked with it.
 *   plain_forks daemon S     daemonizes with daemon(3) (the parent leaves by
 *                            _exit(0) at once; the child, in a session of
 *                            its own, keeps the standard descriptors), or
 *                            with exit(0) after its own fork as nginx
 *                            does (daemon-exit S), or with a double fork
 *                            (daemon-double S: the first child leaves the
 *                            session, forks the daemon and exits), then
 *                            serves as `server S`
 *   plain_forks daemon-check FILE NOCHDIR NOCLOSE
 *                            daemon(NOCHDIR, NOCLOSE), then writes into FILE
 *                            (an absolute path) its working directory,
 *                            where descriptors 0, 1 and 2 lead, whether it
 *                            leads a session, and daemon's result
 *   plain_forks prefork      a master that forks two workers, as pre-fork
 *                            servers do: each burns about 0.5 s of CPU in
 *                            a function of its own (alpha_worker_burn,
 *                            beta_worker_burn) and exits normally; the
 *                            master burns in master_burn before (0.1 s)
 *                            and after (0.2 s) the forks, waits, exits
 *   plain_forks server S     a master that forks two workers and idles
 *                            while they serve (and a third on SIGUSR2):
 *                            each burns half a CPU (20 ms bursts) in its
 *                            own function
 *                            (alpha_worker_burn, beta_worker_burn; the
 *                            third beta's) and allocates, for S
 *                            seconds of wall time or until it is sent
 *                            SIGTERM; the master waits for both, and on
 *                            SIGTERM passes it on; it stays up, once they
 *                            are gone, until SIGTERM or S seconds
 *   plain_forks env          prints its pid, its LD_PRELOAD, its CPROF_HTTP
 *                            and how many CPROF_* variables it has,
 *                            allocates, exits
 *   plain_forks spawn        prints its pid, runs `plain_forks env` as a
 *                            child (fork and exec), waits, exits
 *   plain_forks uexit        allocates and ends with _exit(0)
 *   plain_forks uExit        allocates and ends with _Exit(0)
 *   plain_forks failexec     forks a child and vforks another, each of
 *                            which fails to exec and calls _exit(127), and
 *                            forks a third that fails to exec and calls
 *                            exit(127); then ends with _exit(0)
 *   plain_forks alarmexit    ends with _exit(0) from a SIGALRM handler
 *   plain_forks termexit     its SIGTERM handler calls _exit(0); raises
 *                            SIGTERM
 * Every mode prints "pid N" (and the children's "child N") on stdout.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Atomic for ThreadSanitizer's sake. A child of a multi-threaded process
 * runs with TSan's interceptors ignored, so a signal TSan holds back is
 * delivered only at the child's next atomic operation: without one in the
 * burners, a worker's whole run gave one CPU sample, at exit. */
static _Atomic uint64_t sink;
static void *volatile kept;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A macro, not a function: the time is each burner's own (flat) time,
 * with no frame (not even an inlined one) of a shared helper. */
#define SPIN()                                                              \
  do {                                                                      \
    uint64_t x_ = atomic_load_explicit(&sink, memory_order_relaxed);        \
    for (int i_ = 0; i_ < 100000; i_++)                                     \
      x_ = x_ * 6364136223846793005ull + (uint64_t)i_;                      \
    atomic_store_explicit(&sink, x_, memory_order_relaxed);                 \
  } while (0)

/* Each burns CPU time in a frame of its own, for `seconds` of it. */
__attribute__((noinline)) static void alpha_worker_burn(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end) SPIN();
}

__attribute__((noinline)) static void beta_worker_burn(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end) SPIN();
}

__attribute__((noinline)) static void master_burn(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end) SPIN();
}

static void say_pid(const char *what) {
  printf("%s %d\n", what, (int)getpid());
  fflush(stdout);
}

static int reap(pid_t pid) {
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static volatile sig_atomic_t server_stop, server_more;
static void on_server_term(int sig) {
  (void)sig;
  server_stop = 1;
}
static void on_server_usr2(int sig) {
  (void)sig;
  server_more = 1;
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mode_server(double seconds) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_server_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = on_server_usr2;
  sigaction(SIGUSR2, &sa, NULL);
  say_pid("master");
  pid_t w[3] = {-1, -1, -1};
  for (int i = 0; i < 3; i++) {
    if (i == 2) {
      /* A third worker, started on SIGUSR2 while the others run. */
      while (!server_more && !server_stop) usleep(10000);
      if (server_stop) break;
    }
    w[i] = fork();
    if (w[i] == 0) {
      printf("worker%d %d\n", i, (int)getpid());
      fflush(stdout);
      double end = wall_now() + seconds;
      while (!server_stop && wall_now() < end) {
        if (i == 0)
          alpha_worker_burn(0.02);
        else
          beta_worker_burn(0.02);
        kept = malloc(65536 + (size_t)i);
        free(kept);
        /* Half a CPU each: the tests beside this one keep their share. */
        usleep(20000);
      }
      /* The main thread's: the worker's own work, without any other
       * thread's (a profiler's). */
      struct timespec ts;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      printf("exit %d cpu_ms %.0f\n", (int)getpid(),
             (double)ts.tv_sec * 1000 + (double)ts.tv_nsec / 1e6);
      fflush(stdout);
      exit(0);
    }
  }
  /* The master idles, as a pre-fork server's does, until its workers are
   * gone and then until SIGTERM or the end of its time. */
  double master_end = wall_now() + seconds;
  int left = w[2] > 0 ? 3 : 2, bad = 0;
  bool passed_on = false;
  while (left > 0) {
    if (server_stop && !passed_on) {
      for (int i = 0; i < 3; i++)
        if (w[i] > 0) kill(w[i], SIGTERM);
      passed_on = true;
    }
    int status;
    pid_t p = waitpid(-1, &status, 0);
    if (p < 0) continue;
    left--;
    bad |= !WIFEXITED(status) && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  while (!server_stop && wall_now() < master_end) usleep(10000);
  return bad;
}

static int mode_prefork(void) {
  say_pid("master");
  master_burn(0.1);
  pid_t w[2];
  for (int i = 0; i < 2; i++) {
    w[i] = fork();
    if (w[i] == 0) {
      printf("worker%d %d\n", i, (int)getpid());
      fflush(stdout);
      if (i == 0)
        alpha_worker_burn(0.5);
      else
        beta_worker_burn(0.5);
      exit(0);
    }
  }
  master_burn(0.2);
  int bad = 0;
  for (int i = 0; i < 2; i++) bad |= reap(w[i]) != 0;
  return bad;
}

static int mode_env(void) {
  say_pid("pid");
  const char *p = getenv("LD_PRELOAD"), *h = getenv("CPROF_HTTP");
  int n = 0;
  for (char **e = environ; *e; e++) n += strncmp(*e, "CPROF_", 6) == 0;
  printf("LD_PRELOAD=%s\nCPROF_HTTP=%s\nCPROF_ variables: %d\n",
         p ? p : "(unset)", h ? h : "(unset)", n);
  kept = malloc(1 << 20);
  return 0;
}

static int mode_spawn(const char *self) {
  say_pid("pid");
  kept = malloc(1 << 20);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, "env", (char *)NULL);
    _exit(127);
  }
  return reap(pid);
}

static int mode_failexec(void) {
  say_pid("pid");
  kept = malloc(1 << 20);
  pid_t a = fork();
  if (a == 0) {
    execl("/nonexistent/cprof-test", "cprof-test", (char *)NULL);
    _exit(127);
  }
  pid_t b = vfork();
  if (b == 0) {
    execl("/nonexistent/cprof-test", "cprof-test", (char *)NULL);
    _exit(127);
  }
  pid_t c = fork();
  if (c == 0) {
    execl("/nonexistent/cprof-test", "cprof-test", (char *)NULL);
    exit(127);
  }
  printf("child %d\nchild %d\nchild %d\n", (int)a, (int)b, (int)c);
  int ra = reap(a), rb = reap(b), rc = reap(c);
  printf("statuses %d %d %d\n", ra, rb, rc);
  fflush(stdout);
  _exit(ra == 127 && rb == 127 && rc == 127 ? 0 : 1);
}

static void exit_now(int sig) {
  (void)sig;
  _exit(0);
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "";
  if (!strcmp(m, "prefork")) return mode_prefork();
  if (!strcmp(m, "server") && argc > 2) return mode_server(atof(argv[2]));
  if (!strcmp(m, "daemon") && argc > 2) {
    if (daemon(1, 1) != 0) return 1;
    return mode_server(atof(argv[2]));
  }
  if (!strcmp(m, "daemon-check") && argc > 4) {
    int rc = daemon(atoi(argv[3]), atoi(argv[4]));
    FILE *f = fopen(argv[2], "w");
    if (!f) return 1;
    char cwd[512], link[512];
    fprintf(f, "daemon %d\ncwd %s\nsession_leader %d\n", rc,
            getcwd(cwd, sizeof cwd) ? cwd : "?", getsid(0) == getpid());
    for (int fd = 0; fd < 3; fd++) {
      char path[64];
      snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
      ssize_t n = readlink(path, link, sizeof link - 1);
      link[n > 0 ? n : 0] = '\0';
      fprintf(f, "fd%d %s\n", fd, link);
    }
    return fclose(f) != 0;
  }
  if (!strcmp(m, "daemon-double") && argc > 2) {
    pid_t p = fork();
    if (p < 0) return 1;
    if (p > 0) exit(0);
    setsid();
    p = fork();
    if (p < 0) return 1;
    if (p > 0) exit(0);
    return mode_server(atof(argv[2]));
  }
  if (!strcmp(m, "daemon-exit") && argc > 2) {
    pid_t p = fork();
    if (p < 0) return 1;
    if (p > 0) exit(0);
    setsid();
    return mode_server(atof(argv[2]));
  }
  if (!strcmp(m, "env")) return mode_env();
  if (!strcmp(m, "spawn")) return mode_spawn(argv[0]);
  if (!strcmp(m, "failexec")) return mode_failexec();
  if (!strcmp(m, "uexit") || !strcmp(m, "uExit")) {
    say_pid("pid");
    kept = malloc(1 << 20);
    if (!strcmp(m, "uexit")) _exit(0);
    _Exit(0);
  }
  if (!strcmp(m, "alarmexit") || !strcmp(m, "termexit")) {
    say_pid("pid");
    kept = malloc(1 << 20);
    int sig = !strcmp(m, "alarmexit") ? SIGALRM : SIGTERM;
    signal(sig, exit_now);
    raise(sig);
    return 3; /* not reached */
  }
  fprintf(stderr,
          "usage: %s prefork|server S|env|spawn|uexit|uExit|failexec|alarmexit|"
          "termexit\n",
          argv[0]);
  return 2;
}
