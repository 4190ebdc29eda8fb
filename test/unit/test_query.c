/*
 * The HTTP endpoint's input parsers: query strings (decoding, first value
 * wins, rejection of bad escapes and oversize input), Go's Atoi, and the
 * /symbol address list.
 */
#include "query.h"
#include "testutil.h"

static void test_parse(void) {
  cprof__query q;
  char err[128];
  const char *s = "seconds=5&debug=1&a+b=c%20d&seconds=7&&flag&e=";
  CHECK_EQ_INT(cprof__query_parse(&q, s, strlen(s), err, sizeof err), 0);
  CHECK_EQ_INT(q.npairs, 6);
  CHECK_STREQ(cprof__query_get(&q, "seconds"), "5"); /* first wins, as Go */
  CHECK_STREQ(cprof__query_get(&q, "debug"), "1");
  CHECK_STREQ(cprof__query_get(&q, "a b"), "c d");
  CHECK_STREQ(cprof__query_get(&q, "flag"), "");
  CHECK_STREQ(cprof__query_get(&q, "e"), "");
  CHECK(cprof__query_get(&q, "missing") == NULL);

  CHECK_EQ_INT(cprof__query_parse(&q, "", 0, err, sizeof err), 0);
  CHECK_EQ_INT(q.npairs, 0);
  CHECK_EQ_INT(cprof__query_parse(&q, "k=%41%2b%2F", 11, err, sizeof err), 0);
  CHECK_STREQ(cprof__query_get(&q, "k"), "A+/");
  /* Only len bytes are read: no NUL needed. */
  CHECK_EQ_INT(cprof__query_parse(&q, "x=1&y=2", 3, err, sizeof err), 0);
  CHECK_EQ_INT(q.npairs, 1);
}

static void test_parse_errors(void) {
  cprof__query q;
  char err[128];
  static const struct {
    const char *in, *why;
  } bad[] = {
      {"debug=%zz", "invalid URL escape \"%zz\""},
      {"debug=%4", "invalid URL escape \"%4\""},
      {"debug=%", "invalid URL escape \"%\""},
      {"%g1=1", "invalid URL escape \"%g1\""},
      {"a=%00", "invalid NUL byte in URL"},
  };
  for (size_t i = 0; i < CPROF__ARRAY_LEN(bad); i++) {
    err[0] = 0;
    CHECK_EQ_INT(cprof__query_parse(&q, bad[i].in, strlen(bad[i].in), err,
                                    sizeof err),
                 CPROF_EINVAL);
    CHECK_STREQ(err, bad[i].why);
  }
  static char big[CPROF__QUERY_MAX_LEN + 2];
  memset(big, 'a', sizeof big - 1);
  CHECK_EQ_INT(cprof__query_parse(&q, big, CPROF__QUERY_MAX_LEN + 1, err,
                                  sizeof err),
               CPROF_EINVAL);
  CHECK_STREQ(err, "query string too long (limit 4096 bytes)");
  CHECK_EQ_INT(cprof__query_parse(&q, big, CPROF__QUERY_MAX_LEN, err,
                                  sizeof err),
               0);
  /* 65 parameters. */
  char many[400] = "";
  for (int i = 0; i <= CPROF__QUERY_MAX_PAIRS; i++) strcat(many, "a=1&");
  CHECK_EQ_INT(cprof__query_parse(&q, many, strlen(many), err, sizeof err),
               CPROF_EINVAL);
  CHECK_STREQ(err, "too many query parameters (limit 64)");
}

static void test_path(void) {
  char out[32], err[64];
  CHECK_EQ_INT(cprof__path_decode("/debug/pprof/%68eap+", 20, out, sizeof out,
                                  err, sizeof err),
               0);
  CHECK_STREQ(out, "/debug/pprof/heap+");
  CHECK_EQ_INT(cprof__path_decode("/%zz", 4, out, sizeof out, err, sizeof err),
               CPROF_EINVAL);
  CHECK_EQ_INT(cprof__path_decode("/0123456789012345678901234567890123", 35,
                                  out, sizeof out, err, sizeof err),
               CPROF_EINVAL);
}

static void test_atoi(void) {
  int64_t v = 0;
  CHECK(cprof__go_atoi("30", &v) && v == 30);
  CHECK(cprof__go_atoi("+7", &v) && v == 7);
  CHECK(cprof__go_atoi("-1", &v) && v == -1);
  CHECK(cprof__go_atoi("9223372036854775807", &v) && v == INT64_MAX);
  CHECK(cprof__go_atoi("-9223372036854775808", &v) && v == INT64_MIN);
  CHECK(!cprof__go_atoi("9223372036854775808", &v));
  CHECK(!cprof__go_atoi("abc", &v));
  CHECK(!cprof__go_atoi("", &v));
  CHECK(!cprof__go_atoi("-", &v));
  CHECK(!cprof__go_atoi(" 1", &v));
  CHECK(!cprof__go_atoi("1 ", &v));
  CHECK(!cprof__go_atoi("0x10", &v));
  CHECK(!cprof__go_atoi("1_000", &v));
  CHECK(!cprof__go_atoi(NULL, &v));
}

static void test_address(void) {
  uint64_t v = 1;
  CHECK(cprof__parse_address("0x1f", 4, &v) && v == 0x1f);
  CHECK(cprof__parse_address("0X1F", 4, &v) && v == 0x1f);
  CHECK(cprof__parse_address("017", 3, &v) && v == 017);
  CHECK(cprof__parse_address("0o17", 4, &v) && v == 017);
  CHECK(cprof__parse_address("0b101", 5, &v) && v == 5);
  CHECK(cprof__parse_address("123", 3, &v) && v == 123);
  CHECK(cprof__parse_address("0", 1, &v) && v == 0);
  CHECK(cprof__parse_address("0xffffffffffffffff", 18, &v) && v == UINT64_MAX);
  CHECK(!cprof__parse_address("0x10000000000000000", 19, &v));
  CHECK(!cprof__parse_address("", 0, &v));
  CHECK(!cprof__parse_address("0x", 2, &v));
  CHECK(!cprof__parse_address("08", 2, &v));
  CHECK(!cprof__parse_address("-1", 2, &v));
  CHECK(!cprof__parse_address("12z", 3, &v));
}

typedef struct collected {
  uint64_t v[8];
  size_t n;
} collected;

static void collect(uint64_t addr, void *ctx) {
  collected *c = ctx;
  if (c->n < 8) c->v[c->n++] = addr;
}

static void test_symbol_list(void) {
  collected c = {0};
  const char *s = "0x10+0+zz+20++0x30";
  CHECK_EQ_INT(cprof__symbol_addresses(s, strlen(s), collect, &c), 3);
  CHECK_EQ_INT(c.n, 3);
  CHECK_EQ_INT(c.v[0], 0x10);
  CHECK_EQ_INT(c.v[1], 20);
  CHECK_EQ_INT(c.v[2], 0x30);
  c.n = 0;
  CHECK_EQ_INT(cprof__symbol_addresses("", 0, collect, &c), 0);
  CHECK_EQ_INT(cprof__symbol_addresses("0x40+", 5, collect, &c), 1);
}

int main(void) {
  RUN(test_parse);
  RUN(test_parse_errors);
  RUN(test_path);
  RUN(test_atoi);
  RUN(test_address);
  RUN(test_symbol_list);
  return TEST_RESULT();
}
