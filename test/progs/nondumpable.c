/*
 * A process that makes itself not dumpable, as daemons holding secrets do
 * (prctl PR_SET_DUMPABLE 0): the kernel then gives its private /proc
 * files (syscall, auxv) to root, and refuses them to the process itself
 * unless it runs as root. Run as root, it first becomes nobody (65534),
 * which a change of user does anyway; it exits 3 if that is refused.
 *   nondumpable
 * starts three threads, two asleep (in nanosleep and in poll, a second at
 * a time, so that the profiles, taken 0.1 s in, find them asleep) and one
 * spinning in spin_here, then writes the goroutine profile (debug=1) and
 * the threadcreate profile (debug=1) to stdout, the second after a line
 * "-- threadcreate", and how many threads /proc/self/task lists then to
 * stderr ("threads N": a sanitizer's runtime may have one of its own).
 * Exit status 0 when both were written.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static _Atomic int stop, started;
static volatile unsigned long sink;

__attribute__((noinline)) static void *sleep_here(void *arg) {
  (void)arg;
  atomic_fetch_add(&started, 1);
  while (!atomic_load(&stop)) {
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

__attribute__((noinline)) static void *poll_here(void *arg) {
  (void)arg;
  atomic_fetch_add(&started, 1);
  while (!atomic_load(&stop)) poll(NULL, 0, 1000);
  return NULL;
}

__attribute__((noinline)) static void *spin_here(void *arg) {
  (void)arg;
  atomic_fetch_add(&started, 1);
  while (!atomic_load(&stop)) sink = sink * 31 + 7;
  return NULL;
}

static int write_profile(const char *name) {
  cprof_sink out = cprof_sink_fd(1);
  int err = cprof_profile_write(name, 1, &out);
  if (err) fprintf(stderr, "nondumpable: %s: %s\n", name, cprof_strerror(err));
  return err;
}

int main(void) {
  if (geteuid() == 0 && (setresgid(65534, 65534, 65534) != 0 ||
                         setresuid(65534, 65534, 65534) != 0)) {
    fprintf(stderr, "nondumpable: cannot become nobody: %s\n", strerror(errno));
    return 3;
  }
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    perror("nondumpable: prctl");
    return 1;
  }
  pthread_t t[3];
  void *(*fns[3])(void *) = {sleep_here, poll_here, spin_here};
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[i], NULL, fns[i], NULL) != 0) return 1;
  while (atomic_load(&started) < 3) usleep(1000);
  usleep(100 * 1000);
  int threads = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') threads++;
  if (d) closedir(d);
  fprintf(stderr, "threads %d\n", threads);
  int err = write_profile("goroutine");
  fflush(stdout);
  printf("-- threadcreate\n");
  fflush(stdout);
  if (!err) err = write_profile("threadcreate");
  atomic_store(&stop, 1);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  return err ? 1 : 0;
}
