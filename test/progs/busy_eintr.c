/*
 * Threads that alternate short CPU bursts with short blocking calls, the
 * case where a profiler's signal, sent to a thread it saw running, can
 * land just as the thread enters its wait and cut it short:
 *   busy_eintr SECONDS [kick]
 * starts cprof's HTTP server on a free loopback port and prints the port,
 * then runs four workers for SECONDS: each spins 200 us in busy_burst,
 * then waits in busy_poll (poll, 1 ms timeout), busy_nanosleep (0.5 ms),
 * busy_epoll (epoll_wait, 1 ms) or busy_select (1 ms), and counts the
 * calls that returned EINTR. At the end it prints "calls=N eintr=N", the
 * workers' own CPU split ("burst_cpu=P": the per cent of their CPU time,
 * by their own CPU clocks, spent in busy_burst, and the two times), the
 * share of their wall time spent there ("burst_wall=P", and that time) and
 * the goroutine collector's figures. With "kick", the program itself
 * sends a signal as cprof's timer would (SIGRTMIN+5, SI_TIMER, cprof's
 * value) to a random worker every 2 ms, as a
 * collector that signals every running thread would: the control that
 * shows the count works. With "seccomp", it first puts itself under a
 * seccomp filter that allows everything (cprof then does not try perf
 * events; its timer, found allowed, it does).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"
#include "base/sig.h"
#include "source/thread_sample.h"

#define WORKERS 4
static _Atomic long calls, eintr;
/* The workers' CPU time in busy_burst and in all, and their wall time,
 * in nanoseconds. */
static _Atomic long long burst_cpu_ns, worker_cpu_ns, worker_wall_ns;
static _Atomic int stop;
static int pipe_r, epfd;

static int64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static long long thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins 200 us and returns the CPU time that took. The thread's CPU
 * clock is read inside, so a sample taken while it is read has
 * busy_burst on its stack too. */
__attribute__((noinline)) static long long busy_burst(void) {
  long long cpu = thread_cpu_ns();
  int64_t end = now_us() + 200;
  while (now_us() < end) {
  }
  return thread_cpu_ns() - cpu;
}

__attribute__((noinline)) static int busy_poll(void) {
  struct pollfd p = {pipe_r, POLLIN, 0};
  return poll(&p, 1, 1);
}

__attribute__((noinline)) static int busy_nanosleep(void) {
  struct timespec ts = {0, 500000};
  return nanosleep(&ts, NULL);
}

__attribute__((noinline)) static int busy_epoll(void) {
  struct epoll_event ev;
  return epoll_wait(epfd, &ev, 1, 1);
}

__attribute__((noinline)) static int busy_select(void) {
  fd_set r;
  FD_ZERO(&r);
  FD_SET(pipe_r, &r);
  struct timeval tv = {0, 1000};
  return select(pipe_r + 1, &r, NULL, NULL, &tv);
}

static int (*const waits[WORKERS])(void) = {busy_poll, busy_nanosleep,
                                            busy_epoll, busy_select};

static _Atomic pid_t worker_tids[WORKERS];

/* Sends thread i a signal as cprof's timer would: the thread sampler's
 * signal, SI_TIMER, cprof's value (base/sig.h). Any other signal there
 * would get its default action. */
static void kick_worker(size_t i) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGRTMIN + 5;
  si.si_code = SI_TIMER;
  si.si_value.sival_int = CPROF__SIG_COOKIE;
  pid_t tid = atomic_load(&worker_tids[i]);
  if (tid) syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGRTMIN + 5, &si);
}

static void *worker(void *arg) {
  atomic_store(&worker_tids[(size_t)arg], (pid_t)syscall(SYS_gettid));
  int (*wait)(void) = waits[(size_t)arg];
  long long burst = 0;
  int64_t start = now_us();
  while (!atomic_load(&stop)) {
    burst += busy_burst();
    int r = wait();
    atomic_fetch_add(&calls, 1);
    if (r < 0 && errno == EINTR) atomic_fetch_add(&eintr, 1);
  }
  atomic_fetch_add(&burst_cpu_ns, burst);
  atomic_fetch_add(&worker_cpu_ns, thread_cpu_ns());
  atomic_fetch_add(&worker_wall_ns, (now_us() - start) * 1000);
  return NULL;
}

int main(int argc, char **argv) {
  int secs = argc > 1 ? atoi(argv[1]) : 4;
  int kick = argc > 2 && strcmp(argv[2], "kick") == 0;
  if (argc > 2 && strcmp(argv[2], "seccomp") == 0) {
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {1, &allow};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
      perror("busy_eintr: seccomp");
      return 1;
    }
  }
  int p[2];
  if (pipe(p) != 0) return 1;
  pipe_r = p[0];
  epfd = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, pipe_r, &ev) != 0) return 1;
  cprof_http_config cfg = {.addr = "127.0.0.1:0"};
  cprof_http *srv = NULL;
  int err = cprof_http_start(&cfg, &srv);
  if (err) {
    fprintf(stderr, "busy_eintr: cprof_http_start: %s\n", cprof_strerror(err));
    return 1;
  }
  /* The goroutine profile's handler is installed by its first use. */
  cprof_buf b = {0};
  cprof_sink bs = cprof_sink_buf(&b);
  cprof_profile_write("goroutine", 1, &bs);
  cprof_buf_free(&b);
  pthread_t t[WORKERS];
  for (size_t i = 0; i < WORKERS; i++)
    if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) return 1;
  printf("%d\n", cprof_http_port(srv));
  fflush(stdout);
  int64_t end = now_us() + (int64_t)secs * 1000000;
  unsigned seed = 1;
  while (now_us() < end) {
    if (kick) kick_worker((size_t)rand_r(&seed) % WORKERS);
    usleep(kick ? 2000 : 50000);
  }
  atomic_store(&stop, 1);
  for (size_t i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  /* One more collection, so that the figures count every interrupted
   * call so far. */
  cprof_buf b2 = {0};
  cprof_sink bs2 = cprof_sink_buf(&b2);
  cprof_profile_write("goroutine", 1, &bs2);
  cprof_buf_free(&b2);
  cprof__thread_sample_stats st;
  cprof__thread_sample_last_stats(&st);
  printf("calls=%ld eintr=%ld\n", atomic_load(&calls), atomic_load(&eintr));
  long long bns = atomic_load(&burst_cpu_ns), wns = atomic_load(&worker_cpu_ns);
  long long wall = atomic_load(&worker_wall_ns);
  printf("burst_cpu=%lld burst_ms=%lld worker_cpu_ms=%lld\n",
         wns > 0 ? 100 * bns / wns : 0, bns / 1000000, wns / 1000000);
  printf("burst_wall=%lld worker_wall_ms=%lld\n", wall > 0 ? 100 * bns / wall : 0,
         wall / 1000000);
  printf("stats perf=%lld signalled=%lld interrupted=%lld\n",
         (long long)st.perf_total, (long long)st.signalled_total,
         (long long)st.interrupted);
  fflush(stdout);
  cprof_http_stop(srv);
  return 0;
}
