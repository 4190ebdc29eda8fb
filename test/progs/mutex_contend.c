/*
 * Four threads contend on one mutex at known sites (lock_site takes it,
 * unlock_site releases it after holding it about 1 ms), measuring their
 * own total wait with CLOCK_MONOTONIC; then the mutex and block profiles
 * are written:
 *   mutex_contend OUTDIR
 * writes OUTDIR/{mutex,block}.pb.gz and OUTDIR/{mutex,block}.txt (debug=1)
 * and prints "measured_wait_ns=N" on stdout. The linked build switches the
 * profiles on with the API (fraction 1, rate 1); plain_mutex_contend runs
 * under LD_PRELOAD with CPROF_MUTEX_FRACTION=1 CPROF_BLOCK_RATE=1 and finds
 * the writer with dlsym.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cprof.h"

#define THREADS 4
#define ROUNDS 40

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t waited_ns;
static _Atomic int finished;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static void unlock_site(void) {
  pthread_mutex_unlock(&m); /* SITE:unlock */
}

__attribute__((noinline)) static void lock_site(void) {
  int64_t t0 = now_ns();
  pthread_mutex_lock(&m); /* SITE:lock */
  atomic_fetch_add(&waited_ns, now_ns() - t0);
  int64_t until = now_ns() + 1000000;
  while (now_ns() < until) {
  }
  unlock_site();
}

static void *worker(void *arg) {
  for (int i = 0; i < ROUNDS; i++) lock_site();
  atomic_fetch_add(&finished, 1);
  return arg;
}

typedef int (*write_file_fn)(const char *, int, const char *);
typedef int (*set_int_fn)(int);
typedef int (*set_ll_fn)(long long);

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
#ifdef MUTEX_PLAIN
  write_file_fn write_file =
      (write_file_fn)dlsym(RTLD_DEFAULT, "cprof_profile_write_file");
  set_ll_fn set_block =
      (set_ll_fn)dlsym(RTLD_DEFAULT, "cprof_set_block_profile_rate");
  if (!write_file || !set_block) {
    fprintf(stderr, "mutex_contend: cprof is not loaded\n");
    return 1;
  }
#else
  write_file_fn write_file = cprof_profile_write_file;
  set_ll_fn set_block = cprof_set_block_profile_rate;
  set_int_fn set_fraction = cprof_set_mutex_profile_fraction;
  if (set_fraction(1) != 0 || set_fraction(-1) != 1) {
    fprintf(stderr, "mutex_contend: fraction not applied\n");
    return 1;
  }
  set_block(1);
#endif
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, NULL);
  /* Wait for the workers without recording the wait (nanosleep is not a
   * blocking event), so the block profile holds only the lock waits the
   * workers measured. */
  while (atomic_load(&finished) < THREADS) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  set_block(0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

  char path[4096];
  const char *names[2] = {"mutex", "block"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s.pb.gz", argv[1], names[i]);
    int err = write_file(names[i], 0, path);
    snprintf(path, sizeof path, "%s/%s.txt", argv[1], names[i]);
    if (!err) err = write_file(names[i], 1, path);
    if (err) {
      fprintf(stderr, "mutex_contend: error %d writing %s\n", err, names[i]);
      return 1;
    }
  }
  printf("measured_wait_ns=%lld\n", (long long)atomic_load(&waited_ns));
  return 0;
}
