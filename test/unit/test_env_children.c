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
  setenv("CPROF_PUSH_APP", "a-%p", 1);
  CHECK_STREQ(cprof__env_get("CPROF_PUSH_APP"), "a-%p");
  unsetenv("CPROF_HTTP");
  unsetenv("CPROF_PUSH_APP");
}

/* Only cprof's own settings (base/settings.h) are read: any other name
 * reads as unset, whatever the environment holds. */
static void test_only_settings(void) {
  setenv("CPROF_NOT_A_SETTING", "5", 1);
  CHECK(cprof__env_get("CPROF_NOT_A_SETTING") == NULL);
  CHECK(!cprof__setting_known("CPROF_NOT_A_SETTING"));
  CHECK(cprof__setting_known("CPROF_HEAP_RATE"));
  unsetenv("CPROF_NOT_A_SETTING");
}

/* A misspelt name is matched to the setting a few letters away; another
 * name, or one far from every setting, to none. */
static void test_closest_setting(void) {
  static const struct {
    const char *name, *want;
  } cases[] = {
      {"CPROF_DUMPP", "CPROF_DUMP"},       {"CPROF_DUM", "CPROF_DUMP"},
      {"CPROF_CPUHZ", "CPROF_CPU_HZ"},     {"CPROF_HEAP_RAT", "CPROF_HEAP_RATE"},
      {"CPROF_UNWND", "CPROF_UNWIND"},     {"CPROF_HTPT", "CPROF_HTTP"},
      {"CPROF_PUSH_UR", "CPROF_PUSH_URL"}, {"cprof_dump", NULL},
      {"CPROF_NOT_A_SETTING", NULL},       {"CPROF_X", NULL},
      {"CPROF_HTTP_TOKEN_FILE_PATH_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *got =
        cprof__setting_closest(cases[i].name, strlen(cases[i].name));
    if (cases[i].want)
      CHECK(got && strcmp(got, cases[i].want) == 0);
    else
      CHECK(got == NULL);
  }
  /* Only the name's n bytes count. */
  CHECK_STREQ(cprof__setting_closest("CPROF_DUMPP=cpu", 11), "CPROF_DUMP");
}

static void test_removed_still_read(void) {
  static char a[] = "CPROF_PUSH_INTERVAL=5", b[] = "CPROF_PUSH_LABELS=old";
  static char *const removed[] = {a, b};
  cprof__env_keep_removed(removed, 2);
  CHECK(getenv("CPROF_PUSH_INTERVAL") == NULL);
  CHECK_STREQ(cprof__env_get("CPROF_PUSH_INTERVAL"), "5");
  long long v = 0;
  CHECK(cprof__env_int("CPROF_PUSH_INTERVAL", 0, 10, "off", &v) && v == 5);
  setenv("CPROF_PUSH_LABELS", "new", 1);
  CHECK_STREQ(cprof__env_get("CPROF_PUSH_LABELS"), "new");
  CHECK(cprof__env_get("CPROF_PUSH_TENANT") == NULL);
  cprof__env_keep_removed(NULL, 0);
  CHECK(cprof__env_get("CPROF_PUSH_INTERVAL") == NULL);
}

int main(void) {
  RUN(test_expand_pid);
  RUN(test_http_per_process);
  RUN(test_only_settings);
  RUN(test_closest_setting);
  RUN(test_removed_still_read);
  return TEST_RESULT();
}
