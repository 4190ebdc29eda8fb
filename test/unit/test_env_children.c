/*
 * What the environment readers give after the constructor took cprof's
 * variables out of the environment (init.c): a %p in CPROF_HTTP reads as
 * the process's pid, and a variable taken out still reads as it was (for
 * modules that read theirs late), while one the program sets wins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/env.h"
#include "testutil.h"

static void test_expand_pid(void) {
  char out[64];
  CHECK(cprof__expand_pid(out, sizeof out, "unix:/run/app-%p.sock", 42));
  CHECK_STREQ(out, "unix:/run/app-42.sock");
  CHECK(cprof__expand_pid(out, sizeof out, "%p%p-%q%", 7));
  CHECK_STREQ(out, "77-%q%");
  CHECK(cprof__expand_pid(out, sizeof out, "no marker", 7));
  CHECK_STREQ(out, "no marker");
  /* Too long: refused, the buffer still terminated. */
  char small[8];
  CHECK(!cprof__expand_pid(small, sizeof small, "abc-%p", 123456));
  CHECK(strlen(small) < sizeof small);
}

static void test_http_per_process(void) {
  char want[64];
  snprintf(want, sizeof want, "unix:/tmp/x-%d.sock", (int)getpid());
  setenv("CPROF_HTTP", "unix:/tmp/x-%p.sock", 1);
  CHECK_STREQ(cprof__env_get("CPROF_HTTP"), want);
  /* Only CPROF_HTTP has a per-process form. */
  setenv("CPROF_TEST_P", "a-%p", 1);
  CHECK_STREQ(cprof__env_get("CPROF_TEST_P"), "a-%p");
  unsetenv("CPROF_HTTP");
  unsetenv("CPROF_TEST_P");
}

static void test_removed_still_read(void) {
  static char a[] = "CPROF_TEST_GONE=5", b[] = "CPROF_TEST_BOTH=old";
  static char *const removed[] = {a, b};
  cprof__env_keep_removed(removed, 2);
  CHECK(getenv("CPROF_TEST_GONE") == NULL);
  CHECK_STREQ(cprof__env_get("CPROF_TEST_GONE"), "5");
  long long v = 0;
  CHECK(cprof__env_int("CPROF_TEST_GONE", 0, 10, "off", &v) && v == 5);
  setenv("CPROF_TEST_BOTH", "new", 1);
  CHECK_STREQ(cprof__env_get("CPROF_TEST_BOTH"), "new");
  CHECK(cprof__env_get("CPROF_TEST_NEVER") == NULL);
  cprof__env_keep_removed(NULL, 0);
  CHECK(cprof__env_get("CPROF_TEST_GONE") == NULL);
}

int main(void) {
  RUN(test_expand_pid);
  RUN(test_http_per_process);
  RUN(test_removed_still_read);
  return TEST_RESULT();
}
