/*
 * The C host for bench/goroutine_http.sh: N threads (the main one not
 * counted) parked the way bench/goref parks its goroutines (sleeping,
 * waiting on a pipe, a mutex and a condition variable), and cprof's HTTP
 * server on a free loopback port, printed as one line on stdout:
 *   goroutine_host N
 * runs until killed.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static int pipe_r;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) static void park_sleep(void) {
  for (;;) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
  }
}

__attribute__((noinline)) static void park_pipe(void) {
  for (;;) {
    struct pollfd p = {pipe_r, POLLIN, 0};
    poll(&p, 1, -1);
  }
}

__attribute__((noinline)) static void park_mutex(void) {
  pthread_mutex_lock(&held);
}

__attribute__((noinline)) static void park_cond(void) {
  pthread_mutex_lock(&cmu);
  for (;;) pthread_cond_wait(&cv, &cmu);
}

static void *run(void *arg) {
  switch ((size_t)arg % 4) {
    case 0: park_sleep(); break;
    case 1: park_pipe(); break;
    case 2: park_mutex(); break;
    default: park_cond(); break;
  }
  return NULL;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? (size_t)atoi(argv[1]) : 10;
  int p[2];
  if (pipe(p) != 0) return 1;
  pipe_r = p[0];
  pthread_mutex_lock(&held);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (size_t i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, run, (void *)i) != 0) return 1;
  }
  cprof_http_config cfg = {.addr = "127.0.0.1:0"};
  cprof_http *srv = NULL;
  int err = cprof_http_start(&cfg, &srv);
  if (err) {
    fprintf(stderr, "goroutine_host: %s\n", cprof_strerror(err));
    return 1;
  }
  printf("%d\n", cprof_http_port(srv));
  fflush(stdout);
  for (;;) pause();
}
