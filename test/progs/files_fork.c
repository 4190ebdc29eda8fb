/*
 * A program that asks for its goroutine profile and then forks, for
 * e2e/files_fifo.sh (which runs a stripped copy of it with a FIFO where
 * its debug file is looked for):
 *   files_fork OUT
 * burns about 0.3 s of CPU in files_burn while a second thread sleeps in
 * nanosleep, writes the goroutine profile (debug=1) to OUT, stops the
 * sleeper (under ThreadSanitizer, a thread cprof starts in the child can
 * reuse the id of a parent's thread the child does not have, which trips
 * its check of thread ids), forks a child that exits at once and waits for
 * it, and returns from main (a dump at exit, when CPROF_DUMP asks for one,
 * follows). It prints how long the
 * profile took ("goroutine_ms N") and the fork ("fork_ms N"), and exits 0
 * when both worked. With OUT "-", only the CPU burn and the exit.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static _Atomic uint64_t sink;
static _Atomic int stop;

static double now_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void files_burn(double seconds) {
  double end = now_s(CLOCK_PROCESS_CPUTIME_ID) + seconds;
  while (now_s(CLOCK_PROCESS_CPUTIME_ID) < end) {
    uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ull + (uint64_t)i;
    atomic_store_explicit(&sink, x, memory_order_relaxed);
  }
}

static void *sleeper(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: files_fork OUT\n");
    return 2;
  }
  int err = cprof_enable();
  if (err) {
    fprintf(stderr, "files_fork: cprof_enable: %s\n", cprof_strerror(err));
    return 1;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, sleeper, NULL) != 0) {
    fprintf(stderr, "files_fork: pthread_create failed\n");
    return 1;
  }
  files_burn(0.3);
  if (strcmp(argv[1], "-") == 0) goto out;
  double t0 = now_s(CLOCK_MONOTONIC);
  cprof_buf buf = {0};
  err = cprof_profilez("goroutine", 1, 0, &buf);
  printf("goroutine_ms %.0f\n", (now_s(CLOCK_MONOTONIC) - t0) * 1e3);
  fflush(stdout);
  if (err) {
    fprintf(stderr, "files_fork: goroutine profile: %s\n", cprof_strerror(err));
    return 1;
  }
  FILE *f = fopen(argv[1], "w");
  if (!f || fwrite(buf.data, 1, buf.len, f) != buf.len || fclose(f) != 0) {
    fprintf(stderr, "files_fork: cannot write %s\n", argv[1]);
    return 1;
  }
  cprof_buf_free(&buf);
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  t0 = now_s(CLOCK_MONOTONIC);
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  printf("fork_ms %.0f\n", (now_s(CLOCK_MONOTONIC) - t0) * 1e3);
  fflush(stdout);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "files_fork: the child did not exit cleanly\n");
    return 1;
  }
  return 0;
out:
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  return 0;
}
