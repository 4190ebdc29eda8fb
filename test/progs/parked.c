/*
 * Threads parked in every kind of blocking call that a signal cuts short
 * whatever SA_RESTART says (signal(7)), and in a few that it does not,
 * each counting the times its call returned early (EINTR, or sleep()
 * returning with time left):
 *   parked
 * starts cprof's HTTP server on a free loopback port and prints the port,
 * then waits in read() on stdin (counted too). When a line (or EOF)
 * arrives, it prints one line per call, "NAME eintr=N", then the
 * goroutine collector's figures; then it sends cprof's signal to the
 * thread in pause() itself, to show what a signal does (pause returns
 * EINTR) and that the handler counts it ("kicked pause eintr=1
 * interrupted=1"), and exits 0. Each call is made from its
 * own function, park_NAME, which the goroutine profile must show.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"
#include "base/sig.h"
#include "source/thread_sample.h"

enum {
  K_PAUSE, K_SLEEP, K_NANOSLEEP, K_CLOCK_NANOSLEEP, K_USLEEP, K_POLL,
  K_SELECT, K_EPOLL_WAIT, K_RECV_TIMEOUT, K_SEM_TIMEDWAIT, K_SIGSUSPEND,
  K_SIGWAITINFO, K_MSGRCV, K_READ, K_ACCEPT, K_COND_WAIT, K_MAIN_READ, K_N
};
static const char *const names[K_N] = {
    "pause", "sleep", "nanosleep", "clock_nanosleep", "usleep", "poll",
    "select", "epoll_wait", "recv_timeout", "sem_timedwait", "sigsuspend",
    "sigwaitinfo", "msgrcv", "read", "accept", "cond_wait", "main_read"};
static _Atomic int eintr[K_N];
static _Atomic int started;
static pthread_t threads[K_N];

static int pipe_r; /* a pipe nobody writes to */
static int listen_fd, rcv_fd, epfd, msq;
static sem_t sem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void early(int k) { atomic_fetch_add(&eintr[k], 1); }

#define PARK(name) __attribute__((noinline)) static void park_##name(void)

static _Atomic pid_t pause_tid;

PARK(pause) {
  atomic_store(&pause_tid, (pid_t)syscall(SYS_gettid));
  for (;;)
    if (pause() < 0 && errno == EINTR) early(K_PAUSE);
}
PARK(sleep) {
  for (;;)
    if (sleep(100000) != 0) early(K_SLEEP);
}
PARK(nanosleep) {
  for (;;) {
    struct timespec ts = {100000, 0};
    if (nanosleep(&ts, NULL) < 0 && errno == EINTR) early(K_NANOSLEEP);
  }
}
PARK(clock_nanosleep) {
  for (;;) {
    struct timespec ts = {100000, 0};
    if (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == EINTR)
      early(K_CLOCK_NANOSLEEP);
  }
}
PARK(usleep) {
  for (;;)
    if (usleep(4000000000u) < 0 && errno == EINTR) early(K_USLEEP);
}
PARK(poll) {
  for (;;) {
    struct pollfd p = {pipe_r, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno == EINTR) early(K_POLL);
  }
}
PARK(select) {
  for (;;) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(pipe_r, &r);
    if (select(pipe_r + 1, &r, NULL, NULL, NULL) < 0 && errno == EINTR)
      early(K_SELECT);
  }
}
PARK(epoll_wait) {
  for (;;) {
    struct epoll_event ev;
    if (epoll_wait(epfd, &ev, 1, -1) < 0 && errno == EINTR)
      early(K_EPOLL_WAIT);
  }
}
PARK(recv_timeout) {
  for (;;) {
    char c;
    if (recv(rcv_fd, &c, 1, 0) < 0 && errno == EINTR) early(K_RECV_TIMEOUT);
  }
}
PARK(sem_timedwait) {
  for (;;) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 100000;
    if (sem_timedwait(&sem, &ts) < 0 && errno == EINTR)
      early(K_SEM_TIMEDWAIT);
  }
}
PARK(sigsuspend) {
  sigset_t none;
  sigemptyset(&none); /* every signal may wake it */
  for (;;)
    if (sigsuspend(&none) < 0 && errno == EINTR) early(K_SIGSUSPEND);
}
PARK(sigwaitinfo) {
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, NULL);
  for (;;)
    if (sigwaitinfo(&usr2, NULL) < 0 && errno == EINTR) early(K_SIGWAITINFO);
}
PARK(msgrcv) {
  struct {
    long type;
    char text[8];
  } m;
  for (;;) {
    if (msgrcv(msq, &m, sizeof m.text, 0, 0) < 0) {
      if (errno == EINTR) early(K_MSGRCV);
      if (errno == EIDRM || errno == EINVAL) return; /* removed at exit */
    }
  }
}
PARK(read) {
  for (;;) {
    char c;
    if (read(pipe_r, &c, 1) < 0 && errno == EINTR) early(K_READ);
  }
}
PARK(accept) {
  for (;;)
    if (accept(listen_fd, NULL, NULL) < 0 && errno == EINTR) early(K_ACCEPT);
}
PARK(cond_wait) {
  pthread_mutex_lock(&mu);
  for (;;) pthread_cond_wait(&cv, &mu); /* never signalled */
}

static void (*const parks[])(void) = {
    park_pause,         park_sleep,       park_nanosleep,
    park_clock_nanosleep, park_usleep,    park_poll,
    park_select,        park_epoll_wait,  park_recv_timeout,
    park_sem_timedwait, park_sigsuspend,  park_sigwaitinfo,
    park_msgrcv,        park_read,        park_accept,
    park_cond_wait};

static void *run(void *arg) {
  size_t k = (size_t)arg;
  char name[16];
  snprintf(name, sizeof name, "p-%.13s", names[k]);
  pthread_setname_np(pthread_self(), name);
  atomic_fetch_add(&started, 1);
  parks[k]();
  return NULL;
}

int main(void) {
  int p[2], sv[2];
  if (pipe(p) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  pipe_r = p[0];
  struct timeval tv = {100000, 0};
  setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  rcv_fd = sv[0];
  listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(listen_fd, 4) != 0)
    return 1;
  epfd = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(epfd, EPOLL_CTL_ADD, pipe_r, &ev);
  msq = msgget(IPC_PRIVATE, 0600);
  sem_init(&sem, 0, 0);
  if (epfd < 0 || msq < 0) return 1;

  size_t n = sizeof parks / sizeof parks[0];
  /* Detached: they are never joined (ThreadSanitizer would report a
   * leak at exit). */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (size_t k = 0; k < n; k++)
    if (pthread_create(&threads[k], &attr, run, (void *)k) != 0) return 1;
  while ((size_t)atomic_load(&started) < n) usleep(1000);
  usleep(100 * 1000); /* let every thread reach its call */

  cprof_http_config cfg = {.addr = "127.0.0.1:0"};
  cprof_http *srv = NULL;
  int err = cprof_http_start(&cfg, &srv);
  if (err) {
    fprintf(stderr, "parked: cprof_http_start: %s\n", cprof_strerror(err));
    return 1;
  }
  printf("%d\n", cprof_http_port(srv));
  fflush(stdout);

  char buf[64];
  ssize_t r;
  while ((r = read(0, buf, sizeof buf)) < 0)
    if (errno == EINTR) early(K_MAIN_READ);
  for (int k = 0; k < K_N; k++)
    printf("%s eintr=%d\n", names[k], atomic_load(&eintr[k]));
  cprof__thread_sample_stats st;
  cprof__thread_sample_last_stats(&st);
  printf("stats threads=%d read=%d signalled=%d interrupted=%lld\n",
         st.threads, st.read, st.signalled, (long long)st.interrupted);
  /* What cprof avoids, done on purpose: a signal as cprof's timer would
   * send it (its signal, SI_TIMER, cprof's value: base/sig.h; any other
   * gets the default action) to the thread in pause(), which returns
   * EINTR, and which the handler counts. */
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGRTMIN + 5;
  si.si_code = SI_TIMER;
  si.si_value.sival_int = CPROF__SIG_COOKIE;
  syscall(SYS_rt_tgsigqueueinfo, getpid(), atomic_load(&pause_tid), SIGRTMIN + 5, &si);
  for (int i = 0; i < 200 && atomic_load(&eintr[K_PAUSE]) == 0; i++)
    usleep(5000);
  cprof_buf b = {0};
  cprof_sink bs = cprof_sink_buf(&b);
  cprof_profile_write("goroutine", 1, &bs);
  cprof_buf_free(&b);
  cprof__thread_sample_last_stats(&st);
  printf("kicked pause eintr=%d interrupted=%lld\n",
         atomic_load(&eintr[K_PAUSE]), (long long)st.interrupted);
  fflush(stdout);
  msgctl(msq, IPC_RMID, NULL);
  _exit(0);
}
