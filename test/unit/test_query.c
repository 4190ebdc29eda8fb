/*
 * The HTTP endpoint's input parsers: query strings (decoding, first value
 * wins, pairs Go's url.ParseQuery drops, NULs kept, rejection of oversize
 * input), paths (decoding, Go's cleanPath, escaping for a Location), Go's
 * ParseInt and Atoi with their range errors, the form Content-Type, and
 * the /symbol address list.
 */
#include "sink/query.h"
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

/* What url.ParseQuery drops (checked against Go 1.19 in
 * test/e2e/http_go.sh): a pair with a bad escape or a ';', and only that
 * pair. A %00 decodes to a NUL that stays inside the key or value. */
static void test_parse_go(void) {
  cprof__query q;
  char err[128];
  static const struct {
    const char *in, *debug; /* debug's value, or NULL when dropped */
    size_t npairs;
  } t[] = {
      {"debug=%zz", NULL, 0},
      {"debug=%4", NULL, 0},
      {"debug=%", NULL, 0},
      {"%g1=1&debug=2", "2", 1},
      {"debug=%zz&debug=1", "1", 1},
      {"debug%zz=3&debug=4", "4", 1},
      {"debug=1;x=2", NULL, 0},
      {"x=1;&debug=5", "5", 1},
      {";&debug=6", "6", 1},
      {"=1&debug=7", "7", 2}, /* an empty key is a key */
  };
  for (size_t i = 0; i < CPROF__ARRAY_LEN(t); i++) {
    CHECK_EQ_INT(cprof__query_parse(&q, t[i].in, strlen(t[i].in), err,
                                    sizeof err),
                 0);
    CHECK_EQ_INT(q.npairs, t[i].npairs);
    const char *v = cprof__query_get(&q, "debug");
    if (t[i].debug)
      CHECK(v && strcmp(v, t[i].debug) == 0);
    else
      CHECK(v == NULL);
  }
  size_t len = 9;
  CHECK_EQ_INT(cprof__query_parse(&q, "a=1%00&b%00=2", 13, err, sizeof err),
               0);
  CHECK_EQ_INT(q.npairs, 2);
  const char *v = cprof__query_value(&q, "a", &len);
  CHECK(v && len == 2 && memcmp(v, "1\0", 3) == 0);
  CHECK(cprof__query_value(&q, "b", &len) == NULL && len == 0);
  CHECK_EQ_INT(q.pairs[1].key_len, 2);
  CHECK(memcmp(q.pairs[1].key, "b\0", 3) == 0);
}

static void test_parse_errors(void) {
  cprof__query q;
  char err[128];
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
  /* Dropped pairs do not count. */
  strcpy(many, "");
  for (int i = 0; i < CPROF__QUERY_MAX_PAIRS; i++) strcat(many, "a=1&");
  strcat(many, "b=%zz&c=;");
  CHECK_EQ_INT(cprof__query_parse(&q, many, strlen(many), err, sizeof err),
               0);
  CHECK_EQ_INT(q.npairs, CPROF__QUERY_MAX_PAIRS);
  /* A 65th pair that is dropped is not one too many, however long. */
  static char full[CPROF__QUERY_MAX_LEN];
  size_t n = 0;
  for (int i = 0; i < CPROF__QUERY_MAX_PAIRS; i++) {
    full[n++] = 'k';
    full[n++] = '&';
  }
  while (n < sizeof full - 1) full[n++] = 'v';
  full[n++] = '%';
  CHECK_EQ_INT(cprof__query_parse(&q, full, n, err, sizeof err), 0);
  CHECK_EQ_INT(q.npairs, CPROF__QUERY_MAX_PAIRS);
}

static void test_path(void) {
  char out[32], err[64];
  size_t n = 99;
  CHECK_EQ_INT(cprof__path_decode("/debug/pprof/%68eap+", 20, out, sizeof out,
                                  &n, err, sizeof err),
               0);
  CHECK_STREQ(out, "/debug/pprof/heap+");
  CHECK_EQ_INT(n, 18);
  CHECK_EQ_INT(cprof__path_decode("/heap%00x", 9, out, sizeof out, &n, err,
                                  sizeof err),
               0);
  CHECK(n == 7 && memcmp(out, "/heap\0x", 8) == 0);
  CHECK_EQ_INT(cprof__path_decode("/%zz", 4, out, sizeof out, &n, err,
                                  sizeof err),
               CPROF_EINVAL);
  CHECK_STREQ(err, "invalid URL escape \"%zz\"");
  CHECK_EQ_INT(cprof__path_decode("/0123456789012345678901234567890123", 35,
                                  out, sizeof out, &n, err, sizeof err),
               CPROF_EINVAL);
}

/* Go's cleanPath, case by case as Go 1.19's ServeMux redirects. */
static void test_path_clean(void) {
  static const struct {
    const char *in, *out;
  } t[] = {
      {"", "/"},
      {"/", "/"},
      {"//", "/"},
      {"/debug/pprof/heap", "/debug/pprof/heap"},
      {"//debug/pprof/heap", "/debug/pprof/heap"},
      {"/debug/pprof/./heap", "/debug/pprof/heap"},
      {"/debug/pprof/../pprof/heap", "/debug/pprof/heap"},
      {"/debug/pprof/.", "/debug/pprof"},
      {"/debug/pprof/..", "/debug"},
      {"/debug/pprof/heap/..", "/debug/pprof"},
      {"/debug/pprof//", "/debug/pprof/"},
      {"/debug/pprof//heap/", "/debug/pprof/heap/"},
      {"/../../a", "/a"},
      {"/..", "/"},
      {"/a/b/../../..", "/"},
      {"/a/./", "/a/"},
      {"a/b", "/a/b"},
      {"/.a/..b/...", "/.a/..b/..."},
  };
  for (size_t i = 0; i < CPROF__ARRAY_LEN(t); i++) {
    char out[64];
    size_t n = cprof__path_clean(t[i].in, strlen(t[i].in), out);
    if (strcmp(out, t[i].out) != 0) fprintf(stderr, "clean %s\n", t[i].in);
    CHECK_STREQ(out, t[i].out);
    CHECK_EQ_INT(n, strlen(t[i].out));
  }
  char out[16];
  CHECK_EQ_INT(cprof__path_clean("/a\0/../b", 8, out), 2);
  CHECK_STREQ(out, "/b");
  CHECK_EQ_INT(cprof__path_clean("/a\0b/.", 6, out), 4);
  CHECK(memcmp(out, "/a\0b", 5) == 0);
}

static void test_path_escape(void) {
  char out[128];
  const char *p = "/a b!*()?'\"<>%\x7f\xc3\xa9-._~$&+,/:;=@Zz09";
  size_t n = cprof__path_escape(p, strlen(p), out);
  CHECK_STREQ(out,
              "/a%20b%21%2A%28%29%3F%27%22%3C%3E%25%7F%C3%A9-._~$&+,/:;=@Zz09");
  CHECK_EQ_INT(n, strlen(out));
  CHECK_EQ_INT(cprof__path_escape("/\0", 2, out), 4);
  CHECK_STREQ(out, "/%00");
}

/* strconv.ParseInt(s, 10, 64) as Go 1.19 ends it, range errors with
 * their clamped values included. */
static void test_parse_int(void) {
  static const struct {
    const char *in;
    cprof__int_parse want;
    int64_t v;
  } t[] = {
      {"30", CPROF__INT_OK, 30},
      {"+7", CPROF__INT_OK, 7},
      {"-1", CPROF__INT_OK, -1},
      {"-0", CPROF__INT_OK, 0},
      {"9223372036854775807", CPROF__INT_OK, INT64_MAX},
      {"-9223372036854775808", CPROF__INT_OK, INT64_MIN},
      {"9223372036854775808", CPROF__INT_RANGE, INT64_MAX},
      {"-9223372036854775809", CPROF__INT_RANGE, INT64_MIN},
      {"99999999999999999999", CPROF__INT_RANGE, INT64_MAX},
      {"-99999999999999999999", CPROF__INT_RANGE, INT64_MIN},
      {"18446744073709551615", CPROF__INT_RANGE, INT64_MAX},
      /* Past 64 bits before the bad byte: a range error all the same. */
      {"99999999999999999999x", CPROF__INT_RANGE, INT64_MAX},
      /* Within 64 bits at the bad byte: a syntax error. */
      {"9999999999999999999x", CPROF__INT_SYNTAX, 0},
      {"abc", CPROF__INT_SYNTAX, 0},
      {"", CPROF__INT_SYNTAX, 0},
      {"-", CPROF__INT_SYNTAX, 0},
      {"+", CPROF__INT_SYNTAX, 0},
      {" 1", CPROF__INT_SYNTAX, 0},
      {"1 ", CPROF__INT_SYNTAX, 0},
      {"0x10", CPROF__INT_SYNTAX, 0},
      {"1_000", CPROF__INT_SYNTAX, 0},
  };
  for (size_t i = 0; i < CPROF__ARRAY_LEN(t); i++) {
    int64_t v = 42;
    CHECK_EQ_INT(cprof__go_parse_int(t[i].in, strlen(t[i].in), &v),
                 t[i].want);
    CHECK(v == t[i].v);
  }
  int64_t v = 42;
  CHECK_EQ_INT(cprof__go_parse_int("1\0", 2, &v), CPROF__INT_SYNTAX);
  CHECK(v == 0);
  CHECK_EQ_INT(cprof__go_parse_int("12", 1, &v), CPROF__INT_OK);
  CHECK(v == 1);
}

static void test_atoi(void) {
  int64_t v = 0;
  CHECK(cprof__go_atoi("30", &v) && v == 30);
  CHECK(cprof__go_atoi("-9223372036854775808", &v) && v == INT64_MIN);
  CHECK(!cprof__go_atoi("9223372036854775808", &v));
  CHECK(!cprof__go_atoi("abc", &v));
  CHECK(!cprof__go_atoi("", &v));
  CHECK(!cprof__go_atoi(NULL, &v));
}

/* Go's parsePostForm: mime.ParseMediaType's type, exactly. */
static void test_form_type(void) {
  static const struct {
    const char *in;
    bool form;
  } t[] = {
      {"application/x-www-form-urlencoded", true},
      {"Application/X-WWW-Form-URLencoded", true},
      {" application/x-www-form-urlencoded ; charset=utf-8", true},
      {"application/x-www-form-urlencoded; charset", true},
      {"application/x-www-form-urlencoded;", true},
      {"application/x-www-form-urlencodedx", false},
      {"application/x-www-form-urlencoded/x", false},
      {"application/octet-stream", false},
      {"multipart/form-data; boundary=x", false},
      {"text/plain", false},
      {"", false},
  };
  for (size_t i = 0; i < CPROF__ARRAY_LEN(t); i++)
    CHECK_EQ_INT(cprof__is_form_type(t[i].in, strlen(t[i].in)), t[i].form);
  /* Only len bytes are read. */
  CHECK(cprof__is_form_type("application/x-www-form-urlencodedXX", 33));
  CHECK(!cprof__is_form_type("application/x-www-form-urlencoded\0", 34));
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
  RUN(test_parse_go);
  RUN(test_parse_errors);
  RUN(test_path);
  RUN(test_path_clean);
  RUN(test_path_escape);
  RUN(test_parse_int);
  RUN(test_atoi);
  RUN(test_form_type);
  RUN(test_address);
  RUN(test_symbol_list);
  return TEST_RESULT();
}
