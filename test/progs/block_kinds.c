/*
 * Blocking of every kind the block profile covers, each in its own
 * function: a condition-variable consumer (consumer_wait) fed slowly by a
 * producer, a semaphore waiter (sem_waiter), barrier waiters
 * (barrier_waiter), a join of a slow thread (join_waiter) and rwlock
 * writers (rwlock_writer). Then the block profile is written:
 *   block_kinds OUT.pb.gz OUT.txt
 * The linked build sets the block rate with the API; plain_block_kinds
 * runs preloaded with CPROF_BLOCK_RATE=1.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <time.h>

#include "cprof.h"

#define ITEMS 20

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static int queued, consumed;
static sem_t sem;
static pthread_barrier_t barrier;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

__attribute__((noinline)) static void consumer_wait(void) {
  pthread_mutex_lock(&qlock);
  while (queued == 0) pthread_cond_wait(&qcond, &qlock);
  queued--;
  consumed++;
  pthread_mutex_unlock(&qlock);
}

static void *consumer(void *arg) {
  for (int i = 0; i < ITEMS; i++) consumer_wait();
  return arg;
}

__attribute__((noinline)) static void producer_put(void) {
  pthread_mutex_lock(&qlock);
  queued++;
  pthread_cond_signal(&qcond);
  pthread_mutex_unlock(&qlock);
}

static void *producer(void *arg) {
  for (int i = 0; i < ITEMS; i++) {
    sleep_ms(5);
    producer_put();
  }
  return arg;
}

__attribute__((noinline)) static void sem_waiter(void) { sem_wait(&sem); }

static void *sem_thread(void *arg) {
  for (int i = 0; i < 5; i++) sem_waiter();
  return arg;
}

__attribute__((noinline)) static void barrier_waiter(void) {
  pthread_barrier_wait(&barrier);
}

static void *barrier_thread(void *arg) {
  barrier_waiter();
  return arg;
}

static void *slow_thread(void *arg) {
  sleep_ms(120);
  return arg;
}

__attribute__((noinline)) static void join_waiter(pthread_t t) {
  pthread_join(t, NULL);
}

__attribute__((noinline)) static void rwlock_writer(void) {
  pthread_rwlock_wrlock(&rw);
  pthread_rwlock_unlock(&rw);
}

static void *rw_thread(void *arg) {
  rwlock_writer();
  return arg;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OUT.pb.gz OUT.txt\n", argv[0]);
    return 2;
  }
#ifdef BLOCK_PLAIN
  typedef int (*write_file_fn)(const char *, int, const char *);
  write_file_fn write_file =
      (write_file_fn)dlsym(RTLD_DEFAULT, "cprof_profile_write_file");
  if (!write_file) {
    fprintf(stderr, "block_kinds: cprof is not loaded\n");
    return 1;
  }
#else
  int (*write_file)(const char *, int, const char *) =
      cprof_profile_write_file;
  cprof_set_block_profile_rate(1);
#endif
  sem_init(&sem, 0, 0);
  pthread_barrier_init(&barrier, NULL, 2);
  pthread_t c, p, s, b, slow, w;
  pthread_create(&c, NULL, consumer, NULL);
  pthread_create(&p, NULL, producer, NULL);
  pthread_create(&s, NULL, sem_thread, NULL);
  pthread_create(&b, NULL, barrier_thread, NULL);
  pthread_create(&slow, NULL, slow_thread, NULL);
  pthread_rwlock_rdlock(&rw);
  pthread_create(&w, NULL, rw_thread, NULL);
  for (int i = 0; i < 5; i++) {
    sleep_ms(4);
    sem_post(&sem);
  }
  sleep_ms(20);
  pthread_rwlock_unlock(&rw);
  pthread_barrier_wait(&barrier);
  join_waiter(slow);
  pthread_join(c, NULL);
  pthread_join(p, NULL);
  pthread_join(s, NULL);
  pthread_join(b, NULL);
  pthread_join(w, NULL);
  if (consumed != ITEMS) {
    fprintf(stderr, "block_kinds: consumed %d of %d\n", consumed, ITEMS);
    return 1;
  }
  int err = write_file("block", 0, argv[1]);
  if (!err) err = write_file("block", 1, argv[2]);
  if (err) {
    fprintf(stderr, "block_kinds: error %d\n", err);
    return 1;
  }
  return 0;
}
