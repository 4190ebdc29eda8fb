/*
 * A minimal test harness: CHECK records a failure with file:line and goes
 * on; TEST_MAIN runs the listed test functions and exits non-zero if any
 * check failed. Each test executable is one ctest test.
 */
#ifndef CPROF_TESTUTIL_H
#define CPROF_TESTUTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int testutil_failures;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
              #cond);                                                    \
      testutil_failures++;                                               \
    }                                                                    \
  } while (0)

#define CHECK_EQ_INT(a, b)                                               \
  do {                                                                   \
    long long va_ = (long long)(a), vb_ = (long long)(b);                \
    if (va_ != vb_) {                                                    \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n",          \
              __FILE__, __LINE__, #a, #b, va_, vb_);                     \
      testutil_failures++;                                               \
    }                                                                    \
  } while (0)

#define CHECK_STREQ(a, b)                                                \
  do {                                                                   \
    const char *sa_ = (a), *sb_ = (b);                                   \
    if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                         \
      fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",      \
              __FILE__, __LINE__, #a, #b, sa_ ? sa_ : "(null)",          \
              sb_ ? sb_ : "(null)");                                     \
      testutil_failures++;                                               \
    }                                                                    \
  } while (0)

/* The process's minor page faults so far. */
static inline long testutil_minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/* Checks that at most limit page faults were taken since before (from
 * testutil_minor_faults). A sanitizer's shadow memory is faulted in by the
 * same accesses, so under one the check is skipped, and says so. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHECK_FAULTS_SINCE(before, limit)                                \
  do {                                                                   \
    (void)(before);                                                      \
    printf("skip: the page-fault count (a sanitizer's shadow memory "    \
           "faults pages of its own)\n");                                \
  } while (0)
#else
#define CHECK_FAULTS_SINCE(before, limit)                                \
  do {                                                                   \
    long faults_ = testutil_minor_faults() - (before);                   \
    if (faults_ > (long)(limit)) {                                       \
      fprintf(stderr, "%s:%d: %ld page faults, more than %ld\n",         \
              __FILE__, __LINE__, faults_, (long)(limit));               \
      testutil_failures++;                                               \
    }                                                                    \
  } while (0)
#endif

#define RUN(fn)                                                          \
  do {                                                                   \
    int before_ = testutil_failures;                                     \
    fn();                                                                \
    fprintf(stderr, "%s %s\n", testutil_failures == before_ ? "ok  " : "FAIL", #fn); \
  } while (0)

#define TEST_RESULT() (testutil_failures ? EXIT_FAILURE : EXIT_SUCCESS)

#endif
