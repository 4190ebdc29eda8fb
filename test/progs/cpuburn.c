/*
 * The CPU profiler's test program. Modes:
 *   cpuburn profile HZ     burn on two named threads (alpha 2/3 of the work in
 *                          burn_alpha, beta in burn_beta) while profiling,
 *                          check errno survives the samples, and write the
 *                          profile to stdout
 *   cpuburn busy           a second cprof_cpu_start must fail with EBUSY
 *   cpuburn ownsig         the program owns SIGPROF: start must refuse
 *   cpuburn fork           fork while profiling; the child profiles on its
 *                          own, the parent's profile still completes
 *   cpuburn steal          the program installs its own SIGPROF handler and
 *                          ITIMER_PROF while cprof profiles at 1000 Hz: its
 *                          handler must then get only its own signals
 *                          (prints "own N, cprof's M")
 *   cpuburn threads HZ     20 short-lived threads created while profiling
 *                          all get sampled (profile to stdout)
 * Exit status 0 on success; messages on stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static __thread volatile uint64_t sink; /* per thread: no race */
static _Atomic int errno_broken;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void burn_alpha(uint64_t n) {
  uint64_t x = sink;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
  sink = x;
}

__attribute__((noinline)) static void burn_beta(uint64_t n) {
  uint64_t x = sink;
  for (uint64_t i = 0; i < n; i++) x = x * 2862933555777941757ull + i;
  sink = x;
}

/* Burns for cpu_seconds of this thread's CPU time, 2:1 alpha:beta, and
 * checks that errno is never changed under it by a signal handler. */
static void burn(double cpu_seconds) {
  double end = cpu_now() + cpu_seconds;
  unsigned r = (unsigned)(uintptr_t)&end;
  while (cpu_now() < end) {
    /* Irregular lengths, 2:1 on average, so the loop's period cannot fall
     * in step with the kernel tick that delivers CPU timer signals. */
    r = r * 1103515245u + 12345u;
    uint64_t n = 100000 + (r >> 8) % 100000;
    errno = 4242;
    burn_alpha(2 * n);
    burn_beta(n);
    if (errno != 4242) errno_broken = 1;
  }
}

static void *alpha_thread(void *arg) {
  pthread_setname_np(pthread_self(), "alpha");
  burn(*(double *)arg);
  return NULL;
}

static void *short_thread(void *arg) {
  (void)arg;
  burn(0.02);
  return NULL;
}

static int write_stop(void) {
  cprof_sink out = cprof_sink_fd(STDOUT_FILENO);
  int err = cprof_cpu_stop(&out);
  if (err) fprintf(stderr, "cprof_cpu_stop: %s\n", cprof_strerror(err));
  return err ? 1 : 0;
}

static int mode_profile(int hz) {
  int err = cprof_cpu_start(hz);
  if (err) {
    fprintf(stderr, "cprof_cpu_start: %s\n", cprof_strerror(err));
    return 1;
  }
  double secs = 0.6;
  pthread_t t;
  pthread_create(&t, NULL, alpha_thread, &secs);
  pthread_setname_np(pthread_self(), "main-burner");
  burn(secs);
  pthread_join(t, NULL);
  if (errno_broken) {
    fprintf(stderr, "errno changed by the profiler\n");
    return 1;
  }
  return write_stop();
}

static int mode_busy(void) {
  int err = cprof_cpu_start(100);
  if (err) return 1;
  err = cprof_cpu_start(100);
  fprintf(stderr, "second start: %s\n", cprof_strerror(err));
  cprof_cpu_stop(NULL);
  int stop_again = cprof_cpu_stop(NULL);
  int negative = cprof_cpu_start(-5), huge = cprof_cpu_start(20000);
  return err == CPROF_EBUSY && stop_again == CPROF_EINVAL &&
                 negative == CPROF_EINVAL && huge == CPROF_EINVAL
             ? 0
             : 1;
}

static atomic_int app_sigprofs;
static void app_handler(int sig) {
  (void)sig;
  app_sigprofs++;
}

/* The program owns SIGPROF before cprof starts: cprof profiles on
 * another signal, and the program's handler stays, receiving nothing of
 * cprof's. Profile on stdout; counts on stderr. */
static int mode_ownsig(void) {
  signal(SIGPROF, app_handler);
  int err = cprof_cpu_start(1000);
  if (err) {
    fprintf(stderr, "cprof_cpu_start: %s\n", cprof_strerror(err));
    return 1;
  }
  double t0 = cpu_now();
  burn(0.3);
  double used = cpu_now() - t0;
  int stop = write_stop();
  struct sigaction cur;
  sigaction(SIGPROF, NULL, &cur);
  fprintf(stderr, "handler %s, its SIGPROFs %d, cpu %.3f\n",
          cur.sa_handler == app_handler ? "kept" : "replaced",
          atomic_load(&app_sigprofs), used);
  return stop == 0 && cur.sa_handler == app_handler &&
                 atomic_load(&app_sigprofs) == 0
             ? 0
             : 1;
}

static _Atomic int own_signals, cprof_signals;

static void counting_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  if (si->si_code == SI_TIMER)
    atomic_fetch_add(&cprof_signals, 1);
  else
    atomic_fetch_add(&own_signals, 1);
}

/* cprof profiles at 1000 Hz; the program then installs its own SIGPROF
 * handler and ITIMER_PROF at 100 Hz: its handler gets only its own
 * signals, and cprof's profile goes on (on another signal). Profile on
 * stdout; "own N, cprof's M, cpu S" on stderr. */
static int mode_steal(void) {
  if (cprof_cpu_start(1000)) return 1;
  double t0 = cpu_now();
  burn(0.2);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = counting_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &it, NULL);
  burn(0.5);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  double used = cpu_now() - t0;
  int stop = write_stop();
  fprintf(stderr, "own %d, cprof's %d, cpu %.3f\n", atomic_load(&own_signals),
          atomic_load(&cprof_signals), used);
  return stop;
}

/* SIGPROF's handler as the kernel has it (the program's own sigaction
 * would show the program's view, not cprof's). */
static void *kernel_sigprof_handler(void) {
  struct {
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
  } ksa;
  if (syscall(SYS_rt_sigaction, SIGPROF, NULL, &ksa, 8) != 0) return NULL;
  return ksa.handler;
}

static int mode_fork(void) {
  /* What the program had before profiling: the default, or what this
   * process inherited (an ignored SIGPROF, which cprof leaves alone). */
  void *before = kernel_sigprof_handler();
  if (cprof_cpu_start(1000)) return 1;
  burn(0.1);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child starts unprofiled, its parent's signal given back. */
    if (kernel_sigprof_handler() != before) _exit(4);
    /* It may profile on its own. */
    int err = cprof_cpu_start(1000);
    burn(0.1);
    cprof_buf buf = {0};
    cprof_sink s = cprof_sink_buf(&buf);
    int stop = cprof_cpu_stop(&s);
    int ok = err == 0 && stop == 0 && buf.len > 0;
    cprof_buf_free(&buf);
    _exit(ok ? 0 : 3);
  }
  burn(0.1);
  int status;
  waitpid(pid, &status, 0);
  cprof_buf buf = {0};
  cprof_sink s = cprof_sink_buf(&buf);
  int stop = cprof_cpu_stop(&s);
  cprof_buf_free(&buf);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "child failed: status %d\n", status);
    return 1;
  }
  return stop == 0 ? 0 : 1;
}

static int mode_threads(int hz) {
  if (cprof_cpu_start(hz)) return 1;
  pthread_t t[20];
  for (int i = 0; i < 20; i++) pthread_create(&t[i], NULL, short_thread, NULL);
  for (int i = 0; i < 20; i++) pthread_join(t[i], NULL);
  return write_stop();
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s profile|busy|ownsig|steal|fork|threads [HZ]\n",
            argv[0]);
    return 2;
  }
  int hz = argc > 2 ? atoi(argv[2]) : 100;
  if (strcmp(argv[1], "profile") == 0) return mode_profile(hz);
  if (strcmp(argv[1], "busy") == 0) return mode_busy();
  if (strcmp(argv[1], "ownsig") == 0) return mode_ownsig();
  if (strcmp(argv[1], "fork") == 0) return mode_fork();
  if (strcmp(argv[1], "threads") == 0) return mode_threads(hz);
  if (strcmp(argv[1], "steal") == 0) return mode_steal();
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
