/*
 * The HTTP server (see http.h): the listening socket, which cprof binds
 * itself so that a busy port or a refused address is reported by
 * cprof_http_start() and not later in a log; the libmicrohttpd daemon it
 * hands that socket to (one thread per connection, so a 30-second profile
 * never holds up another request); the limits on connections, request size
 * and idle time; and the CPROF_HTTP environment variable.
 *
 * It must never log a request's headers (the bearer token travels in one),
 * never bind a non-loopback address without allow_remote, and never unlink
 * a file that is not a stale socket. libmicrohttpd's threads enter cprof's
 * allocation guard for the length of each callback, so the heap profiler
 * does not sample the profiler's own work.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "contention.h"
#include "dynload.h"
#include "env.h"
#include "http.h"
#include "mem.h"
#include "profilez.h"

#define DEFAULT_ADDR "127.0.0.1:6060"
#define DEFAULT_CONNECTIONS 32
#define DEFAULT_IDLE_SECONDS 30
/* Per-connection memory for the request line, headers and buffers. */
#define CONNECTION_MEMORY (32 * 1024)

/* libmicrohttpd, loaded when the first server starts (dynload.h). */
static struct {
  __typeof__(MHD_add_response_header) *add_response_header;
  __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
  __typeof__(MHD_create_response_from_buffer_with_free_callback) *create_response_from_buffer_with_free_callback;
  __typeof__(MHD_destroy_response) *destroy_response;
  __typeof__(MHD_get_connection_info) *get_connection_info;
  __typeof__(MHD_lookup_connection_value) *lookup_connection_value;
  __typeof__(MHD_queue_response) *queue_response;
  __typeof__(MHD_start_daemon) *start_daemon;
  __typeof__(MHD_stop_daemon) *stop_daemon;
} mhd;

static const cprof__dynsym mhd_syms[] = {
    {"MHD_add_response_header", (void **)&mhd.add_response_header},
    {"MHD_create_response_from_buffer", (void **)&mhd.create_response_from_buffer},
    {"MHD_create_response_from_buffer_with_free_callback", (void **)&mhd.create_response_from_buffer_with_free_callback},
    {"MHD_destroy_response", (void **)&mhd.destroy_response},
    {"MHD_get_connection_info", (void **)&mhd.get_connection_info},
    {"MHD_lookup_connection_value", (void **)&mhd.lookup_connection_value},
    {"MHD_queue_response", (void **)&mhd.queue_response},
    {"MHD_start_daemon", (void **)&mhd.start_daemon},
    {"MHD_stop_daemon", (void **)&mhd.stop_daemon},
};
static const char *const mhd_sonames[] = {"libmicrohttpd.so.12", NULL};
static cprof__dynlib mhd_lib = {mhd_sonames, mhd_syms,
                                CPROF__ARRAY_LEN(mhd_syms), 0, ""};

struct cprof_http {
  struct MHD_Daemon *daemon;
  int port;
  char *unix_path; /* the socket file to remove at stop, or NULL */
  dev_t unix_dev;
  ino_t unix_ino;
  char *token;
  cprof__http_opts opts;
  void (*logger)(void *ctx, const char *line);
  void *logger_ctx;
  atomic_bool stopping;
};

/* What cprof keeps per request, from the request line to completion. */
typedef struct request {
  cprof_http *srv;
  char uri[CPROF__HTTP_MAX_URI + 1];
  bool uri_too_long;
  bool headers_seen;
  cprof_buf body;
  bool body_too_large;
  int64_t start_ns;
} request;

typedef struct listen_addr {
  int family;
  union {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    struct sockaddr_un un;
  } u;
  socklen_t len;
  bool loopback;
} listen_addr;

__attribute__((format(printf, 2, 3))) static void log_line(cprof_http *srv,
                                                           const char *fmt,
                                                           ...) {
  if (!srv->logger) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  srv->logger(srv->logger_ctx, line);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  cprof_http *srv = cls;
  if (!srv->logger) return;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
  log_line(srv, "http: %s", line);
}

/* Parses "host:port", "[v6]:port" or "unix:/path" (see cprof.h). */
static int parse_addr(const char *addr, unsigned port_override,
                      listen_addr *la, char *why, size_t whylen) {
  memset(la, 0, sizeof *la);
  if (strncmp(addr, "unix:", 5) == 0) {
    const char *path = addr + 5;
    if (!*path || strlen(path) >= sizeof la->u.un.sun_path) {
      snprintf(why, whylen, "a unix socket path must have 1 to %zu bytes",
               sizeof la->u.un.sun_path - 1);
      return CPROF_EINVAL;
    }
    la->family = AF_UNIX;
    la->u.un.sun_family = AF_UNIX;
    strcpy(la->u.un.sun_path, path);
    la->len = sizeof la->u.un;
    la->loopback = true;
    return 0;
  }
  char host[64];
  const char *colon = strrchr(addr, ':');
  const char *hstart = addr, *hend = colon ? colon : addr + strlen(addr);
  if (*addr == '[') {
    const char *close = strchr(addr, ']');
    if (!close || (close[1] != 0 && close[1] != ':')) {
      snprintf(why, whylen, "expected [IPv6]:port");
      return CPROF_EINVAL;
    }
    hstart = addr + 1;
    hend = close;
    colon = close[1] == ':' ? close + 1 : NULL;
  }
  if ((size_t)(hend - hstart) >= sizeof host) {
    snprintf(why, whylen, "host too long");
    return CPROF_EINVAL;
  }
  memcpy(host, hstart, (size_t)(hend - hstart));
  host[hend - hstart] = 0;

  long long port = port_override;
  if (!port_override) {
    if (!colon) {
      snprintf(why, whylen, "missing \":port\"");
      return CPROF_EINVAL;
    }
    char perr[64];
    if (cprof__parse_int(colon + 1, 0, 65535, &port, perr, sizeof perr)) {
      snprintf(why, whylen, "port: %s", perr);
      return CPROF_EINVAL;
    }
  } else if (port_override > 65535) {
    snprintf(why, whylen, "port %u out of range [0, 65535]", port_override);
    return CPROF_EINVAL;
  }

  if (strcmp(host, "localhost") == 0) strcpy(host, "127.0.0.1");
  if (*host == 0) strcpy(host, "0.0.0.0"); /* Go's ":port": every interface */
  if (inet_pton(AF_INET, host, &la->u.in4.sin_addr) == 1) {
    la->family = AF_INET;
    la->u.in4.sin_family = AF_INET;
    la->u.in4.sin_port = htons((uint16_t)port);
    la->len = sizeof la->u.in4;
    la->loopback = (ntohl(la->u.in4.sin_addr.s_addr) >> 24) == 127;
  } else if (inet_pton(AF_INET6, host, &la->u.in6.sin6_addr) == 1) {
    la->family = AF_INET6;
    la->u.in6.sin6_family = AF_INET6;
    la->u.in6.sin6_port = htons((uint16_t)port);
    la->len = sizeof la->u.in6;
    const struct in6_addr *a = &la->u.in6.sin6_addr;
    la->loopback = IN6_IS_ADDR_LOOPBACK(a) ||
                   (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  } else {
    snprintf(why, whylen,
             "host \"%s\" is not a numeric address or localhost", host);
    return CPROF_EINVAL;
  }
  return 0;
}

/* The address as bound, for messages: the port field may have replaced
 * addr's port. */
static void describe(const listen_addr *la, const char *addr, char *out,
                     size_t outlen) {
  char host[INET6_ADDRSTRLEN] = "";
  if (la->family == AF_INET) {
    inet_ntop(AF_INET, &la->u.in4.sin_addr, host, sizeof host);
    snprintf(out, outlen, "%s:%u", host, ntohs(la->u.in4.sin_port));
  } else if (la->family == AF_INET6) {
    inet_ntop(AF_INET6, &la->u.in6.sin6_addr, host, sizeof host);
    snprintf(out, outlen, "[%s]:%u", host, ntohs(la->u.in6.sin6_port));
  } else {
    snprintf(out, outlen, "%s", addr);
  }
}

/* A socket file left by a process that is gone can be replaced; anything
 * else at the path (a live server, a regular file) is left alone. */
static int clear_stale_socket(const char *path, char *why, size_t whylen) {
  struct stat st;
  if (lstat(path, &st) != 0) return 0;
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(why, whylen, "%s exists and is not a socket", path);
    return CPROF_EADDRINUSE;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, whylen, "socket: %s", strerror(errno));
    return CPROF_ESYS;
  }
  struct sockaddr_un un = {.sun_family = AF_UNIX};
  strcpy(un.sun_path, path);
  int rc = connect(fd, (struct sockaddr *)&un, sizeof un);
  int saved = errno;
  close(fd);
  if (rc == 0) {
    snprintf(why, whylen, "%s: another server is listening there", path);
    return CPROF_EADDRINUSE;
  }
  if (saved != ECONNREFUSED || unlink(path) != 0) {
    snprintf(why, whylen, "%s: cannot replace the stale socket: %s", path,
             strerror(saved != ECONNREFUSED ? saved : errno));
    return CPROF_EADDRINUSE;
  }
  return 0;
}

/* Creates, binds and listens; returns the descriptor or a negative
 * cprof_err with the reason in why. A unix socket is made 0600 between
 * bind and listen, before any client can connect. */
static int open_listener(cprof_http *srv, const listen_addr *la,
                         const char *shown, char *why, size_t whylen) {
  int err;
  if (la->family == AF_UNIX &&
      (err = clear_stale_socket(la->u.un.sun_path, why, whylen)) != 0)
    return err;
  int fd = socket(la->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, whylen, "socket: %s", strerror(errno));
    return CPROF_ESYS;
  }
  int one = 1;
  if (la->family != AF_UNIX)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (la->family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, &la->u.sa, la->len) != 0) {
    int e = errno;
    snprintf(why, whylen, "cannot listen on %s: %s", shown, strerror(e));
    close(fd);
    return e == EADDRINUSE ? CPROF_EADDRINUSE : CPROF_ESYS;
  }
  if (la->family == AF_UNIX) {
    struct stat st;
    if (chmod(la->u.un.sun_path, 0600) != 0 ||
        stat(la->u.un.sun_path, &st) != 0) {
      snprintf(why, whylen, "%s: chmod 0600: %s", la->u.un.sun_path,
               strerror(errno));
      unlink(la->u.un.sun_path);
      close(fd);
      return CPROF_ESYS;
    }
    srv->unix_path = cprof__strdup(la->u.un.sun_path);
    srv->unix_dev = st.st_dev;
    srv->unix_ino = st.st_ino;
  }
  if (listen(fd, 64) != 0) {
    snprintf(why, whylen, "listen on %s: %s", shown, strerror(errno));
    close(fd);
    return CPROF_ESYS;
  }
  return fd;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)conn;
  cprof__guard_enter();
  request *rq = cprof__calloc(1, sizeof *rq);
  if (rq) {
    rq->srv = cls;
    rq->start_ns = cprof__mono_ns();
    size_t n = strnlen(uri, CPROF__HTTP_MAX_URI + 1);
    rq->uri_too_long = n > CPROF__HTTP_MAX_URI;
    if (rq->uri_too_long) n = CPROF__HTTP_MAX_URI;
    memcpy(rq->uri, uri, n);
  }
  cprof__guard_exit();
  return rq;
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **req_cls, enum MHD_RequestTerminationCode why) {
  (void)cls, (void)conn, (void)why;
  cprof__guard_enter();
  request *rq = *req_cls;
  if (rq) {
    cprof_buf_free(&rq->body);
    cprof__free(rq);
    *req_cls = NULL;
  }
  cprof__guard_exit();
}

typedef struct waiter {
  cprof_http *srv;
  int fd;
} waiter;

/* Sleeps on the connection itself: poll wakes early when the client
 * closes it (POLLRDHUP), so a profile stops as soon as its client leaves. */
static bool wait_connection(void *ctx, int ms) {
  waiter *w = ctx;
  if (atomic_load(&w->srv->stopping)) return false;
  struct pollfd p = {.fd = w->fd, .events = POLLRDHUP};
  int rc = poll(&p, 1, ms);
  if (atomic_load(&w->srv->stopping)) return false;
  return !(rc > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)));
}

static void free_body(void *p) { cprof__free(p); }

static enum MHD_Result respond(struct MHD_Connection *conn, request *rq,
                               const char *method) {
  cprof_http *srv = rq->srv;
  const union MHD_ConnectionInfo *ci =
      mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  waiter w = {srv, ci ? ci->connect_fd : -1};
  cprof__http_req req = {
      .method = method,
      .uri = rq->uri,
      .uri_too_long = rq->uri_too_long,
      .authorization = mhd.lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_AUTHORIZATION),
      .body = (const char *)rq->body.data,
      .body_len = rq->body.len,
      .body_too_large = rq->body_too_large,
      .wait = w.fd >= 0 ? wait_connection : NULL,
      .wait_ctx = &w,
  };
  cprof__http_resp resp;
  cprof__http_handle(&srv->opts, &req, &resp);
  /* Only the path goes to the log: the query is the client's, and may be
   * long; headers are never logged. */
  int plen = (int)strcspn(rq->uri, "?");
  if (resp.drop) {
    log_line(srv, "http: %s %.*s: client gone, abandoned", method,
             plen > 200 ? 200 : plen, rq->uri);
    cprof_buf_free(&resp.body);
    return MHD_NO;
  }
  size_t len = resp.body.len;
  struct MHD_Response *mr =
      len ? mhd.create_response_from_buffer_with_free_callback(
                len, resp.body.data, free_body)
          : mhd.create_response_from_buffer(0, (void *)"",
                                            MHD_RESPMEM_PERSISTENT);
  if (!mr) {
    cprof_buf_free(&resp.body);
    return MHD_NO;
  }
  if (!len) cprof_buf_free(&resp.body);
  mhd.add_response_header(mr, "X-Content-Type-Options", "nosniff");
  mhd.add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, resp.content_type);
  if (resp.disposition[0])
    mhd.add_response_header(mr, "Content-Disposition", resp.disposition);
  if (resp.go_pprof_error) mhd.add_response_header(mr, "X-Go-Pprof", "1");
  if (resp.www_authenticate)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (resp.allow)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_ALLOW, "GET, HEAD, POST");
  if (resp.location)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_LOCATION, resp.location);
  enum MHD_Result r = mhd.queue_response(conn, (unsigned)resp.status, mr);
  mhd.destroy_response(mr);
  log_line(srv, "http: %s %.*s -> %d (%zu bytes, %.1f ms)", method,
           plen > 200 ? 200 : plen, rq->uri, resp.status, len,
           (double)(cprof__mono_ns() - rq->start_ns) / 1e6);
  return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
  (void)cls, (void)url, (void)version;
  cprof__guard_enter();
  enum MHD_Result r = MHD_YES;
  request *rq = *req_cls;
  if (!rq) {
    r = MHD_NO; /* out of memory at the request line */
  } else if (!rq->headers_seen) {
    rq->headers_seen = true; /* the first call: headers only */
  } else if (*upload_size) {
    if (!rq->body_too_large &&
        rq->body.len + *upload_size <= CPROF__HTTP_MAX_BODY)
      rq->body_too_large =
          cprof__buf_append(&rq->body, upload, *upload_size) != 0;
    else
      rq->body_too_large = true;
    *upload_size = 0;
  } else {
    r = respond(conn, rq, method);
  }
  cprof__guard_exit();
  return r;
}

static int start(const cprof_http_config *cfg, cprof_http **out, char *why,
                 size_t whylen) {
  if (!cfg || !out) {
    snprintf(why, whylen, "NULL %s", cfg ? "out" : "config");
    return CPROF_EINVAL;
  }
  *out = NULL;
  const char *addr = cfg->addr ? cfg->addr : DEFAULT_ADDR;
  if (cfg->token) {
    bool good = *cfg->token != 0;
    for (const char *t = cfg->token; *t; t++) good &= *t > ' ' && *t < 0x7f;
    if (!good) {
      snprintf(why, whylen,
               "the token must be non-empty printable ASCII without spaces");
      return CPROF_EINVAL;
    }
  }
  if (cfg->max_cpu_seconds < 0) {
    snprintf(why, whylen, "max_cpu_seconds must not be negative");
    return CPROF_EINVAL;
  }
  listen_addr la;
  int err = parse_addr(addr, cfg->port, &la, why, whylen);
  if (err) return err;
  if (!la.loopback && !cfg->allow_remote) {
    snprintf(why, whylen,
             "refusing to listen on %s: not a loopback address (set "
             "allow_remote to serve profiles to other hosts)",
             addr);
    return CPROF_ENOTLOOPBACK;
  }

  if (cprof__dynload(&mhd_lib) != 0) {
    snprintf(why, whylen, "%s", mhd_lib.why);
    return CPROF_EUNSUPPORTED;
  }
  cprof_http *srv = cprof__calloc(1, sizeof *srv);
  if (!srv) return CPROF_ENOMEM;
  srv->logger = cfg->logger;
  srv->logger_ctx = cfg->logger_ctx;
  srv->opts.max_seconds = cfg->max_cpu_seconds
                              ? cfg->max_cpu_seconds
                              : CPROF__HTTP_DEFAULT_MAX_SECONDS;
  if (cfg->token && !(srv->token = cprof__strdup(cfg->token))) {
    cprof__free(srv);
    return CPROF_ENOMEM;
  }
  srv->opts.token = srv->token;

  char shown[128];
  describe(&la, addr, shown, sizeof shown);
  int fd = open_listener(srv, &la, shown, why, whylen);
  if (fd < 0) {
    err = fd;
    goto fail;
  }
  if (la.family != AF_UNIX) {
    listen_addr bound;
    socklen_t blen = sizeof bound.u;
    if (getsockname(fd, &bound.u.sa, &blen) == 0)
      srv->port = ntohs(la.family == AF_INET ? bound.u.in4.sin_port
                                             : bound.u.in6.sin6_port);
  }
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
                   MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG;
  if (la.family == AF_INET6) flags |= MHD_USE_IPv6;
  unsigned conns = cfg->max_connections ? cfg->max_connections
                                        : DEFAULT_CONNECTIONS;
  unsigned idle = cfg->idle_timeout_seconds ? cfg->idle_timeout_seconds
                                            : DEFAULT_IDLE_SECONDS;
  cprof__guard_enter();
  srv->daemon = mhd.start_daemon(
      flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
      mhd_log, srv, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_URI_LOG_CALLBACK,
      on_uri, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_CONNECTION_LIMIT, conns, MHD_OPTION_CONNECTION_TIMEOUT, idle,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
      MHD_OPTION_END);
  cprof__guard_exit();
  if (!srv->daemon) {
    snprintf(why, whylen, "cannot start the HTTP server on %s", shown);
    close(fd);
    err = CPROF_ESYS;
    goto fail;
  }
  log_line(srv, "http: serving /debug/pprof/ on %s (port %d)", shown,
           srv->port);
  /* Seed 003's Config: the mutex and block profiles cost something on
   * every contended lock, so the server turns them on only when asked, and
   * never lowers a rate the application set itself. */
  if (cfg->enable_mutex_profile && cprof_set_mutex_profile_fraction(-1) == 0)
    cprof_set_mutex_profile_fraction(CPROF__HTTP_MUTEX_FRACTION);
  if (cfg->enable_block_profile && cprof_block_profile_rate() <= 0)
    cprof_set_block_profile_rate(CPROF__HTTP_BLOCK_RATE);
  cprof__mark_enabled();
  *out = srv;
  return 0;

fail:
  if (srv->unix_path) unlink(srv->unix_path);
  cprof__free(srv->unix_path);
  cprof__free(srv->token);
  cprof__free(srv);
  return err;
}

int cprof_http_start(const cprof_http_config *cfg, cprof_http **out) {
  char why[256] = "";
  int err = start(cfg, out, why, sizeof why);
  if (err && cfg && cfg->logger) {
    char line[300];
    snprintf(line, sizeof line, "http: %s", why[0] ? why : cprof_strerror(err));
    cfg->logger(cfg->logger_ctx, line);
  } else if (err) {
    cprof__warn("http: %s", why[0] ? why : cprof_strerror(err));
  }
  return err;
}

int cprof_http_stop(cprof_http *srv) {
  if (!srv) return CPROF_EINVAL;
  atomic_store(&srv->stopping, true);
  cprof__guard_enter();
  mhd.stop_daemon(srv->daemon); /* closes the socket, joins the threads */
  cprof__guard_exit();
  struct stat st;
  if (srv->unix_path && lstat(srv->unix_path, &st) == 0 &&
      st.st_dev == srv->unix_dev && st.st_ino == srv->unix_ino)
    unlink(srv->unix_path);
  cprof__free(srv->unix_path);
  cprof__free(srv->token);
  cprof__free(srv);
  return 0;
}

int cprof_http_port(const cprof_http *srv) {
  return srv ? srv->port : CPROF_EINVAL;
}

/* The server CPROF_HTTP started; it lives as long as the process. */
static cprof_http *env_server;

void cprof__http_env_init(void) {
  const char *addr = cprof__env_str("CPROF_HTTP");
  if (!addr) return;
  cprof_http_config cfg = {.addr = addr,
                           .token = cprof__env_str("CPROF_HTTP_TOKEN")};
  long long v;
  const char *off = "HTTP endpoint disabled";
  if (getenv("CPROF_HTTP_ALLOW_REMOTE")) {
    if (!cprof__env_int("CPROF_HTTP_ALLOW_REMOTE", 0, 1, off, &v)) return;
    cfg.allow_remote = (int)v;
  }
  if (getenv("CPROF_HTTP_MAX_SECONDS")) {
    if (!cprof__env_int("CPROF_HTTP_MAX_SECONDS", 1, 86400, off, &v)) return;
    cfg.max_cpu_seconds = (int)v;
  }
  char why[256] = "";
  if (start(&cfg, &env_server, why, sizeof why) != 0) {
    cprof__warn("CPROF_HTTP=%.128s: %s; %s", addr, why, off);
    return;
  }
  /* The one line an operator needs, above all with port 0. No logger
   * afterwards: per-request lines would flood the program's stderr. */
  if (env_server->port)
    cprof__warn("serving /debug/pprof/ on %.128s (port %d)", addr,
                env_server->port);
  else
    cprof__warn("serving /debug/pprof/ on %.128s", addr);
}
