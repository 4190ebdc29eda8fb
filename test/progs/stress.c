/*
 * The stress program: everything cprof does, at once, for a while.
 *   stress SECONDS THREADS PORTFILE
 * Turns on every profile (CPU at 1000 Hz, heap sampling at 4 KiB, mutex
 * fraction 1, block rate 1 us), serves /debug/pprof/ on a free loopback
 * port (written to PORTFILE) and dumps on SIGUSR1 (CPROF_DUMP_OUT from the
 * environment). THREADS workers churn malloc/free, contend on a mutex,
 * signal a condition variable and create and join short-lived threads.
 * The test script polls every profile over HTTP and sends SIGUSR1 while it
 * runs. Prints the operation counts at the end; exits 0 unless cprof
 * refused something.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

static double seconds;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t shared_cond = PTHREAD_COND_INITIALIZER;
static uint64_t shared_counter;
static _Atomic uint64_t allocations, lock_ops, threads_made;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *short_lived(void *arg) {
  char *p = malloc(64 + (size_t)(uintptr_t)arg % 4096);
  if (p) memset(p, 1, 64);
  free(p);
  return NULL;
}

__attribute__((noinline)) static void churn(unsigned *seed) {
  void *keep[32] = {0};
  for (int i = 0; i < 256; i++) {
    *seed = *seed * 1103515245u + 12345u;
    size_t n = 1 + (*seed >> 8) % 8192;
    int slot = (int)((*seed >> 20) % 32);
    free(keep[slot]);
    keep[slot] = malloc(n);
    if (keep[slot]) memset(keep[slot], (int)n, n < 64 ? n : 64);
  }
  for (int i = 0; i < 32; i++) free(keep[i]);
  atomic_fetch_add(&allocations, 256);
}

__attribute__((noinline)) static void contend(void) {
  for (int i = 0; i < 64; i++) {
    pthread_mutex_lock(&shared_lock);
    shared_counter++;
    if (shared_counter % 16 == 0) pthread_cond_broadcast(&shared_cond);
    pthread_mutex_unlock(&shared_lock);
  }
  atomic_fetch_add(&lock_ops, 64);
}

__attribute__((noinline)) static void wait_a_little(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 200000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&shared_lock);
  pthread_cond_timedwait(&shared_cond, &shared_lock, &ts);
  pthread_mutex_unlock(&shared_lock);
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  double end = now() + seconds;
  for (unsigned round = 0; now() < end; round++) {
    churn(&seed);
    contend();
    if (round % 8 == 0) wait_a_little();
    if (round % 16 == 0) {
      pthread_t t;
      if (pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)seed) == 0) {
        pthread_join(t, NULL);
        atomic_fetch_add(&threads_made, 1);
      }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s SECONDS THREADS PORTFILE\n", argv[0]);
    return 2;
  }
  seconds = atof(argv[1]);
  int nthreads = atoi(argv[2]);
  if (nthreads < 1 || nthreads > 256) nthreads = 8;

  int err = cprof_cpu_start(1000);
  if (err) {
    fprintf(stderr, "stress: cpu: %s\n", cprof_strerror(err));
    return 1;
  }
  cprof_heap_set_rate(4096);
  cprof_set_mutex_profile_fraction(1);
  cprof_set_block_profile_rate(1000);
  char why[200];
  err = cprof_dump_configure("cpu,heap,goroutine=debug=1,mutex", why, sizeof why);
  if (err) {
    fprintf(stderr, "stress: dump: %s\n", why);
    return 1;
  }
  cprof_http_config cfg = {0};
  cfg.addr = "127.0.0.1:0";
  cprof_http *http;
  err = cprof_http_start(&cfg, &http);
  if (err) return 1;
  FILE *f = fopen(argv[3], "w");
  if (!f) return 1;
  fprintf(f, "%d\n", cprof_http_port(http));
  fclose(f);

  pthread_t *t = calloc((size_t)nthreads, sizeof *t);
  for (int i = 0; i < nthreads; i++)
    pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  free(t);

  cprof_buf buf = {0};
  cprof_sink sink = cprof_sink_buf(&buf);
  err = cprof_cpu_stop(&sink);
  cprof_http_stop(http);
  printf("stress: %d threads for %.1f s: %llu allocations, %llu lock "
         "operations, %llu threads created and joined; final CPU profile "
         "%zu bytes\n",
         nthreads, seconds, (unsigned long long)allocations,
         (unsigned long long)lock_ops, (unsigned long long)threads_made,
         buf.len);
  cprof_buf_free(&buf);
  return err ? 1 : 0;
}
