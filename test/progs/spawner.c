/*
 * Creates threads from two known sites (three from spawn_three, two from
 * spawn_two), then writes a named profile to stdout:
 *   spawner NAME DEBUG
 * Built twice: linked with cprof (spawner), and as plain_spawner without
 * it, for running under LD_PRELOAD; that one finds the writer with dlsym.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cprof.h"

static void *idle(void *arg) { return arg; }

/* Volatile bounds keep the compiler from unrolling the loops, so each
 * function creates its threads from a single call site. */
static volatile int three = 3, two = 2;

__attribute__((noinline)) static void spawn_three(void) {
  pthread_t t[3];
  for (int i = 0; i < three; i++) pthread_create(&t[i], NULL, idle, NULL);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
}

__attribute__((noinline)) static void spawn_two(void) {
  pthread_t t[2];
  for (int i = 0; i < two; i++) pthread_create(&t[i], NULL, idle, NULL);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s NAME DEBUG\n", argv[0]);
    return 2;
  }
  spawn_three();
  spawn_two();

#ifdef SPAWNER_PLAIN
  typedef int (*write_fn)(const char *, int, const cprof_sink *);
  typedef cprof_sink (*sink_fd_fn)(int);
  write_fn write_profile = (write_fn)dlsym(RTLD_DEFAULT, "cprof_profile_write");
  sink_fd_fn sink_fd = (sink_fd_fn)dlsym(RTLD_DEFAULT, "cprof_sink_fd");
  if (!write_profile || !sink_fd) {
    fprintf(stderr, "spawner: cprof is not loaded\n");
    return 1;
  }
#else
  int (*write_profile)(const char *, int, const cprof_sink *) =
      cprof_profile_write;
  cprof_sink (*sink_fd)(int) = cprof_sink_fd;
#endif
  cprof_sink sink = sink_fd(STDOUT_FILENO);
  int err = write_profile(argv[1], atoi(argv[2]), &sink);
  if (err) {
    fprintf(stderr, "spawner: error %d\n", err);
    return 1;
  }
  return 0;
}
