/*
 * The HTTP endpoint without a network: the request handler driven
 * directly (every route's status, headers and Go's error texts, with the
 * profile lookup seam supplying a profile without delta support), the
 * constant-time token check over the header's whole value, the Host check
 * against DNS rebinding, the /symbol limits, and the server's start/stop
 * contract on 127.0.0.1 (NULL config, empty token, port in use,
 * non-loopback refusal, port 0).
 */
#include "cprof.h"
#include "sink/http.h"
#include "sink/query.h"
#include "testutil.h"

static const cprof__profile_def *threadcreate;

static long no_entries(void) { return 0; }
static int fwd_collect(cprof__records *out) {
  return threadcreate->collect(out);
}
static int fwd_write(const cprof__records *r, int debug, int64_t d,
                     const cprof_sink *s) {
  return threadcreate->write(r, debug, d, s);
}
static const cprof__profile_def nodelta = {
    .name = "nodelta",
    .description = "no deltas",
    .max_debug = 2,
    .entries = no_entries,
    .collect = fwd_collect,
    .write = fwd_write,
};

static const cprof__profile_def *find(const char *name) {
  return strcmp(name, "nodelta") == 0 ? &nodelta : cprof__profile_find_route(name);
}

static int waits;
static bool client_gone(void *ctx, int ms) {
  (void)ctx, (void)ms;
  waits++;
  return false;
}

typedef struct expect {
  const char *method, *uri, *auth;
  int status;
  const char *body; /* exact, or NULL to skip */
  const char *type;
  const char *disposition;
} expect;

static void run_table(const cprof__http_opts *o, const expect *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    cprof__http_req req = {
        .method = t[i].method,
        .uri = t[i].uri,
        .authorization = t[i].auth,
        .authorization_len = t[i].auth ? strlen(t[i].auth) : 0};
    cprof__http_resp r;
    cprof__http_handle(o, &req, &r);
    if (r.status != t[i].status)
      fprintf(stderr, "case %zu: %s %s\n", i, t[i].method, t[i].uri);
    CHECK_EQ_INT(r.status, t[i].status);
    if (t[i].body) {
      char got[512] = "";
      size_t len = r.body.len < sizeof got - 1 ? r.body.len : sizeof got - 1;
      if (len) memcpy(got, r.body.data, len);
      CHECK_STREQ(got, t[i].body);
    }
    if (t[i].type) CHECK_STREQ(r.content_type, t[i].type);
    if (t[i].disposition) CHECK_STREQ(r.disposition, t[i].disposition);
    /* Every error is Go's serveError: text/plain and X-Go-Pprof. */
    if (r.status >= 400 && r.status != 404) CHECK(r.go_pprof_error);
    cprof_buf_free(&r.body);
  }
}

#define TXT "text/plain; charset=utf-8"
#define OCT "application/octet-stream"

static void test_routes(void) {
  cprof__http_opts o = {.max_seconds = 60};
  const expect t[] = {
      {"GET", "/debug/pprof/nosuch", NULL, 404, "Unknown profile\n", TXT, ""},
      {"GET", "/debug/pprof/threadcreate?seconds=-1", NULL, 400,
       "invalid value for \"seconds\" - must be a positive integer\n", TXT,
       ""},
      {"GET", "/debug/pprof/threadcreate?seconds=abc", NULL, 400,
       "invalid value for \"seconds\" - must be a positive integer\n", TXT,
       ""},
      {"GET", "/debug/pprof/threadcreate?seconds=99999999999999999999", NULL,
       400, "invalid value for \"seconds\" - must be a positive integer\n",
       TXT, ""},
      {"GET", "/debug/pprof/threadcreate?seconds=61", NULL, 400,
       "profile duration exceeds server's limit of 60 seconds\n", TXT, ""},
      {"GET", "/debug/pprof/threadcreate?seconds=1&debug=1", NULL, 400,
       "seconds and debug params are incompatible\n", TXT, ""},
      /* Go's order: an invalid value first, then support, then debug. */
      {"GET", "/debug/pprof/nodelta?seconds=x&debug=1", NULL, 400,
       "invalid value for \"seconds\" - must be a positive integer\n", TXT,
       ""},
      {"GET", "/debug/pprof/nodelta?seconds=1&debug=1", NULL, 400,
       "\"seconds\" parameter is not supported for this profile type\n", TXT,
       ""},
      {"GET", "/debug/pprof/nosuch?seconds=1", NULL, 404, "Unknown profile\n",
       TXT, ""},
      {"GET", "/debug/pprof/threadcreate?debug=abc", NULL, 200, NULL, OCT,
       "attachment; filename=\"threadcreate\""},
      {"GET", "/debug/pprof/threadcreate?debug=1&gc=1", NULL, 200, NULL, TXT,
       ""},
      {"GET", "/debug/pprof/threadcreate?debug=2", NULL, 200, NULL, TXT, ""},
      {"GET", "/debug/pprof/threadcreate?seconds=", NULL, 200, NULL, OCT,
       "attachment; filename=\"threadcreate\""},
      {"GET", "/debug/pprof/%74hreadcreate", NULL, 200, NULL, OCT, NULL},
      /* Go's url.ParseQuery drops a pair that does not decode. */
      {"GET", "/debug/pprof/threadcreate?debug=%zz", NULL, 200, NULL, OCT,
       "attachment; filename=\"threadcreate\""},
      {"GET", "/debug/pprof/%zz", NULL, 400, "invalid URL escape \"%zz\"\n",
       TXT, ""},
      {"GET", "/debug/pprof/profile?seconds=61", NULL, 400,
       "profile duration exceeds server's limit of 60 seconds\n", TXT, ""},
      {"GET", "/debug/pprof/profile?hz=100000", NULL, 400,
       "invalid value for \"hz\" - must be an integer in [1, 10000]\n", TXT,
       ""},
      {"GET", "/debug/pprof/trace?seconds=1", NULL, 501,
       "Could not enable tracing: execution traces are not supported by "
       "cprof\n",
       TXT, ""},
      {"GET", "/debug/pprof/symbol", NULL, 200, "num_symbols: 1\n", TXT, ""},
      {"GET", "/debug/pprof/symbol?0x0+zz+%41", NULL, 200, "num_symbols: 1\n",
       TXT, ""},
      {"GET", "/debug/pprof/cmdline", NULL, 200, NULL, TXT, ""},
      {"GET", "/debug/pprof/", NULL, 200, NULL, "text/html; charset=utf-8",
       ""},
      {"HEAD", "/debug/pprof/", NULL, 200, NULL, NULL, NULL},
      {"GET", "/debug/pprof", NULL, 301, NULL, NULL, NULL},
      {"GET", "/", NULL, 404, "404 page not found\n", TXT, ""},
      {"GET", "/etc/passwd", NULL, 404, "404 page not found\n", TXT, ""},
      {"DELETE", "/debug/pprof/", NULL, 405, "Method Not Allowed\n", TXT, ""},
  };
  run_table(&o, t, CPROF__ARRAY_LEN(t));
}

static void test_token(void) {
  cprof__http_opts o = {.token = "s3cret", .max_seconds = 60};
  const expect t[] = {
      {"GET", "/debug/pprof/", NULL, 401,
       "Unauthorized: send \"Authorization: Bearer <token>\"\n", TXT, ""},
      {"GET", "/debug/pprof/", "Bearer wrong", 401,
       "Unauthorized: invalid bearer token\n", TXT, ""},
      {"GET", "/debug/pprof/", "Bearer s3cre", 401, NULL, TXT, ""},
      {"GET", "/debug/pprof/", "Bearer s3cret0", 401, NULL, TXT, ""},
      {"GET", "/debug/pprof/", "Basic czNjcmV0", 401, NULL, TXT, ""},
      {"GET", "/nothere", NULL, 401, NULL, TXT, ""},
      {"GET", "/debug/pprof/", "Bearer s3cret", 200, NULL, NULL, NULL},
      {"GET", "/debug/pprof/", "bearer  s3cret", 200, NULL, NULL, NULL},
  };
  run_table(&o, t, CPROF__ARRAY_LEN(t));
  cprof__http_req req = {.method = "GET", .uri = "/debug/pprof/"};
  cprof__http_resp r;
  cprof__http_handle(&o, &req, &r);
  CHECK(r.www_authenticate);
  cprof_buf_free(&r.body);
  CHECK(cprof__http_token_ok(NULL, NULL, 0));
  CHECK(!cprof__http_token_ok("t", NULL, 0));
  CHECK(!cprof__http_token_ok("t", "Bearer ", 7));
  /* The whole value counts: a NUL does not end it. */
  static const char nul[] = "Bearer s3cret\0junk";
  CHECK(cprof__http_token_ok("s3cret", nul, 13));
  CHECK(!cprof__http_token_ok("s3cret", nul, sizeof nul - 1));
  CHECK(!cprof__http_token_ok("s3cret", "Bearer s3cret\0", 14));
  /* Basic credentials: any user name, the token as password. */
#define BASIC_OK(v) cprof__http_token_ok("s3cret", v, strlen(v))
  CHECK(BASIC_OK("Basic cHByb2Y6czNjcmV0"));    /* pprof:s3cret */
  CHECK(BASIC_OK("basic   cHByb2Y6czNjcmV0"));  /* scheme in any case */
  CHECK(BASIC_OK("Basic OnMzY3JldA=="));        /* :s3cret */
  CHECK(!BASIC_OK("Basic cHByb2Y6czNjcmU="));   /* pprof:s3cre */
  CHECK(!BASIC_OK("Basic YTpiOnMzY3JldA=="));   /* a:b:s3cret */
  CHECK(!BASIC_OK("Basic cHByb2Y6czNjcmV0AA==")); /* pprof:s3cret\0 */
  CHECK(!BASIC_OK("Basic czNjcmV0"));           /* s3cret, no user */
  CHECK(!BASIC_OK("Basic cHByb2Y6czNjcmV0="));  /* not base64 */
  CHECK(!BASIC_OK("Basic cHByb2Y6czNj=mV0"));   /* padding inside */
  CHECK(!BASIC_OK("Basic "));
  CHECK(!BASIC_OK("Digest cHByb2Y6czNjcmV0"));
#undef BASIC_OK
  req = (cprof__http_req){.method = "GET",
                          .uri = "/debug/pprof/",
                          .authorization = nul,
                          .authorization_len = sizeof nul - 1};
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 401);
  cprof_buf_free(&r.body);
}

/* Listening on loopback, Host must name loopback (DNS rebinding). */
static void test_host(void) {
  static const char *const good[] = {
      "localhost", "LocalHost:6060", "127.0.0.1", "127.0.0.1:80",
      "127.9.8.7:65535", "[::1]", "[::1]:6060", "[::ffff:127.0.0.1]:1",
      "myhost:99"};
  static const char *const bad[] = {
      "evil.example", "evil.example:6060", "127.0.0.1.evil.example",
      "localhost.evil.example", "localhostx", "10.0.0.1", "[::2]:80",
      "::1", "127.0.0.1:", "127.0.0.1:123456", "127.0.0.1:8a", "[::1",
      "[::1]x", "", "0x7f.1", "127.1", "evil.example:127.0.0.1"};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(good); i++) {
    if (!cprof__host_is_loopback(good[i], strlen(good[i]), "myhost"))
      fprintf(stderr, "refused %s\n", good[i]);
    CHECK(cprof__host_is_loopback(good[i], strlen(good[i]), "myhost"));
  }
  for (size_t i = 0; i < CPROF__ARRAY_LEN(bad); i++) {
    if (cprof__host_is_loopback(bad[i], strlen(bad[i]), "myhost"))
      fprintf(stderr, "accepted %s\n", bad[i]);
    CHECK(!cprof__host_is_loopback(bad[i], strlen(bad[i]), "myhost"));
  }
  CHECK(!cprof__host_is_loopback("localhost\0.evil", 16, NULL));

  cprof__http_opts o = {.max_seconds = 60, .check_host = true};
  cprof__http_req req = {.method = "GET",
                         .uri = "/debug/pprof/cmdline",
                         .host = "evil.example",
                         .host_len = 12};
  cprof__http_resp r;
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 403);
  CHECK(r.go_pprof_error);
  cprof_buf_free(&r.body);
  req.host = "localhost:6060";
  req.host_len = 14;
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 200);
  cprof_buf_free(&r.body);
  req.host = NULL; /* HTTP/1.0 without Host */
  req.host_len = 0;
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 200);
  cprof_buf_free(&r.body);
  o.check_host = false; /* a unix socket, or a non-loopback address */
  req.host = "evil.example";
  req.host_len = 12;
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 200);
  cprof_buf_free(&r.body);
}

static void test_limits(void) {
  cprof__http_opts o = {.max_seconds = 60};
  static char uri[CPROF__HTTP_MAX_URI + 64];
  strcpy(uri, "/debug/pprof/threadcreate?x=");
  memset(uri + strlen(uri), 'a', CPROF__HTTP_MAX_URI);
  cprof__http_req req = {.method = "GET", .uri = uri};
  cprof__http_resp r;
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 414);
  cprof_buf_free(&r.body);
  req = (cprof__http_req){.method = "POST",
                          .uri = "/debug/pprof/symbol",
                          .body_too_large = true};
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 413);
  CHECK(r.body.len > 0 &&
        strncmp((char *)r.body.data,
                "request body too large (limit 65536 bytes)\n",
                r.body.len) == 0);
  cprof_buf_free(&r.body);

  /* /symbol answers at most CPROF__HTTP_MAX_SYMBOLS addresses. */
  static char body[CPROF__HTTP_MAX_BODY];
  size_t n = 0;
  for (int i = 0; i < CPROF__HTTP_MAX_SYMBOLS + 1; i++)
    n += (size_t)snprintf(body + n, sizeof body - n, "%s0x%x", i ? "+" : "",
                          0x1000 + i);
  req = (cprof__http_req){.method = "POST",
                          .uri = "/debug/pprof/symbol",
                          .body = body,
                          .body_len = n};
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 413);
  CHECK(r.body.len > 0 &&
        strncmp((char *)r.body.data,
                "too many addresses (limit 4096 per request)\n",
                r.body.len) == 0);
  cprof_buf_free(&r.body);
  req.body_len = (size_t)(strrchr(body, '+') - body); /* exactly 4096 */
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 200);
  cprof_buf_free(&r.body);

  /* Only POST /debug/pprof/symbol keeps a body. */
  req = (cprof__http_req){.method = "POST", .uri = "/debug/pprof/%73ymbol?x"};
  CHECK(cprof__http_wants_body(&req));
  req.method = "GET";
  CHECK(!cprof__http_wants_body(&req));
  req = (cprof__http_req){.method = "POST", .uri = "/debug/pprof/heap"};
  CHECK(!cprof__http_wants_body(&req));
}

/* A client that leaves makes a delta or CPU profile end at once, without
 * an answer, and frees the CPU profile for the next client. */
static void test_client_gone(void) {
  cprof__http_opts o = {.max_seconds = 60};
  const char *uris[] = {"/debug/pprof/threadcreate?seconds=30",
                        "/debug/pprof/profile?seconds=30",
                        "/debug/pprof/profile?seconds=30"};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(uris); i++) {
    waits = 0;
    cprof__http_req req = {.method = "GET", .uri = uris[i], .wait = client_gone};
    cprof__http_resp r;
    int64_t t0 = cprof__mono_ns();
    cprof__http_handle(&o, &req, &r);
    CHECK(r.drop);
    CHECK_EQ_INT(waits, 1);
    CHECK(cprof__mono_ns() - t0 < 2000000000);
    cprof_buf_free(&r.body);
  }
}

static void test_delta(void) {
  cprof__http_opts o = {.max_seconds = 60};
  cprof__http_req req = {.method = "GET",
                         .uri = "/debug/pprof/threadcreate?seconds=1"};
  cprof__http_resp r;
  cprof__http_handle(&o, &req, &r);
  CHECK_EQ_INT(r.status, 200);
  CHECK_STREQ(r.disposition, "attachment; filename=\"threadcreate-delta\"");
  CHECK(r.body.len > 2 && r.body.data[0] == 0x1f && r.body.data[1] == 0x8b);
  cprof_buf_free(&r.body);
}

static void test_server(void) {
  cprof_http *srv = NULL, *again = NULL;
  CHECK_EQ_INT(cprof_http_start(NULL, &srv), CPROF_EINVAL);
  CHECK_EQ_INT(cprof_http_stop(NULL), CPROF_EINVAL);
  CHECK_EQ_INT(cprof_http_port(NULL), CPROF_EINVAL);
  cprof_http_config bad = {.addr = "192.0.2.1:0"};
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_ENOTLOOPBACK);
  bad.addr = ":0";
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_ENOTLOOPBACK);
  bad.addr = "example.com:80";
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_EINVAL);
  bad.addr = "127.0.0.1";
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_EINVAL);
  bad.addr = "127.0.0.1:70000";
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_EINVAL);
  bad.addr = "127.0.0.1:0";
  bad.token = "has space";
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_EINVAL);
  bad.token = ""; /* never "no authentication" */
  CHECK_EQ_INT(cprof_http_start(&bad, &srv), CPROF_EINVAL);
  CHECK(srv == NULL);

  cprof_http_config cfg = {.addr = "127.0.0.1:0"};
  CHECK_EQ_INT(cprof_http_start(&cfg, &srv), 0);
  int port = cprof_http_port(srv);
  CHECK(port > 0);
  cfg.port = (unsigned)port; /* the port field overrides addr's */
  CHECK_EQ_INT(cprof_http_start(&cfg, &again), CPROF_EADDRINUSE);
  CHECK(again == NULL);
  CHECK_EQ_INT(cprof_http_stop(srv), 0);
  /* The port is free again once stopped. */
  CHECK_EQ_INT(cprof_http_start(&cfg, &again), 0);
  CHECK_EQ_INT(cprof_http_port(again), port);
  CHECK_EQ_INT(cprof_http_stop(again), 0);
}

int main(void) {
  threadcreate = cprof__profile_find("threadcreate");
  cprof__http_find = find;
  RUN(test_routes);
  RUN(test_token);
  RUN(test_host);
  RUN(test_limits);
  RUN(test_client_gone);
  RUN(test_delta);
  RUN(test_server);
  return TEST_RESULT();
}
