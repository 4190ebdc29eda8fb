/*
 * The HTTP endpoint, split in two: http_handler.c turns one request (method,
 * raw URI, Authorization and Host headers, body) into one response (status,
 * headers, body) with Go's net/http/pprof semantics and no knowledge of
 * sockets; http.c owns the libmicrohttpd server, the listening socket and
 * the accept thread, the limits and the CPROF_HTTP environment variable.
 * The split lets the unit tests drive every route without a network.
 *
 * Normal context only: handlers allocate, symbolize and sleep.
 */
#ifndef CPROF_HTTP_H
#define CPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "profile/registry.h"

/* The longest request target (path and query) accepted; the longest
 * POST body (only /symbol reads one) and the most addresses one /symbol
 * request may ask for; the request bodies one server buffers at once, over
 * all its connections. */
#define CPROF__HTTP_MAX_URI 4096
#define CPROF__HTTP_MAX_BODY (64u << 10)
#define CPROF__HTTP_MAX_SYMBOLS 4096
#define CPROF__HTTP_MAX_BODIES (1u << 20)
#define CPROF__HTTP_DEFAULT_MAX_SECONDS 300

/* What enable_mutex_profile and enable_block_profile switch on: 1 in 10
 * contentions, and every block of 10 us or more (shorter ones sampled in
 * proportion), when the application has not chosen rates itself. */
#define CPROF__HTTP_MUTEX_FRACTION 10
#define CPROF__HTTP_BLOCK_RATE 10000

typedef struct cprof__http_opts {
  const char *token; /* NULL: no authentication */
  int max_seconds;   /* cap on ?seconds=N for /profile and deltas */
  /* Listening on loopback: a Host header must name loopback (see
   * cprof__host_is_loopback), or listen_host itself. */
  bool check_host;
  const char *listen_host;
  /* Answer for this process alone, never for its process tree (a tree
   * member's agent, or the root's own part of a tree's answer). */
  bool local;
} cprof__http_opts;

typedef struct cprof__http_req {
  const char *method;
  const char *uri;           /* raw request target: path[?query] */
  bool uri_too_long;         /* uri was cut at CPROF__HTTP_MAX_URI */
  /* The Authorization and Host headers' values with their lengths (a
   * value may hold a NUL), or NULL when the request has none. */
  const char *authorization;
  size_t authorization_len;
  const char *host;
  size_t host_len;
  const char *body;          /* POST body (not NUL-terminated) */
  size_t body_len;
  bool body_too_large; /* the body exceeded CPROF__HTTP_MAX_BODY */
  /* Waits up to ms milliseconds; returns false as soon as the client has
   * gone or the server is stopping. NULL: plain sleep. */
  bool (*wait)(void *ctx, int ms);
  void *wait_ctx;
  /* A false from wait ends a window (profile, wall) early, answered with
   * what it holds, instead of meaning that the client left: a process
   * tree's member that is exiting (tree.c). */
  bool wait_ends_window;
  /* A window that runs beside any other of its profile (the root
   * pusher's, in a member): not refused as in use. */
  bool shared_window;
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

/* Prepares the handler (its fork handler); the server calls it when it
 * starts. Idempotent. */
CPROF__HIDDEN void cprof__http_handler_init(void);

/* Answers uri (a GET) for this process alone: what a member of the
 * process tree (tree.h) runs for the root, with the request's flags
 * (CPROF__TREE_*). resp is overwritten. */
CPROF__HIDDEN void cprof__http_serve_local(const char *uri, unsigned flags,
                                           bool (*wait)(void *ctx, int ms),
                                           void *wait_ctx,
                                           cprof__http_resp *resp);

/* Answers one request. resp is overwritten; free its body with
 * cprof_buf_free(). May block for a profile's duration. Thread-safe. */
CPROF__HIDDEN void cprof__http_handle(const cprof__http_opts *o,
                                      const cprof__http_req *req,
                                      cprof__http_resp *resp);

/* The checks that come before any of the body is read: method, Host,
 * request target length and bearer token, in cprof__http_handle's order.
 * False when the request is refused, with the answer in resp (overwritten;
 * free its body); true leaves resp empty. body and body_len are not read. */
CPROF__HIDDEN bool cprof__http_admit(const cprof__http_opts *o,
                                     const cprof__http_req *req,
                                     cprof__http_resp *resp);

/* Makes resp Go's serveError answer: status, text/plain, X-Go-Pprof: 1,
 * the formatted message and a newline. resp must be zeroed or hold a
 * body. */
CPROF__HIDDEN void cprof__http_fail(cprof__http_resp *resp, int status,
                                    const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when the request's route reads a body of any type (POST
 * /debug/pprof/symbol). Other POSTs have their body read only when it is
 * an urlencoded form (at most 4096 bytes, whose values count as Go's
 * FormValue counts them); every other body is left unread. */
CPROF__HIDDEN bool cprof__http_wants_body(const cprof__http_req *req);


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
