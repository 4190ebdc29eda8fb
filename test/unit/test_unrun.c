/*
 * A thread created but not yet given a CPU is left out of a goroutine
 * profile even once it is older than the 20 ms settle time (docs/
 * goroutine.md): it has not reached the trampoline that would say whether
 * it is one of cprof's. Such a thread is made by pinning it to CPU 0 while
 * a SCHED_FIFO thread spins there; the profile is taken from CPU 1. Once
 * the spinner stops, the thread runs, blocks in unrun_target, and is in
 * the next profile. Needs two CPUs and SCHED_FIFO (root or CAP_SYS_NICE);
 * skipped under the sanitizers, whose pthread_create waits for the new
 * thread to start.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "capture/taskread.h"
#include "cprof.h"
#include "source/thread_sample.h"
#include "testutil.h"

static atomic_int spinning, stop_spin, spin_ms = 400;
static int pipefd[2];

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *spinner(void *arg) {
  (void)arg;
  struct sched_param sp = {.sched_priority = 10};
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
    atomic_store(&spinning, -1);
    return NULL;
  }
  atomic_store(&spinning, 1);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do { /* at most spin_ms, whatever happens to the test */
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while (!atomic_load(&stop_spin) &&
           (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 <
               atomic_load(&spin_ms));
  return NULL;
}

__attribute__((noinline)) static void *unrun_target(void *arg) {
  (void)arg;
  char c;
  while (read(pipefd[0], &c, 1) < 0) {
  }
  return NULL;
}

/* The tids of this process, into v (at most cap); their number. */
static size_t list_tids(pid_t *v, size_t cap) {
  DIR *d = opendir("/proc/self/task");
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < cap)
    if (e->d_name[0] != '.') v[n++] = (pid_t)atoi(e->d_name);
  if (d) closedir(d);
  return n;
}

static char *goroutine_text(void) {
  cprof_buf buf = {0};
  cprof_sink s = cprof_sink_buf(&buf);
  CHECK_EQ_INT(cprof_profile_write("goroutine", 1, &s), 0);
  char *text = calloc(1, buf.len + 1);
  if (text && buf.data) memcpy(text, buf.data, buf.len);
  cprof_buf_free(&buf);
  return text;
}

/* Moves the calling thread to CPU 1 and makes *on0 the attributes of a
 * thread pinned to CPU 0; false (the test skipped) without two CPUs. */
static bool split_cpus(pthread_attr_t *on0) {
  cpu_set_t one, zero;
  CPU_ZERO(&one);
  CPU_SET(1, &one);
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2 ||
      pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) {
    printf("  skip: needs two CPUs\n");
    return false;
  }
  CPU_ZERO(&zero);
  CPU_SET(0, &zero);
  pthread_attr_init(on0);
  pthread_attr_setaffinity_np(on0, sizeof zero, &zero);
  return true;
}

static void test_unrun_thread(void) {
  pthread_attr_t on0;
  if (!split_cpus(&on0)) return;
  CHECK_EQ_INT(cprof_enable(), 0);
  CHECK_EQ_INT(pipe(pipefd), 0);
  pthread_t spin, target;
  CHECK_EQ_INT(pthread_create(&spin, &on0, spinner, NULL), 0);
  while (atomic_load(&spinning) == 0) sleep_ms(1);
  if (atomic_load(&spinning) < 0) {
    printf("  skip: SCHED_FIFO is not allowed here\n");
    pthread_join(spin, NULL);
    return;
  }
  pid_t before[64], after[64], tid = 0;
  size_t nb = list_tids(before, 64);
  CHECK_EQ_INT(pthread_create(&target, &on0, unrun_target, NULL), 0);
  size_t na = list_tids(after, 64);
  for (size_t i = 0; i < na && !tid; i++) {
    bool old = false;
    for (size_t j = 0; j < nb; j++) old |= after[i] == before[j];
    if (!old) tid = after[i];
  }
  sleep_ms(60); /* past the settle time */
  CHECK(tid != 0);
  int ran = cprof__task_has_run(AT_FDCWD, tid);
  char *text = goroutine_text();
  atomic_store(&stop_spin, 1);
  pthread_join(spin, NULL);
  if (ran != 0) {
    printf("  skip: the new thread ran (%d) before the profile\n", ran);
  } else {
    CHECK(text && strstr(text, "goroutine profile: total 2\n"));
    CHECK(text && !strstr(text, "did_not_answer"));
    if (text && !strstr(text, "goroutine profile: total 2\n"))
      fprintf(stderr, "%s", text);
  }
  free(text);
  /* Now it runs and waits in unrun_target. */
  sleep_ms(50);
  CHECK_EQ_INT(cprof__task_has_run(AT_FDCWD, tid), 1);
  text = goroutine_text();
  CHECK(text && strstr(text, "unrun_target"));
  free(text);
  CHECK_EQ_INT(write(pipefd[1], "x", 1), 1);
  pthread_join(target, NULL);
  pthread_attr_destroy(&on0);
}

static atomic_int starved_stop, starved_started;

__attribute__((noinline)) static void *starved_spin(void *arg) {
  (void)arg;
  atomic_store(&starved_started, 1);
  while (!atomic_load(&starved_stop)) {
  }
  return NULL;
}

static void test_starved_thread(void) {
  pthread_attr_t on0;
  if (!split_cpus(&on0)) return;
  CHECK_EQ_INT(cprof_enable(), 0);
  pthread_t spin, target;
  CHECK_EQ_INT(pthread_create(&target, &on0, starved_spin, NULL), 0);
  while (!atomic_load(&starved_started)) sleep_ms(1);
  sleep_ms(30); /* past the settle time */
  atomic_store(&stop_spin, 0);
  atomic_store(&spinning, 0);
  atomic_store(&spin_ms, 200);
  CHECK_EQ_INT(pthread_create(&spin, &on0, spinner, NULL), 0);
  while (atomic_load(&spinning) == 0) sleep_ms(1);
  if (atomic_load(&spinning) < 0) {
    printf("  skip: SCHED_FIFO is not allowed here\n");
  } else {
    char *text = goroutine_text();
    cprof__thread_sample_stats st;
    cprof__thread_sample_last_stats(&st);
    CHECK(text && strstr(text, "starved_spin"));
    CHECK(text && !strstr(text, "did_not_answer"));
    CHECK(st.starved_waits >= 1);
    CHECK(st.total_ns >= 100 * 1000 * 1000);
    printf("  the collection took %.0f ms, %d looks past its deadline\n",
           st.total_ns / 1e6, st.starved_waits);
    if (text && !strstr(text, "starved_spin")) fprintf(stderr, "%s", text);
    free(text);
  }
  atomic_store(&stop_spin, 1);
  pthread_join(spin, NULL);
  atomic_store(&starved_stop, 1);
  pthread_join(target, NULL);
  pthread_attr_destroy(&on0);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  printf("skip: the sanitizers' pthread_create waits for the new thread\n");
  (void)test_unrun_thread;
  (void)test_starved_thread;
#else
  RUN(test_unrun_thread);
  RUN(test_starved_thread);
#endif
  return TEST_RESULT();
}
