/*
 * The environment readers' safety rules: values shown in messages are
 * quoted and escaped (one line, no terminal escapes, long values cut with a
 * marker), and in a privileged process (AT_SECURE) every CPROF_* variable
 * reads as unset, with one line saying so. The AT_SECURE decision is
 * tested through cprof__env_lookup, which takes the value as an argument,
 * so it needs neither root nor a setuid binary (test/e2e/env_secure.sh
 * runs a real setuid copy when it can).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/env.h"
#include "testutil.h"

static void test_quote(void) {
  char q[CPROF__QUOTED_SIZE];
  CHECK_STREQ(cprof__quoted(q, sizeof q, "plain value"), "\"plain value\"");
  CHECK_STREQ(cprof__quoted(q, sizeof q, "a\nb\rc\td"), "\"a\\nb\\rc\\td\"");
  CHECK_STREQ(cprof__quoted(q, sizeof q, "\x1b[31m"), "\"\\x1b[31m\"");
  CHECK_STREQ(cprof__quoted(q, sizeof q, "q\"b\\"), "\"q\\\"b\\\\\"");
  CHECK_STREQ(cprof__quoted(q, sizeof q, "\x7f\xc3\xa9"),
              "\"\\x7f\\xc3\\xa9\"");
  CHECK_STREQ(cprof__quoted(q, sizeof q, NULL), "\"\"");
  /* A long value: its first CPROF__QUOTE_MAX bytes, then the marker. */
  char longv[5001];
  memset(longv, '7', 5000);
  longv[5000] = '\0';
  char want[128];
  snprintf(want, sizeof want, "\"%.*s\"... (5000 bytes)", CPROF__QUOTE_MAX,
           longv);
  CHECK_STREQ(cprof__quoted(q, sizeof q, longv), want);
  /* The worst case, every byte escaped, still fits and ends quoted. */
  memset(longv, '\x01', 5000);
  cprof__quoted(q, sizeof q, longv);
  CHECK(strlen(q) < sizeof q);
  CHECK(strstr(q, "\"... (5000 bytes)") != NULL);
  /* A buffer too small for the value: cut, terminated, still closed. */
  char small[12];
  size_t n = cprof__quote(small, sizeof small, "abcdefghijklmnop", 16, 64);
  CHECK(n < sizeof small);
  CHECK_EQ_INT(small[0], '"');
  CHECK_EQ_INT(small[strlen(small) - 1], '"');
}

static void test_parse_int_message(void) {
  long long v;
  char err[96];
  CHECK_EQ_INT(cprof__parse_int("12a", 0, 100, &v, err, sizeof err),
               CPROF_EINVAL);
  CHECK_STREQ(err, "unexpected 'a' after the number");
  CHECK_EQ_INT(cprof__parse_int("12\n", 0, 100, &v, err, sizeof err),
               CPROF_EINVAL);
  CHECK_STREQ(err, "unexpected '\\n' after the number");
  CHECK_EQ_INT(cprof__parse_int("1\x1b", 0, 100, &v, err, sizeof err),
               CPROF_EINVAL);
  CHECK_STREQ(err, "unexpected '\\x1b' after the number");
}

/* Runs fn with stderr sent to a file and returns what it wrote. */
static const char *capture_stderr(void (*fn)(void), char *out, size_t len) {
  FILE *f = tmpfile();
  int fd = fileno(f);
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  ssize_t n = pread(fd, out, len - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  fclose(f);
  return out;
}

static const char *secure_a, *secure_b, *secure_unset, *plain;

static void lookups(void) {
  secure_a = cprof__env_lookup("CPROF_PUSH_APP", 1);
  secure_b = cprof__env_lookup("CPROF_DUMP_OUT", 1);
  secure_unset = cprof__env_lookup("CPROF_PUSH_TENANT", 1);
  plain = cprof__env_lookup("CPROF_PUSH_APP", 0);
}

static void test_secure(void) {
  setenv("CPROF_PUSH_APP", "5", 1);
  setenv("CPROF_DUMP_OUT", "/tmp/x", 1);
  unsetenv("CPROF_PUSH_TENANT");
  char err[512];
  capture_stderr(lookups, err, sizeof err);
  CHECK(secure_a == NULL);
  CHECK(secure_b == NULL);
  CHECK(secure_unset == NULL);
  CHECK_STREQ(plain, "5");
  /* One line for the whole process, however many variables are ignored. */
  CHECK_STREQ(err,
              "cprof: privileged process (setuid, setgid or file "
              "capabilities): CPROF_* environment variables ignored\n");
  /* This test is not privileged: the real readers see the variables. */
  CHECK_STREQ(cprof__env_get("CPROF_PUSH_APP"), "5");
  long long v = 0;
  CHECK(cprof__env_int("CPROF_PUSH_APP", 0, 10, "off", &v) && v == 5);
}

static void bad_int(void) {
  long long v;
  setenv("CPROF_PUSH_LABELS", "4\n\x1b[2J", 1);
  CHECK(!cprof__env_int("CPROF_PUSH_LABELS", 0, 10, "feature off", &v));
}

static void test_env_int_line(void) {
  char err[512];
  capture_stderr(bad_int, err, sizeof err);
  CHECK_STREQ(err,
              "cprof: CPROF_PUSH_LABELS=\"4\\n\\x1b[2J\": unexpected '\\n' after "
              "the number; feature off\n");
}

int main(void) {
  RUN(test_quote);
  RUN(test_parse_int_message);
  RUN(test_secure);
  RUN(test_env_int_line);
  return TEST_RESULT();
}
