/*
 * The HTTP endpoint, split in two: http_handler.c turns one request (method,
 * raw URI, Authorization header, body) into one response (status, headers,
 * body) with Go's net/http/pprof semantics and no knowledge of sockets;
 * http.c owns the libmicrohttpd server, the listening socket, the limits
 * and the CPROF_HTTP environment variable. The split lets the unit tests
 * drive every route without a network.
 *
 * Normal context only: handlers allocate, symbolize and sleep.
 */
#ifndef CPROF_HTTP_H
#define CPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "registry.h"

/* The longest request target (path and query) and POST body accepted. */
#define CPROF__HTTP_MAX_URI 4096
#define CPROF__HTTP_MAX_BODY (4u << 20)
#define CPROF__HTTP_DEFAULT_MAX_SECONDS 300

/* What enable_mutex_profile and enable_block_profile switch on: 1 in 10
 * contentions, and every block of 10 us or more (shorter ones sampled in
 * proportion), when the application has not chosen rates itself. */
#define CPROF__HTTP_MUTEX_FRACTION 10
#define CPROF__HTTP_BLOCK_RATE 10000

typedef struct cprof__http_opts {
  const char *token; /* NULL: no authentication */
  int max_seconds;   /* cap on ?seconds=N for /profile and deltas */
} cprof__http_opts;

typedef struct cprof__http_req {
  const char *method;
  const char *uri;           /* raw request target: path[?query] */
  bool uri_too_long;         /* uri was cut at CPROF__HTTP_MAX_URI */
  const char *authorization; /* the header's value, or NULL */
  const char *body;          /* POST body (not NUL-terminated) */
  size_t body_len;
  bool body_too_large; /* the body exceeded CPROF__HTTP_MAX_BODY */
  /* Waits up to ms milliseconds; returns false as soon as the client has
   * gone or the server is stopping. NULL: plain sleep. */
  bool (*wait)(void *ctx, int ms);
  void *wait_ctx;
} cprof__http_req;

typedef struct cprof__http_resp {
  int status;
  const char *content_type; /* static string */
  char disposition[96];     /* Content-Disposition, "" for none */
  const char *location;     /* Location for a redirect, or NULL */
  bool go_pprof_error;      /* X-Go-Pprof: 1 */
  bool www_authenticate;    /* WWW-Authenticate: Bearer */
  bool allow;               /* Allow: GET, HEAD, POST (405) */
  bool drop;                /* the client left: close, answer nothing */
  cprof_buf body;
} cprof__http_resp;

/* Answers one request. resp is overwritten; free its body with
 * cprof_buf_free(). May block for a profile's duration. Thread-safe. */
CPROF__HIDDEN void cprof__http_handle(const cprof__http_opts *o,
                                      const cprof__http_req *req,
                                      cprof__http_resp *resp);

/* Constant-time check of an Authorization header value against
 * "Bearer <token>". */
CPROF__HIDDEN bool cprof__http_token_ok(const char *token,
                                        const char *authorization);

/* A test seam: how the handler finds a named profile (default
 * cprof__profile_find). Set it before starting a server, never while one
 * runs. */
CPROF__HIDDEN extern const cprof__profile_def *(*cprof__http_find)(
    const char *name);

/* Starts the server when CPROF_HTTP is set (CPROF_HTTP_TOKEN,
 * CPROF_HTTP_ALLOW_REMOTE=0|1 and CPROF_HTTP_MAX_SECONDS refine it). A bad
 * value prints one line and starts nothing. Called once, from the
 * constructor. */
CPROF__HIDDEN void cprof__http_env_init(void);

#endif
