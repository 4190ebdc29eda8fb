/*
 * A program without cprof, for the address-space tests (test/e2e/vm_*.sh)
 * and bench/vm_features.sh: run with cprof preloaded or not, with whatever
 * CPROF_* features the caller sets. It starts 4 threads of its own that
 * allocate a little and then wait, and answers one command per line of
 * stdin, on stdout:
 *   vmsize       "vmsize KIB threads N" (VmSize and Threads of
 *                /proc/self/status)
 *   big MIB      one malloc of MIB MiB (left untouched), freed at once:
 *                "big MIB ok" or "big MIB failed"
 *   alloc        mallocs 1 MiB blocks until one fails, frees them:
 *                "allocated MIB"
 *   sleep MS     "slept MS"
 * and exits 0 at the end of its input.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int finished;

static void *worker(void *arg) {
  (void)arg;
  /* volatile: the compiler may not drop the pair. */
  void *volatile p;
  for (int i = 0; i < 1000; i++) {
    p = malloc(64 + (size_t)i);
    free(p);
  }
  pthread_mutex_lock(&lock);
  while (!finished) pthread_cond_wait(&done, &lock);
  pthread_mutex_unlock(&lock);
  return NULL;
}

static void status(long *vmsize, long *threads) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  *vmsize = *threads = -1;
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmSize:", 7) == 0) *vmsize = strtol(line + 7, NULL, 10);
    if (strncmp(line, "Threads:", 8) == 0)
      *threads = strtol(line + 8, NULL, 10);
  }
  if (f) fclose(f);
}

#define BLOCK ((size_t)1 << 20)
#define MAX_BLOCKS 65536

static void alloc_all(void) {
  static void *blocks[MAX_BLOCKS];
  size_t n = 0;
  while (n < MAX_BLOCKS && (blocks[n] = malloc(BLOCK)) != NULL) n++;
  printf("allocated %zu\n", n);
  while (n) free(blocks[--n]);
}

int main(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 2;
  char line[128];
  while (fgets(line, sizeof line, stdin)) {
    long v, n;
    if (strncmp(line, "vmsize", 6) == 0) {
      status(&v, &n);
      printf("vmsize %ld threads %ld\n", v, n);
    } else if (sscanf(line, "big %ld", &n) == 1) {
      void *p = malloc((size_t)n << 20);
      printf("big %ld %s\n", n, p ? "ok" : "failed");
      free(p);
    } else if (strncmp(line, "alloc", 5) == 0) {
      alloc_all();
    } else if (sscanf(line, "sleep %ld", &n) == 1) {
      struct timespec ts = {n / 1000, (n % 1000) * 1000000};
      nanosleep(&ts, NULL);
      printf("slept %ld\n", n);
    } else {
      printf("unknown command\n");
    }
    fflush(stdout);
  }
  pthread_mutex_lock(&lock);
  finished = 1;
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  return 0;
}
