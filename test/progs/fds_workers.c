/*
 * A program that needs its worker threads, for a limit on threads
 * (ulimit -u) with cprof's HTTP endpoint on (CPROF_HTTP, started by the
 * constructor).
 *
 *   fds_workers N
 * Prints "ready" on stdout, waits for a line on stdin, then starts N
 * threads named "app-worker" and prints "started S of N" (and the error
 * of the first that failed); waits for another line (or EOF) and exits 0
 * when all N started.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  while (!done) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20;
  char line[64];
  printf("ready\n");
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin)) return 2;
  pthread_t *t = calloc((size_t)n, sizeof *t);
  int started = 0, err = 0;
  for (int i = 0; i < n; i++) {
    int rc = pthread_create(&t[started], NULL, worker, NULL);
    if (rc != 0) {
      if (!err) err = rc;
      continue;
    }
    pthread_setname_np(t[started], "app-worker");
    started++;
  }
  printf("started %d of %d%s%s\n", started, n, err ? ": " : "",
         err ? strerror(err) : "");
  fflush(stdout);
  (void)!fgets(line, sizeof line, stdin);
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  free(t);
  return started == n ? 0 : 1;
}
