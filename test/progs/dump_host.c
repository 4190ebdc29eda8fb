/*
 * A host program for the dump tests: it links cprof and does, in one of
 * its modes, what real programs do to their signals, their stderr and
 * their descriptors, so the tests can check that dumps never change what
 * the program would have done without cprof.
 *   dump_host rates            prints the mutex fraction, block rate and
 *                              heap sampling rate, then exits
 *   dump_host ids              prints its real and effective user ids
 *   dump_host pause            prints "ready" and waits in pause(); says so
 *                              on stdout if pause() ever returns
 *   dump_host park             prints "ready" and waits in pause() for ever
 *   dump_host sleep SECONDS    prints "ready", sleeps, exits normally
 *   dump_host read             prints "ready" and reads a pipe nobody
 *                              writes to; says so if the read returns
 *   dump_host chain            installs its own SIGTERM handler (without
 *                              SA_RESTART), then configures a threadcreate
 *                              dump with the API, prints "ready" and reads a
 *                              pipe: the handler must run and the read must
 *                              be interrupted, as without cprof
 *   dump_host reuse-fd2 FILE   closes stderr, opens FILE (which gets fd 2),
 *                              writes "DATA" into it and exits
 *   dump_host close-at-exit    closes stderr in an atexit handler, as
 *                              coreutils do, and exits
 *   dump_host fill-usr1 N      fills its stderr pipe, then raises SIGUSR1 N
 *                              times and prints "raised N"
 *   dump_host own-usr1 N       installs its own SIGUSR1 handler (as nginx
 *                              does, to reopen its logs), prints "ready",
 *                              waits until the handler ran N times (at
 *                              most 20 s), prints "usr1 handled K" and
 *                              exits normally
 *   dump_host storm SECONDS    a thread sends SIGUSR1 to the process for
 *                              SECONDS; then prints "storm over" and waits
 *                              in pause()
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(const char *line) {
  printf("%s\n", line);
  fflush(stdout);
}

static int mode_rates(void) {
  printf("mutex=%d block=%lld heap=%ld\n", cprof_set_mutex_profile_fraction(-1),
         cprof_block_profile_rate(), cprof_heap_set_rate(-1));
  return 0;
}

static int mode_ids(void) {
  printf("uid=%d euid=%d\n", (int)getuid(), (int)geteuid());
  return 0;
}

static int mode_pause(void) {
  say("ready");
  pause();
  say("pause returned");
  return 0;
}

static _Noreturn void mode_park(void) {
  say("ready");
  for (;;) pause();
}

static int mode_sleep(const char *seconds) {
  say("ready");
  double end = now() + atof(seconds);
  while (now() < end) usleep(10000);
  return 0;
}

/* Reads a pipe whose write end is held open and never written to, so only
 * a signal can end the read. */
static int read_forever(void) {
  int p[2];
  if (pipe(p) != 0) return 2;
  char c;
  ssize_t r = read(p[0], &c, 1);
  if (r < 0 && errno == EINTR) return -1;
  return 1;
}

static int mode_read(void) {
  say("ready");
  int rc = read_forever();
  say(rc < 0 ? "read interrupted" : "read returned");
  return 3;
}

static atomic_int got_term;
static void on_term(int sig) {
  (void)sig;
  got_term = 1;
}

static int mode_chain(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  char why[200];
  if (cprof_dump_configure("threadcreate", why, sizeof why) != 0) {
    fprintf(stderr, "dump_host: %s\n", why);
    return 2;
  }
  say("ready");
  int rc = read_forever();
  printf("read %s, handler %s\n", rc < 0 ? "interrupted" : "not interrupted",
         got_term ? "ran" : "did not run");
  fflush(stdout);
  return rc < 0 && got_term ? 0 : 3;
}

static atomic_int usr1_count;
static void on_usr1(int sig) {
  (void)sig;
  usr1_count++;
}

static int mode_own_usr1(const char *count) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  say("ready");
  int want = atoi(count);
  double end = now() + 20;
  while (atomic_load(&usr1_count) < want && now() < end) usleep(10000);
  printf("usr1 handled %d\n", atomic_load(&usr1_count));
  fflush(stdout);
  return 0;
}

static int mode_reuse_fd2(const char *path) {
  close(STDERR_FILENO);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd != STDERR_FILENO) return 2;
  if (write(fd, "DATA\n", 5) != 5) return 2;
  say("reused fd 2");
  return 0;
}

static void close_stderr(void) { close(STDERR_FILENO); }

static int mode_close_at_exit(void) {
  atexit(close_stderr);
  say("ready");
  return 0;
}

static _Noreturn void mode_fill_usr1(const char *count) {
  /* Fill the pipe through a description of our own, so fd 2 stays
   * blocking as the program found it. */
  int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK);
  if (fd < 0) _exit(2);
  static char chunk[4096];
  memset(chunk, 'x', sizeof chunk);
  while (write(fd, chunk, sizeof chunk) > 0) {
  }
  close(fd);
  long n = atol(count);
  for (long i = 0; i < n; i++) raise(SIGUSR1);
  printf("raised %ld\n", n);
  fflush(stdout);
  _exit(0);
}

static double storm_seconds;
static _Atomic long storm_sent;

static void *storm(void *arg) {
  (void)arg;
  double end = now() + storm_seconds;
  while (now() < end) {
    kill(getpid(), SIGUSR1);
    atomic_fetch_add(&storm_sent, 1);
  }
  return NULL;
}

static _Noreturn void mode_storm(const char *seconds) {
  storm_seconds = atof(seconds);
  pthread_t t;
  pthread_create(&t, NULL, storm, NULL);
  pthread_join(t, NULL);
  printf("storm over: %ld signals sent\n", atomic_load(&storm_sent));
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "";
  const char *arg = argc > 2 ? argv[2] : "1";
  if (!strcmp(m, "rates")) return mode_rates();
  if (!strcmp(m, "ids")) return mode_ids();
  if (!strcmp(m, "pause")) return mode_pause();
  if (!strcmp(m, "park")) mode_park();
  if (!strcmp(m, "sleep")) return mode_sleep(arg);
  if (!strcmp(m, "read")) return mode_read();
  if (!strcmp(m, "chain")) return mode_chain();
  if (!strcmp(m, "reuse-fd2") && argc > 2) return mode_reuse_fd2(arg);
  if (!strcmp(m, "close-at-exit")) return mode_close_at_exit();
  if (!strcmp(m, "fill-usr1")) mode_fill_usr1(arg);
  if (!strcmp(m, "storm")) mode_storm(arg);
  if (!strcmp(m, "own-usr1")) return mode_own_usr1(arg);
  fprintf(stderr, "usage: %s MODE [ARG] (see the source)\n", argv[0]);
  return 2;
}
