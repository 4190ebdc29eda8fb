/*
 * Fifty threads (the main one included) that spin, sleep, wait on a mutex
 * and wait on a condition variable, and two that block every signal (one
 * spins, one sleeps); the goroutine profile is taken while they do so:
 *   threads_dump OUTDIR
 * writes OUTDIR/threads2.txt (debug=2), threads1.txt (debug=1) and
 * threads.pb.gz (debug=0), and prints the collection's figures: threads
 * asked and answered, the whole collection's time, the slowest answer and
 * the longest gap a spinning thread saw while it was being collected.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"
#include "source/thread_sample.h"

#define SPINNERS 3
#define SLEEPERS 14
#define LOCKERS 15
#define CONDERS 15

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static _Atomic int started, stop;
static _Atomic int64_t max_gap_ns;
static _Atomic int measuring;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static void worker_spin(void) {
  int64_t last = now_ns();
  while (!atomic_load(&stop)) {
    int64_t t = now_ns();
    if (atomic_load(&measuring) && t - last > atomic_load(&max_gap_ns))
      atomic_store(&max_gap_ns, t - last);
    last = t;
  }
}

__attribute__((noinline)) static void worker_sleep(void) {
  while (!atomic_load(&stop)) {
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

__attribute__((noinline)) static void worker_lock(void) {
  pthread_mutex_lock(&held);
  pthread_mutex_unlock(&held);
}

__attribute__((noinline)) static void worker_cond(void) {
  pthread_mutex_lock(&cmu);
  while (!atomic_load(&stop)) pthread_cond_wait(&cv, &cmu);
  pthread_mutex_unlock(&cmu);
}

__attribute__((noinline)) static void worker_blocks_signals(void) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  worker_spin();
}

/* Blocks every signal too, but waits in the kernel: read from /proc, it
 * shows its own stack. */
__attribute__((noinline)) static void worker_blocks_quietly(void) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  while (!atomic_load(&stop)) {
    struct timespec ts = {10, 0};
    nanosleep(&ts, NULL);
  }
}

static void *run(void *arg) {
  void (*fn)(void) = (void (*)(void))arg;
  char name[16];
  snprintf(name, sizeof name, "%s",
           fn == worker_spin    ? "spinner"
           : fn == worker_sleep ? "sleeper"
           : fn == worker_lock  ? "locker"
           : fn == worker_cond  ? "conder"
           : fn == worker_blocks_quietly ? "quiet"
                                : "blocker");
  pthread_setname_np(pthread_self(), name);
  atomic_fetch_add(&started, 1);
  fn();
  return NULL;
}

static int write_to(const char *dir, const char *file, int debug) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  int err = cprof_profile_write_file("goroutine", debug, path);
  if (err) fprintf(stderr, "threads_dump: %s: error %d\n", file, err);
  return err;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  pthread_mutex_lock(&held);
  void (*kinds[4])(void) = {worker_spin, worker_sleep, worker_lock,
                            worker_cond};
  int counts[4] = {SPINNERS, SLEEPERS, LOCKERS, CONDERS};
  int total = 1;
  pthread_t t;
  /* A thread that cannot start (ulimit -v leaving no room for its stack)
   * ends the run with a message: waiting for it would hang. */
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < counts[k]; i++, total++)
      if (pthread_create(&t, NULL, run, (void *)kinds[k]) != 0) {
        fprintf(stderr, "threads_dump: thread %d could not start\n", total);
        return 1;
      }
  if (pthread_create(&t, NULL, run, (void *)worker_blocks_signals) != 0 ||
      pthread_create(&t, NULL, run, (void *)worker_blocks_quietly) != 0) {
    fprintf(stderr, "threads_dump: a signal-blocking thread could not start\n");
    return 1;
  }
  total += 2;
  while (atomic_load(&started) < total - 1) usleep(1000);
  usleep(50 * 1000); /* let the lockers and conders block */

  /* The first profile loads the symbolizer; the figures are of the next. */
  if (write_to(argv[1], "warmup.txt", 1) != 0) _exit(1);
  atomic_store(&measuring, 1);
  int err = write_to(argv[1], "threads2.txt", 2);
  atomic_store(&measuring, 0);
  cprof__thread_sample_stats st;
  cprof__thread_sample_last_stats(&st);
  if (!err) err = write_to(argv[1], "threads1.txt", 1);
  if (!err) err = write_to(argv[1], "threads.pb.gz", 0);
  printf("threads=%d answered=%d read=%d perf=%d perf_answered=%d "
         "signalled=%d slept=%d starved_waits=%d interrupted=%lld "
         "total_us=%lld per_thread_us=%.1f "
         "max_answer_us=%.1f max_spinner_gap_us=%.1f\n",
         st.threads, st.answered, st.read, st.perf, st.perf_answered,
         st.signalled, st.slept, st.starved_waits,
         (long long)st.interrupted, (long long)(st.total_ns / 1000),
         st.threads ? st.total_ns / 1e3 / st.threads : 0.0,
         st.max_answer_ns / 1e3, atomic_load(&max_gap_ns) / 1e3);
  fflush(stdout);
  _exit(err ? 1 : 0);
}
