/*
 * Threads whose time is split, by the program's own clock, between CPU
 * work, poll, nanosleep and waiting on a mutex, with a wall-clock profile
 * taken meanwhile through cprof_profilez (CPROF_WALL_HZ sets the rate):
 *   wall_mix OUT.pb.gz SECONDS [WORKERS]
 * WORKERS (default 2, at most 8) workers ("w0", "w1"...) loop through the four phases (phase_cpu,
 * phase_poll, phase_sleep, phase_lock), each of a random length around
 * 8, 4, 5 and 3 ms; the main thread holds the mutex the workers time out
 * on. Prints each phase's share of the workers' time during the profile,
 * as "cpu=F poll=F sleep=F lock=F", and the number of calls that
 * returned early ("eintr=N"). Each worker runs with the cprof label
 * worker=wN.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

#define WORKERS_MAX 8
static int workers = 2;
enum { P_CPU, P_POLL, P_SLEEP, P_LOCK, P_N };

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t spent[P_N];
static _Atomic int measuring, stop, eintr;
static _Atomic uint64_t sink; /* keeps the work from being optimised out */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A length around mean_us, uniform in [mean/2, 3 mean/2). */
static int64_t jitter(unsigned *seed, int64_t mean_us) {
  return (mean_us / 2 + (int64_t)(rand_r(seed) % (unsigned)mean_us)) * 1000;
}

__attribute__((noinline)) static void phase_cpu(int64_t ns) {
  int64_t end = now_ns() + ns;
  uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
  while (now_ns() < end)
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ull + 1;
  atomic_store_explicit(&sink, x, memory_order_relaxed);
}

__attribute__((noinline)) static void phase_poll(int64_t ns) {
  if (poll(NULL, 0, (int)(ns / 1000000)) < 0 && errno == EINTR)
    atomic_fetch_add(&eintr, 1);
}

__attribute__((noinline)) static void phase_sleep(int64_t ns) {
  struct timespec ts = {0, (long)ns};
  if (nanosleep(&ts, NULL) < 0 && errno == EINTR) atomic_fetch_add(&eintr, 1);
}

__attribute__((noinline)) static void phase_lock(int64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)ns;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  int r = pthread_mutex_timedlock(&held, &ts);
  if (r == 0) pthread_mutex_unlock(&held);
  if (r == EINTR) atomic_fetch_add(&eintr, 1);
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
  char name[16];
  snprintf(name, sizeof name, "w%u", (unsigned)(uintptr_t)arg);
  pthread_setname_np(pthread_self(), name);
  /* Each worker's samples carry its cprof labels too. */
  const char *kv[] = {"worker", name};
  const cprof_labels *set = NULL;
  if (cprof_labels_new(NULL, kv, 1, &set) == 0) cprof_labels_push(set);
  static void (*const fn[P_N])(int64_t) = {phase_cpu, phase_poll,
                                           phase_sleep, phase_lock};
  static const int64_t mean_us[P_N] = {8000, 4000, 5000, 3000};
  while (!atomic_load(&stop)) {
    for (int p = 0; p < P_N; p++) {
      int64_t t0 = now_ns();
      fn[p](jitter(&seed, mean_us[p]));
      int64_t t1 = now_ns();
      if (atomic_load(&measuring)) atomic_fetch_add(&spent[p], t1 - t0);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s OUT.pb.gz SECONDS [WORKERS]\n", argv[0]);
    return 2;
  }
  if (argc == 4) workers = atoi(argv[3]);
  if (workers < 1 || workers > WORKERS_MAX) workers = 2;
  int err = cprof_enable();
  if (err) {
    fprintf(stderr, "wall_mix: cprof_enable: %s\n", cprof_strerror(err));
    return 1;
  }
  pthread_mutex_lock(&held);
  pthread_t t[WORKERS_MAX];
  for (uintptr_t i = 0; i < (uintptr_t)workers; i++)
    pthread_create(&t[i], NULL, worker, (void *)i);
  usleep(300 * 1000);
  cprof_buf buf = {0};
  atomic_store(&measuring, 1);
  err = cprof_profilez("wall", 0, atoi(argv[2]), &buf);
  atomic_store(&measuring, 0);
  atomic_store(&stop, 1);
  pthread_mutex_unlock(&held);
  for (int i = 0; i < workers; i++) pthread_join(t[i], NULL);
  if (err) {
    fprintf(stderr, "wall_mix: %s\n", cprof_strerror(err));
    return 1;
  }
  FILE *f = fopen(argv[1], "wb");
  if (!f || fwrite(buf.data, 1, buf.len, f) != buf.len || fclose(f) != 0) {
    fprintf(stderr, "wall_mix: cannot write %s\n", argv[1]);
    return 1;
  }
  cprof_buf_free(&buf);
  int64_t total = 0;
  for (int p = 0; p < P_N; p++) total += atomic_load(&spent[p]);
  printf("cpu=%.4f poll=%.4f sleep=%.4f lock=%.4f eintr=%d\n",
         (double)spent[P_CPU] / total, (double)spent[P_POLL] / total,
         (double)spent[P_SLEEP] / total, (double)spent[P_LOCK] / total,
         atomic_load(&eintr));
  return 0;
}
