/*
 * cprof's own locks are the profiler's business: with the block profile at
 * rate 1 and the mutex profile at fraction 1, four application threads that
 * write profiles in a loop (and so contend on the symbolizer's and the
 * registry's locks) must leave no frame of cprof in either profile. The
 * program's own contended mutex must still be there, so the test cannot
 * pass by recording nothing.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "cprof.h"
#include "testutil.h"

#define THREADS 4
#define ROUNDS 40

static pthread_mutex_t app_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int app_counter;

__attribute__((noinline)) static void app_critical_section(void) {
  pthread_mutex_lock(&app_mu);
  for (int i = 0; i < 200000; i++) atomic_fetch_add(&app_counter, 1);
  pthread_mutex_unlock(&app_mu);
  __asm__ volatile("" ::: "memory");
}

static void *writer(void *arg) {
  (void)arg;
  static const char *const names[] = {"heap", "threadcreate", "goroutine",
                                      "block", "mutex"};
  for (int r = 0; r < ROUNDS; r++) {
    cprof_buf buf = {0};
    cprof_sink sink = cprof_sink_buf(&buf);
    cprof_profile_write(names[r % 5], r & 1, &sink);
    cprof_buf_free(&buf);
    app_critical_section();
  }
  return NULL;
}

/* True when the text profile names a function of cprof's: its public
 * functions and internal ones share the cprof_ prefix. (A wait whose
 * unlocker is unknown stands under "[cprof: unlocker not seen]", which is
 * no function.) */
static int names_cprof(const char *text) {
  for (const char *p = text; (p = strstr(p, "cprof_")) != NULL; p++) {
    if (p > text && p[-1] != ' ' && p[-1] != '\t') continue;
    return 1;
  }
  return 0;
}

static void test_no_cprof_frames(void) {
  cprof_set_block_profile_rate(1);
  cprof_set_mutex_profile_fraction(1);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, writer, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  cprof_set_block_profile_rate(0);
  int prev_fraction = cprof_set_mutex_profile_fraction(0);
  CHECK_EQ_INT(prev_fraction, 1);

  const char *names[] = {"block", "mutex"};
  for (int i = 0; i < 2; i++) {
    cprof_buf buf = {0};
    cprof_sink sink = cprof_sink_buf(&buf);
    CHECK_EQ_INT(cprof_profile_write(names[i], 1, &sink), 0);
    char *text = calloc(1, buf.len + 1);
    if (!text) return;
    if (buf.len) memcpy(text, buf.data, buf.len);
    if (names_cprof(text)) {
      fprintf(stderr, "%s profile names cprof:\n%s\n", names[i], text);
      CHECK(!names_cprof(text));
    }
    /* The program's own contention is there: the locks were contended by
     * four threads, so at least one wait was recorded. */
    if (!strstr(text, "app_critical_section")) {
      fprintf(stderr, "%s profile lacks the program's lock:\n%s\n", names[i],
              text);
      CHECK(strstr(text, "app_critical_section") != NULL);
    }
    free(text);
    cprof_buf_free(&buf);
  }
}

int main(void) {
  RUN(test_no_cprof_frames);
  return TEST_RESULT();
}
