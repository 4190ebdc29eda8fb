/*
 * The dump specification grammar: good specs parse to the right items,
 * and each kind of bad spec is rejected with a message naming the problem
 * and its column.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"
#include "sink/dumpspec.h"
#include "testutil.h"

static void test_good(void) {
  cprof__dump_spec s;
  char err[160];
  CHECK_EQ_INT(cprof__dump_parse("cpu,heap=debug=1,mutex=debug=1:rate=1000",
                                 &s, err, sizeof err),
               0);
  CHECK_EQ_INT(s.n, 3);
  CHECK_STREQ(s.items[0].name, "cpu");
  CHECK_EQ_INT(s.items[0].debug, 0);
  CHECK_STREQ(s.items[1].name, "heap");
  CHECK_EQ_INT(s.items[1].debug, 1);
  CHECK(!s.items[1].has_rate);
  CHECK_STREQ(s.items[2].name, "mutex");
  CHECK_EQ_INT(s.items[2].debug, 1);
  CHECK(s.items[2].has_rate);
  CHECK_EQ_INT(s.items[2].rate, 1000);

  CHECK_EQ_INT(cprof__dump_parse("cpu=hz=250,threads=debug=2,block=rate=0",
                                 &s, err, sizeof err),
               0);
  CHECK(s.items[0].has_rate && s.items[0].rate == 250);
  CHECK_STREQ(s.items[1].name, "goroutine");
  CHECK_EQ_INT(s.items[1].debug, 2);
  CHECK(s.items[2].has_rate && s.items[2].rate == 0);
  CHECK_EQ_INT(cprof__dump_parse("allocs=rate=1", &s, err, sizeof err), 0);
  /* heap and allocs may both give the rate they share. */
  CHECK_EQ_INT(cprof__dump_parse("heap=rate=4096,allocs=rate=4096", &s, err,
                                 sizeof err),
               0);
  CHECK_EQ_INT(cprof__dump_parse("threadcreate", &s, err, sizeof err), 0);
}

static void test_bad(void) {
  static const struct {
    const char *spec;
    const char *message; /* the whole message */
  } cases[] = {
      {"", "empty specification at column 1"},
      {",heap", "empty item at column 1"},
      {"heap,,cpu", "empty item at column 6"},
      {"heap,", "empty item at column 6"},
      {"hepa", "unknown profile \"hepa\" at column 1"},
      {"cpu,hepa=debug=1", "unknown profile \"hepa\" at column 5"},
      {"heap,heap=debug=1", "duplicate profile \"heap\" at column 6"},
      {"goroutine,threads", "duplicate profile \"threads\" at column 11"},
      {"heap=", "'=' without parameters after \"heap\" at column 6"},
      {"=debug=1", "item without a profile name \"=debug=1\" at column 1"},
      {"heap=debug", "parameter without a value \"debug\" at column 6"},
      {"heap=debug=", "missing value \"debug=\" at column 12"},
      {"heap=debug=1:", "empty parameter at column 14"},
      {"heap=:debug=1", "empty parameter at column 6"},
      {"heap==1", "parameter without a name \"=1\" at column 6"},
      {"heap=color=red", "unknown parameter \"color\" at column 6"},
      {"heap=debug=1:debug=0", "duplicate parameter \"debug\" at column 14"},
      {"heap=debug=x",
       "bad value (not a number) for \"debug=x\" at column 12"},
      {"heap=debug=3",
       "bad value (out of range [0, 2]) for \"debug=3\" at column 12"},
      {"heap=rate=-1",
       "bad value (out of range [0, 1099511627776]) for \"rate=-1\" at column 11"},
      {"heap=rate=12abc",
       "bad value (unexpected 'a' after the number) for \"rate=12abc\" at column 11"},
      {"cpu=debug=1",
       "cpu has no text form; debug must be 0 \"debug=1\" at column 5"},
      {"cpu=rate=5", "this profile takes no rate \"rate=5\" at column 5"},
      /* cpu and wall both take hz: no single profile to name. */
      {"heap=hz=5", "this profile takes no hz \"hz=5\" at column 6"},
      {"cpu=hz=0", "bad value (out of range [1, 10000]) for \"hz=0\" at column 8"},
      {"cpu,heap,allocs,threadcreate,goroutine,mutex,block,cpu",
       "duplicate profile \"cpu\" at column 52"},
      {"heap=rate=4096,allocs=rate=8192",
       "heap and allocs share one sampling rate; a different rate for "
       "\"allocs\" at column 16"},
      /* What the spec holds is quoted, escaped and cut. */
      {"cpu,he\npa", "unknown profile \"he\\npa\" at column 5"},
      {"heap=debug=\x1b[2J",
       "bad value (not a number) for \"debug=\\x1b[2J\" at column 12"},
      {"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
       "unknown profile \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"... (50 "
       "bytes) at column 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cprof__dump_spec s;
    char err[200] = "";
    int rc = cprof__dump_parse(cases[i].spec, &s, err, sizeof err);
    if (rc != CPROF_EINVAL || strcmp(err, cases[i].message) != 0)
      fprintf(stderr, "spec \"%s\": rc %d, message \"%s\", want \"%s\"\n",
              cases[i].spec, rc, err, cases[i].message);
    CHECK_EQ_INT(rc, CPROF_EINVAL);
    CHECK_STREQ(err, cases[i].message);
  }
  cprof__dump_spec s;
  char err[64];
  CHECK_EQ_INT(cprof__dump_parse(NULL, &s, err, sizeof err), CPROF_EINVAL);
}

/* A dump's time, written without gmtime_r (whose first call reads the
 * time zone file): the text of gmtime_r's fields, second by second
 * around month, leap-day and century ends, and at random over 0..9999. */
static void test_utc_text(void) {
  static const int64_t around[] = {0, 59, 86399, 86400, 951782399, 951868800,
                                   4107542399, 1796536092, -1, -86401,
                                   253402300799};
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < 20000; i++) {
    int64_t secs;
    if (i < (int)(sizeof around / sizeof around[0])) {
      secs = around[i];
    } else {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      secs = (int64_t)(x % 315537897600u) - 62167219200; /* 0000..9999 */
    }
    char got[CPROF__UTC_TEXT], want[64] = "-";
    cprof__utc_text(secs, got);
    time_t t = (time_t)secs;
    struct tm tm;
    if (gmtime_r(&t, &tm) && tm.tm_year + 1900 >= 0 && tm.tm_year + 1900 <= 9999)
      snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02dZ",
               tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
               tm.tm_min, tm.tm_sec);
    if (strcmp(got, want) != 0) {
      fprintf(stderr, "%lld: %s, want %s\n", (long long)secs, got, want);
      CHECK(0);
      return;
    }
  }
  char got[CPROF__UTC_TEXT];
  cprof__utc_text(253402300800, got); /* year 10000 */
  CHECK(strcmp(got, "-") == 0);
}

int main(void) {
  RUN(test_good);
  RUN(test_bad);
  RUN(test_utc_text);
  return TEST_RESULT();
}
