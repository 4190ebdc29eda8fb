/*
 * The HTTP server (see http.h): the listening socket, which cprof binds
 * itself so that a busy port or a refused address is reported by
 * cprof_http_start() and not later in a log; the accept thread, which
 * takes connections off that socket only while fewer than max_connections
 * are open (more wait in the kernel's backlog) and hands each to the
 * libmicrohttpd daemon (one thread per connection, so a 30-second profile
 * never holds up another request); the connection table and its deadlines
 * (a request must arrive whole within header_timeout_seconds, and a client
 * waiting in the backlog while every slot is taken evicts the connection
 * that has waited longest for its request); the limits on request size,
 * bodies and idle time; and the CPROF_HTTP environment variable.
 *
 * It must never log a request's headers (the bearer token travels in one),
 * never read a body before the request is admitted (token, Host, route),
 * never bind a non-loopback address without allow_remote, and never
 * unlink a file that is not a stale socket or its own. libmicrohttpd's
 * threads enter cprof's allocation guard for the length of each callback,
 * so the heap profiler does not sample the profiler's own work, and start
 * with every signal blocked, so the application's signals are never
 * delivered to them.
 *
 * libmicrohttpd 0.9.75 answers some malformed requests itself (a bad
 * Content-Length, headers that do not fit the connection's memory) and,
 * for the errors it finds once the headers are in, writes its status line
 * and headers twice. Its log callback runs on the connection's thread just
 * before it queues that answer; there cprof writes its own error answer,
 * once, and shuts the sending side, so libmicrohttpd's never leaves.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "source/lock_interpose.h"
#include "source/fds.h"
#include "base/dynload.h"
#include "base/env.h"
#include "sink/http.h"
#include "sink/tree.h"
#include "base/lock.h"
#include "base/mem.h"
#include "sink/profilez.h"
#include "sink/query.h"
#include "source/threads.h"

#define DEFAULT_ADDR "127.0.0.1:6060"
#define DEFAULT_CONNECTIONS 32
#define DEFAULT_IDLE_SECONDS 30
#define DEFAULT_HEADER_SECONDS 10
/* Per-connection memory for the request line, headers and buffers. */
#define CONNECTION_MEMORY (32 * 1024)
/* A connection that has been receiving its request for less than this is
 * never evicted for a client in the backlog. */
#define EVICT_MIN_AGE_NS 1000000000ll
/* An accepted connection libmicrohttpd has not started after this was
 * dropped by it (it closes a connection it cannot take without telling). */
#define PENDING_MAX_NS 10000000000ll
/* libmicrohttpd's own limit sits above cprof's, so the accept thread's
 * count, which drops a little before libmicrohttpd's, never meets it. */
#define MHD_LIMIT_SLACK 8
/* A connection whose request head has only partly arrived is looked at
 * again after this (the bytes already there keep its socket readable). */
#define REPEEK_NS 10000000ll

/* libmicrohttpd, loaded when the first server starts (dynload.h). */
#define MHD_FNS(X, v) \
  X(v, MHD_add_connection, add_connection) \
  X(v, MHD_add_response_header, add_response_header) \
  X(v, MHD_create_response_from_buffer, create_response_from_buffer) \
  X(v, MHD_create_response_from_buffer_with_free_callback, create_response_from_buffer_with_free_callback) \
  X(v, MHD_destroy_response, destroy_response) \
  X(v, MHD_get_connection_info, get_connection_info) \
  X(v, MHD_get_connection_values_n, get_connection_values_n) \
  X(v, MHD_queue_response, queue_response) \
  X(v, MHD_start_daemon, start_daemon) \
  X(v, MHD_stop_daemon, stop_daemon)
CPROF__DYNLIB_DEFINE(mhd, MHD_FNS, "libmicrohttpd.so.12")

typedef struct conn conn;

struct cprof_http {
  struct MHD_Daemon *daemon;
  int port;
  int listen_fd;
  dev_t listen_dev; /* the listener's identity, checked before each use */
  ino_t listen_ino;
  /* A pipe that wakes the accept thread: it polls wake_rd. */
  int wake_rd, wake_wr;
  dev_t wake_dev;
  ino_t wake_ino;
  /* Set, under mu, when one of the accept thread's descriptors was taken
   * over by the program (a raw close system call): from then on no
   * descriptor of this server is used, polled or closed again. */
  bool abandoned;
  bool detached; /* the accept thread ended on its own; nobody joins it */
  pid_t pid; /* the process that started it (not a fork child) */
  char *peek; /* the accept thread's view of a request head */
  pthread_t acceptor;
  char *unix_path; /* the socket file to remove at stop, or NULL */
  dev_t unix_dev;
  ino_t unix_ino;
  cprof_http *next_unix; /* the servers whose socket files exit removes */
  char *token;
  char *listen_host;
  cprof__http_opts opts;
  void (*logger)(void *ctx, const char *line);
  void *logger_ctx;
  atomic_bool stopping;
  /* The endpoint went on in another process of the tree (tree.h): its
   * socket file is that one's to remove. */
  atomic_bool handed_over;
  /* Bytes of request bodies buffered now, over all connections. */
  _Atomic size_t bodies;
  unsigned limit;
  int64_t header_ns, idle_ns;
  /* The connection table, under mu. nshut counts the connections the
   * accept thread has shut down that libmicrohttpd has not yet closed;
   * sleep_until is when the accept thread wakes next. */
  pthread_mutex_t mu;
  conn *conns;
  unsigned nconns, nshut;
  int64_t sleep_until;
};

/* What cprof keeps per request, from the request line to completion. It
 * lives in its connection and is freed with it, however the connection
 * ends: libmicrohttpd drops some requests (headers that overflow the
 * connection's memory) without a completion callback. Only the
 * connection's own thread touches it (and the close notification, once
 * that thread has ended). */
typedef struct request {
  char uri[CPROF__HTTP_MAX_URI + 1];
  bool uri_too_long;
  bool headers_seen;
  bool answered; /* a response is queued */
  bool injected; /* cprof answered an error libmicrohttpd found */
  bool keep_body; /* the route reads the body */
  size_t body_limit; /* the most of it kept */
  cprof_buf body;
  size_t reserved; /* bytes of the server's body budget held */
  bool body_too_large;
  bool bodies_full; /* the server's budget was spent */
  /* Header values, in libmicrohttpd's memory for the request's length. */
  const char *auth, *host;
  size_t auth_len, host_len;
  int64_t start_ns;
} request;

/* One client connection, from accept to close. */
struct conn {
  conn *next, *prev; /* srv->conns, under srv->mu */
  cprof_http *srv;
  int fd;
  /* Held by the accept thread, which waits for its request head before
   * handing it to libmicrohttpd: an idle or slow client costs no thread.
   * repeek_ns: when a head that has partly arrived is looked at again. */
  bool held;
  int64_t repeek_ns;
  struct MHD_Connection *mhd; /* NULL until libmicrohttpd started it */
  /* Under srv->mu: when it was accepted or its last answer completed, and
   * when its request must be in (0 while it is being answered). */
  int64_t since_ns, deadline_ns;
  bool shut; /* shut down by the accept thread */
  request rq;
};

/* The connection whose thread this is (libmicrohttpd runs one thread per
 * connection), for the log callback. */
static __thread conn *this_conn CPROF__TLS;

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
  char host[64]; /* as written in addr, without brackets */
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

static const char *reason_phrase(unsigned status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 413:
      return "Request Entity Too Large";
    case 414:
      return "Request-URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

/* Answers, on c's socket, an error libmicrohttpd found in the request
 * itself (status and its HTML message), in Go's serveError form, and shuts
 * the sending side: libmicrohttpd's own answer then fails to send and it
 * closes the connection. */
static void inject_error(conn *c, unsigned status, const char *mhd_msg) {
  const char *text;
  if (mhd_msg && strstr(mhd_msg, "Content-Length")) {
    status = 400;
    text = "invalid Content-Length header";
  } else if (status == 431) {
    text = "request line and headers too large (limit 32768 bytes, query "
           "parameters included)";
  } else {
    text = reason_phrase(status);
  }
  char out[512];
  int n = snprintf(out, sizeof out,
                   "HTTP/1.1 %u %s\r\nConnection: close\r\n"
                   "Content-Type: text/plain; charset=utf-8\r\n"
                   "X-Content-Type-Options: nosniff\r\nX-Go-Pprof: 1\r\n"
                   "Content-Length: %zu\r\n\r\n%s\n",
                   status, reason_phrase(status), strlen(text) + 1, text);
  if (n > 0 && (size_t)n < sizeof out)
    (void)!send(c->fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(c->fd, SHUT_WR);
  c->rq.injected = true;
  int plen = (int)strcspn(c->rq.uri, "?");
  log_line(c->srv, "http: %.*s -> %u (refused by libmicrohttpd: %s)",
           plen > 200 ? 200 : plen, c->rq.uri, status, text);
}

/* libmicrohttpd's message just before it queues an error answer of its
 * own (src/microhttpd/connection.c, transmit_error_response_len). */
static const char mhd_error_fmt[] =
    "Error processing request (HTTP response code is %u ('%s')). Closing "
    "connection.\n";

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  cprof_http *srv = cls;
  conn *c = this_conn;
  if (c && c->srv == srv && !c->rq.answered && !c->rq.injected &&
      strcmp(fmt, mhd_error_fmt) == 0) {
    va_list copy;
    va_copy(copy, ap);
    unsigned status = va_arg(copy, unsigned);
    const char *msg = va_arg(copy, const char *);
    va_end(copy);
    cprof__guard_enter();
    inject_error(c, status, msg);
    cprof__guard_exit();
    return;
  }
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
  snprintf(la->host, sizeof la->host, "%s", host);

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
  cprof__fd_begin();
  int fd = cprof__fd_adopt(
      socket(la->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0),
      CPROF__FD_ENDPOINT);
  cprof__fd_end();
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
    cprof__fd_close(fd);
    return e == EADDRINUSE ? CPROF_EADDRINUSE : CPROF_ESYS;
  }
  if (la->family == AF_UNIX) {
    struct stat st;
    if (chmod(la->u.un.sun_path, 0600) != 0 ||
        stat(la->u.un.sun_path, &st) != 0) {
      snprintf(why, whylen, "%s: chmod 0600: %s", la->u.un.sun_path,
               strerror(errno));
      unlink(la->u.un.sun_path);
      cprof__fd_close(fd);
      return CPROF_ESYS;
    }
    srv->unix_path = cprof__strdup(la->u.un.sun_path);
    srv->unix_dev = st.st_dev;
    srv->unix_ino = st.st_ino;
  }
  struct stat st;
  if (listen(fd, 64) != 0 || fstat(fd, &st) != 0) {
    snprintf(why, whylen, "listen on %s: %s", shown, strerror(errno));
    cprof__fd_close(fd);
    return CPROF_ESYS;
  }
  srv->listen_dev = st.st_dev;
  srv->listen_ino = st.st_ino;
  return fd;
}

/*
 * Socket files. A unix socket's file is removed when its server stops and,
 * for a server still running, when the process exits (exit() or a return
 * from main; a process killed by a signal leaves it behind, and the next
 * start replaces it as a stale socket). Either way only if the path still
 * names the socket this server created (same device and inode).
 */
static pthread_mutex_t unix_mu = PTHREAD_MUTEX_INITIALIZER;
static cprof_http *unix_servers;
static pthread_once_t unix_once = PTHREAD_ONCE_INIT;

static void unlink_own_socket(cprof_http *srv) {
  struct stat st;
  if (srv->unix_path && lstat(srv->unix_path, &st) == 0 &&
      st.st_dev == srv->unix_dev && st.st_ino == srv->unix_ino)
    unlink(srv->unix_path);
}

static void unlink_sockets_at_exit(void) {
  cprof__lock(&unix_mu);
  /* A fork child's exit leaves its parent's socket alone. */
  for (cprof_http *s = unix_servers; s; s = s->next_unix)
    if (s->pid == getpid() && !atomic_load(&s->handed_over))
      unlink_own_socket(s);
  cprof__unlock(&unix_mu);
}

static void register_exit_handler(void) { atexit(unlink_sockets_at_exit); }

static void track_socket(cprof_http *srv) {
  pthread_once(&unix_once, register_exit_handler);
  cprof__lock(&unix_mu);
  srv->next_unix = unix_servers;
  unix_servers = srv;
  cprof__unlock(&unix_mu);
}

static void untrack_socket(cprof_http *srv) {
  cprof__lock(&unix_mu);
  for (cprof_http **p = &unix_servers; *p; p = &(*p)->next_unix)
    if (*p == srv) {
      *p = srv->next_unix;
      break;
    }
  unlink_own_socket(srv);
  cprof__unlock(&unix_mu);
}

/*
 * The connection table. The accept thread adds a connection when it
 * accepts it, libmicrohttpd's start notification binds it to its
 * MHD_Connection, and the close notification removes it. Deadlines are
 * kept here and enforced by the accept thread, which shuts a late
 * connection down (libmicrohttpd's thread then sees the end of its input
 * and closes it); it only ever shuts down a socket that libmicrohttpd has
 * started and not yet closed, so never a descriptor that was reused.
 */

/* Called with srv->mu held. */
static void wake_acceptor(cprof_http *srv) {
  if (srv->abandoned) return;
  char one = 1;
  (void)!write(srv->wake_wr, &one, 1);
}

static void link_conn(cprof_http *srv, conn *c) {
  c->prev = NULL;
  c->next = srv->conns;
  if (srv->conns) srv->conns->prev = c;
  srv->conns = c;
  srv->nconns++;
}

static void unlink_conn(cprof_http *srv, conn *c) {
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  srv->nconns--;
  if (c->shut) srv->nshut--;
}

/* Arms c's deadline; the accept thread is woken if it sleeps past it.
 * Called with srv->mu held. */
static void set_deadline(cprof_http *srv, conn *c, int64_t deadline) {
  c->deadline_ns = deadline;
  if (deadline && deadline < srv->sleep_until) wake_acceptor(srv);
}

/* Releases the request's body and its share of the budget. */
static void end_request(conn *c) {
  request *rq = &c->rq;
  cprof_buf_free(&rq->body);
  if (rq->reserved) atomic_fetch_sub(&c->srv->bodies, rq->reserved);
  rq->reserved = 0;
}

static bool reserve_body(cprof_http *srv, request *rq, size_t n) {
  size_t cur = atomic_load(&srv->bodies);
  do {
    if (n > CPROF__HTTP_MAX_BODIES - cur) return false;
  } while (!atomic_compare_exchange_weak(&srv->bodies, &cur, cur + n));
  rq->reserved += n;
  return true;
}

static void on_connection(void *cls, struct MHD_Connection *mc,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  cprof_http *srv = cls;
  cprof__guard_enter();
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        mhd.get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    cprof__lock(&srv->mu);
    conn *c = srv->conns;
    while (c && (c->mhd || c->fd != fd)) c = c->next;
    if (!c && (c = cprof__calloc(1, sizeof *c)) != NULL) {
      c->srv = srv;
      c->fd = fd;
      c->since_ns = cprof__mono_ns();
      link_conn(srv, c);
    }
    if (c) {
      c->mhd = mc;
      set_deadline(srv, c, c->since_ns + srv->header_ns);
    }
    cprof__unlock(&srv->mu);
    *socket_context = c;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
    conn *c = *socket_context;
    end_request(c);
    cprof__lock(&srv->mu);
    bool was_full = srv->nconns >= srv->limit;
    unlink_conn(srv, c);
    if (was_full) wake_acceptor(srv);
    cprof__unlock(&srv->mu);
    cprof__free(c);
    *socket_context = NULL;
  }
  cprof__guard_exit();
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc) {
  (void)cls;
  cprof__guard_enter();
  const union MHD_ConnectionInfo *ci =
      mhd.get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn *c = ci ? ci->socket_context : NULL;
  if (c) {
    end_request(c);
    request *rq = &c->rq;
    *rq = (request){.start_ns = cprof__mono_ns()};
    size_t n = strnlen(uri, CPROF__HTTP_MAX_URI + 1);
    rq->uri_too_long = n > CPROF__HTTP_MAX_URI;
    if (rq->uri_too_long) n = CPROF__HTTP_MAX_URI;
    memcpy(rq->uri, uri, n);
    this_conn = c;
  }
  cprof__guard_exit();
  return c;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
                         enum MHD_RequestTerminationCode why) {
  cprof_http *srv = cls;
  (void)mc, (void)why;
  cprof__guard_enter();
  conn *c = *req_cls;
  if (c) {
    end_request(c);
    c->rq.answered = false;
    c->rq.headers_seen = false;
    c->rq.uri[0] = 0;
    /* The next request on this connection has the idle time to start
     * and the header time to arrive. */
    int64_t now = cprof__mono_ns();
    cprof__lock(&srv->mu);
    c->since_ns = now;
    set_deadline(srv, c, now + srv->idle_ns + srv->header_ns);
    cprof__unlock(&srv->mu);
    *req_cls = NULL;
  }
  cprof__guard_exit();
}

/* The request is in: no deadline while it is answered. */
static void request_received(conn *c) {
  cprof__lock(&c->srv->mu);
  c->deadline_ns = 0;
  cprof__unlock(&c->srv->mu);
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

static cprof__http_req make_req(conn *c, const char *method) {
  request *rq = &c->rq;
  /* An absolute-form target (GET http://host/debug/pprof/heap, which RFC
   * 9112 has servers accept, as Go's does): its authority stands for the
   * Host header, and its path and query are the request's. */
  const char *uri = rq->uri, *host = rq->host;
  size_t host_len = rq->host_len;
  if (uri) {
    size_t scheme = strncasecmp(uri, "http://", 7) == 0    ? 7
                    : strncasecmp(uri, "https://", 8) == 0 ? 8
                                                           : 0;
    if (scheme) {
      host = uri + scheme;
      host_len = strcspn(host, "/?#");
      uri = host + host_len;
      if (*uri != '/') uri = "/";
    }
  }
  return (cprof__http_req){
      .method = method,
      .uri = uri,
      .uri_too_long = rq->uri_too_long,
      .authorization = rq->auth,
      .authorization_len = rq->auth_len,
      .host = host,
      .host_len = host_len,
      .body = (const char *)rq->body.data,
      .body_len = rq->body.len,
      .body_too_large = rq->body_too_large,
  };
}

/* Queues resp (and frees its body). close asks for the connection to be
 * closed after it. */
static enum MHD_Result send_resp(struct MHD_Connection *mc, conn *c,
                                 const char *method, cprof__http_resp *resp,
                                 bool close) {
  cprof_http *srv = c->srv;
  request *rq = &c->rq;
  /* Only the path goes to the log: the query is the client's, and may be
   * long; headers are never logged. */
  int plen = (int)strcspn(rq->uri, "?");
  if (resp->drop) {
    log_line(srv, "http: %s %.*s: client gone, abandoned", method,
             plen > 200 ? 200 : plen, rq->uri);
    cprof_buf_free(&resp->body);
    return MHD_NO;
  }
  size_t len = resp->body.len;
  struct MHD_Response *mr =
      len ? mhd.create_response_from_buffer_with_free_callback(
                len, resp->body.data, free_body)
          : mhd.create_response_from_buffer(0, (void *)"",
                                            MHD_RESPMEM_PERSISTENT);
  if (!mr) {
    cprof_buf_free(&resp->body);
    return MHD_NO;
  }
  mhd.add_response_header(mr, "X-Content-Type-Options", "nosniff");
  if (resp->content_type)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
                            resp->content_type);
  if (resp->disposition[0])
    mhd.add_response_header(mr, "Content-Disposition", resp->disposition);
  if (resp->go_pprof_error) mhd.add_response_header(mr, "X-Go-Pprof", "1");
  if (resp->www_authenticate)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (resp->allow)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_ALLOW, "GET, HEAD, POST");
  if (resp->location)
    mhd.add_response_header(mr, MHD_HTTP_HEADER_LOCATION, resp->location);
  if (close) mhd.add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
  /* Header values may live in an empty body's memory (a redirect's
   * Location); libmicrohttpd has copied them now. */
  if (!len) cprof_buf_free(&resp->body);
  enum MHD_Result r = mhd.queue_response(mc, (unsigned)resp->status, mr);
  mhd.destroy_response(mr);
  if (r == MHD_YES) rq->answered = true;
  log_line(srv, "http: %s %.*s -> %d (%zu bytes, %.1f ms)", method,
           plen > 200 ? 200 : plen, rq->uri, resp->status, len,
           (double)(cprof__mono_ns() - rq->start_ns) / 1e6);
  return r;
}

/* Answers the request through the handler. */
static enum MHD_Result respond(struct MHD_Connection *mc, conn *c,
                               const char *method, bool close) {
  cprof_http *srv = c->srv;
  request_received(c);
  cprof__http_resp resp;
  if (c->rq.bodies_full) {
    memset(&resp, 0, sizeof resp);
    cprof__http_fail(&resp, 503,
                     "too many request bodies at once (limit %u bytes in "
                     "all); retry later",
                     CPROF__HTTP_MAX_BODIES);
    return send_resp(mc, c, method, &resp, true);
  }
  const union MHD_ConnectionInfo *ci =
      mhd.get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  waiter w = {srv, ci ? ci->connect_fd : -1};
  cprof__http_req req = make_req(c, method);
  req.wait = w.fd >= 0 ? wait_connection : NULL;
  req.wait_ctx = &w;
  cprof__http_handle(&srv->opts, &req, &resp);
  return send_resp(mc, c, method, &resp, close);
}

/* The headers of a request, as far as the framing and admission checks
 * need them: the first Authorization, Host and Content-Type values, and
 * every Content-Length and Transfer-Encoding. */
typedef struct header_scan {
  const char *auth, *host, *length, *encoding, *type, *expect;
  size_t auth_len, host_len, length_len, encoding_len, type_len, expect_len;
  int nhost, nlength, nencoding;
  const char *after_auth; /* the name of the header after Authorization */
} header_scan;

static bool is_header(const char *key, size_t len, const char *name) {
  return len == strlen(name) && strncasecmp(key, name, len) == 0;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind,
                                   const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
  header_scan *h = cls;
  (void)kind;
  if (!key || !value) return MHD_YES;
  if (h->auth && !h->after_auth) h->after_auth = key;
  if (is_header(key, key_size, MHD_HTTP_HEADER_AUTHORIZATION) && !h->auth) {
    h->auth = value;
    h->auth_len = value_size;
  } else if (is_header(key, key_size, MHD_HTTP_HEADER_HOST)) {
    if (!h->nhost++) h->host = value, h->host_len = value_size;
  } else if (is_header(key, key_size, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
    if (!h->nlength++) h->length = value, h->length_len = value_size;
  } else if (is_header(key, key_size, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
    if (!h->nencoding++) h->encoding = value, h->encoding_len = value_size;
  } else if (is_header(key, key_size, MHD_HTTP_HEADER_CONTENT_TYPE)) {
    if (!h->type) h->type = value, h->type_len = value_size;
  } else if (is_header(key, key_size, MHD_HTTP_HEADER_EXPECT)) {
    if (!h->expect) h->expect = value, h->expect_len = value_size;
  }
  return MHD_YES;
}

/* Whether the comma-separated list v[0..n) has token (any case), as Go's
 * hasToken reads an Expect header. */
static bool has_token(const char *v, size_t n, const char *token) {
  size_t tlen = strlen(token);
  for (size_t i = 0; i < n;) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t s = i;
    while (i < n && v[i] != ',') i++;
    size_t e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    if (e - s == tlen && strncasecmp(v + s, token, tlen) == 0) return true;
  }
  return false;
}

/* The framing checks: a Content-Length must be one decimal number, and
 * a request has a Content-Length or a Transfer-Encoding (chunked), never
 * both, since two readers could disagree on where the body ends. Returns
 * the status with the reason in *why, or 0 with the announced length
 * (0 for none) and whether the body is chunked. */
static int check_framing(const header_scan *h, uint64_t *length,
                         bool *chunked, const char **why) {
  *length = 0;
  *chunked = false;
  if (h->nhost > 1) {
    *why = "more than one Host header";
    return 400;
  }
  if (h->nlength > 1) {
    *why = "more than one Content-Length header";
    return 400;
  }
  if (h->nlength && h->nencoding) {
    *why = "both Content-Length and Transfer-Encoding";
    return 400;
  }
  if (h->nencoding) {
    if (h->nencoding > 1 || h->encoding_len != 7 ||
        strncasecmp(h->encoding, "chunked", 7) != 0) {
      *why = "unsupported transfer encoding";
      return 501;
    }
    *chunked = true;
  }
  if (h->nlength) {
    uint64_t v = 0;
    bool good = h->length_len > 0 && h->length_len <= 19;
    for (size_t i = 0; good && i < h->length_len; i++) {
      good = h->length[i] >= '0' && h->length[i] <= '9';
      v = v * 10 + (uint64_t)(h->length[i] - '0');
    }
    if (!good) {
      *why = "invalid Content-Length header";
      return 400;
    }
    *length = v;
  }
  return 0;
}

/* The first call, with the headers in and none of the body read: framing,
 * admission and the body's size are checked now. An answer queued here
 * makes libmicrohttpd close the connection without reading the body. */
static enum MHD_Result first_call(struct MHD_Connection *mc, conn *c,
                                  const char *method) {
  cprof_http *srv = c->srv;
  request *rq = &c->rq;
  rq->headers_seen = true;
  header_scan h = {0};
  mhd.get_connection_values_n(mc, MHD_HEADER_KIND, scan_header, &h);
  /* libmicrohttpd 0.9.75 measures a header value with strlen, so a value
   * with a NUL inside ("Bearer <token>\0junk") looks like its first part.
   * It parses the headers where they were received, turning each line's
   * CR LF (or LF) into one or two NULs, so the next header's name starts
   * one or two bytes after the value's end, and after the last header the
   * byte past the first NUL is a NUL too. Anything else means the client's
   * NUL ended the value early: it is then counted in the value, which no
   * token matches. (Only a NUL right before the line's end, after the
   * whole token, goes unseen; nothing follows it to smuggle.) */
  if (h.auth) {
    uintptr_t end = (uintptr_t)(h.auth + h.auth_len);
    bool nul = h.after_auth
                   ? (uintptr_t)h.after_auth - end - 1 > 1
                   : h.auth[h.auth_len + 1] != 0;
    if (nul) h.auth_len++;
  }
  rq->auth = h.auth;
  rq->auth_len = h.auth_len;
  rq->host = h.host;
  rq->host_len = h.host_len;

  cprof__http_resp resp;
  uint64_t length;
  bool chunked;
  const char *why = NULL;
  int status = check_framing(&h, &length, &chunked, &why);
  if (status) {
    request_received(c);
    memset(&resp, 0, sizeof resp);
    cprof__http_fail(&resp, status, "%s", why);
    return send_resp(mc, c, method, &resp, true);
  }
  /* Go's server, before any handler: an expectation other than
   * 100-continue (which libmicrohttpd answers) cannot be met: 417, no
   * body, and the connection closed. */
  if (h.expect_len && !has_token(h.expect, h.expect_len, "100-continue")) {
    request_received(c);
    memset(&resp, 0, sizeof resp);
    resp.status = 417;
    return send_resp(mc, c, method, &resp, true);
  }
  cprof__http_req req = make_req(c, method);
  if (!cprof__http_admit(&srv->opts, &req, &resp)) {
    request_received(c);
    return send_resp(mc, c, method, &resp, true);
  }
  rq->keep_body = cprof__http_wants_body(&req);
  rq->body_limit = CPROF__HTTP_MAX_BODY;
  /* Go's r.FormValue reads an urlencoded POST body as parameters, on any
   * route: such a body is kept too, within the query's limit. */
  if (!rq->keep_body && strcmp(method, "POST") == 0 && h.type &&
      cprof__is_form_type(h.type, h.type_len)) {
    rq->keep_body = true;
    rq->body_limit = CPROF__QUERY_MAX_LEN;
  }
  if (!rq->keep_body)
    /* A body nobody reads is not waited for. */
    return length || chunked ? respond(mc, c, method, true) : MHD_YES;
  if (length > rq->body_limit) {
    rq->body_too_large = true;
    return respond(mc, c, method, true);
  }
  if (length && !reserve_body(srv, rq, (size_t)length)) {
    rq->bodies_full = true;
    return respond(mc, c, method, true);
  }
  return MHD_YES;
}

/* A piece of the body: kept within the request's and the server's limits
 * when the route reads it, dropped otherwise. */
static void take_body(conn *c, const char *data, size_t n) {
  request *rq = &c->rq;
  if (!rq->keep_body || rq->body_too_large || rq->bodies_full) return;
  size_t want = rq->body.len + n;
  if (want > rq->body_limit) {
    rq->body_too_large = true;
  } else if (want > rq->reserved &&
             !reserve_body(c->srv, rq, want - rq->reserved)) {
    rq->bodies_full = true;
  } else if (cprof__buf_append(&rq->body, data, n) != 0) {
    rq->body_too_large = true;
  }
  if (rq->body_too_large || rq->bodies_full) {
    size_t held = rq->reserved;
    cprof_buf_free(&rq->body);
    rq->reserved = 0;
    if (held) atomic_fetch_sub(&c->srv->bodies, held);
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
  (void)cls, (void)url, (void)version;
  cprof__guard_enter();
  enum MHD_Result r = MHD_YES;
  conn *c = *req_cls;
  if (!c || c->rq.injected) {
    r = MHD_NO; /* no memory at the request line, or already answered */
  } else if (!c->rq.headers_seen) {
    r = first_call(mc, c, method);
  } else if (*upload_size) {
    take_body(c, upload, *upload_size);
    *upload_size = 0;
  } else {
    /* A refused body (too large, or over the budget) ends the connection
     * too. */
    r = respond(mc, c, method, c->rq.body_too_large || c->rq.bodies_full);
  }
  cprof__guard_exit();
  return r;
}

/*
 * The accept thread. It accepts while fewer than limit connections are
 * open, so more clients wait in the kernel's backlog, and holds each new
 * connection in its own poll set until the request head has arrived
 * (looked at with MSG_PEEK, nothing consumed), only then handing it to
 * libmicrohttpd, which starts a thread for it: idle and slow clients cost
 * no thread. It closes each held connection whose head is late and shuts
 * down each handed one whose request is late; and, while every slot is
 * taken and a client waits, closes or shuts down the connection that has
 * waited longest for its request (at least EVICT_MIN_AGE_NS), so clients
 * that send slowly cannot keep the others out. Connections being answered
 * are never touched. Before each round it checks that its listener and
 * wake pipe are still the files it opened; when one is not (the program
 * closed it with a raw system call and opened something else there), it
 * abandons the server (see abandon).
 */

static void shut_conn(cprof_http *srv, conn *c) {
  shutdown(c->fd, SHUT_RDWR);
  c->shut = true;
  srv->nshut++;
}

/* Closes a held connection (the accept thread's own). Called with srv->mu
 * held. */
static void drop_held(cprof_http *srv, conn *c) {
  unlink_conn(srv, c);
  cprof__fd_close(c->fd);
  cprof__free(c);
}

/* Closes the held connections whose head is late, shuts down the handed
 * ones whose request is late and drops those libmicrohttpd never started;
 * *wake_at becomes the next deadline. Returns how many it closed or shut.
 * Called with srv->mu held. */
static unsigned reap(cprof_http *srv, int64_t now, int64_t *wake_at) {
  unsigned shut = 0;
  for (conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (c->held) {
      int64_t deadline = c->since_ns + srv->header_ns;
      if (deadline <= now) {
        drop_held(srv, c);
        shut++;
      } else if (deadline < *wake_at) {
        *wake_at = deadline;
      }
    } else if (!c->mhd) {
      if (now - c->since_ns >= PENDING_MAX_NS) {
        unlink_conn(srv, c);
        cprof__free(c);
      } else if (c->since_ns + PENDING_MAX_NS < *wake_at) {
        *wake_at = c->since_ns + PENDING_MAX_NS;
      }
    } else if (!c->shut && c->deadline_ns) {
      if (c->deadline_ns <= now) {
        shut_conn(srv, c);
        shut++;
      } else if (c->deadline_ns < *wake_at) {
        *wake_at = c->deadline_ns;
      }
    }
  }
  return shut;
}

/* Closes or shuts down the connection that has waited longest for its
 * request, if it has waited EVICT_MIN_AGE_NS; else *wake_at becomes the
 * time it will have. Called with srv->mu held. */
static bool evict(cprof_http *srv, int64_t now, int64_t *wake_at) {
  conn *oldest = NULL;
  for (conn *c = srv->conns; c; c = c->next)
    if ((c->held || (c->mhd && !c->shut && c->deadline_ns)) &&
        (!oldest || c->since_ns < oldest->since_ns))
      oldest = c;
  if (!oldest) return false;
  if (oldest->since_ns + EVICT_MIN_AGE_NS > now) {
    if (oldest->since_ns + EVICT_MIN_AGE_NS < *wake_at)
      *wake_at = oldest->since_ns + EVICT_MIN_AGE_NS;
    return false;
  }
  if (oldest->held)
    drop_held(srv, oldest);
  else
    shut_conn(srv, oldest);
  return true;
}

/* Accepts one connection and holds it until its request head is in.
 * Returns 1 when it did, 0 when nobody waits, -1 when out of descriptors
 * or memory. */
static int accept_one(cprof_http *srv) {
  cprof__fd_begin();
  int fd = cprof__fd_adopt(
      accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC),
      CPROF__FD_ENDPOINT);
  int e = errno;
  cprof__fd_end();
  if (fd < 0) {
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) return -1;
    /* EAGAIN, or a client that left before it was accepted. */
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR ? 0 : 1;
  }
  conn *c = cprof__calloc(1, sizeof *c);
  if (!c) {
    cprof__fd_close(fd);
    return -1;
  }
  c->srv = srv;
  c->fd = fd;
  c->held = true;
  c->since_ns = cprof__mono_ns();
  cprof__lock(&srv->mu);
  /* A connection libmicrohttpd closed without starting it left its
   * descriptor, which accept just got again. */
  for (conn *o = srv->conns; o; o = o->next)
    if (!o->mhd && !o->held && o->fd == fd) {
      unlink_conn(srv, o);
      cprof__free(o);
      break;
    }
  link_conn(srv, c);
  cprof__unlock(&srv->mu);
  return 1;
}

/* Hands a held connection whose request head is in to libmicrohttpd. */
static void hand_over(cprof_http *srv, conn *c) {
  union {
    struct sockaddr sa;
    struct sockaddr_storage ss;
  } a;
  socklen_t alen = sizeof a;
  if (getpeername(c->fd, &a.sa, &alen) != 0 || alen == 0) {
    memset(&a, 0, sizeof a);
    a.sa.sa_family = (sa_family_t)(srv->unix_path ? AF_UNIX : AF_INET);
    alen = sizeof a.sa.sa_family;
  }
  cprof__lock(&srv->mu);
  c->held = false;
  cprof__unlock(&srv->mu);
  if (mhd.add_connection(srv->daemon, c->fd, &a.sa, alen) != MHD_YES) {
    /* libmicrohttpd closed the socket; it never started it. */
    cprof__lock(&srv->mu);
    unlink_conn(srv, c);
    cprof__unlock(&srv->mu);
    cprof__free(c);
  }
}

/* Whether buf holds a whole request head (its blank line). */
static bool head_complete(const char *buf, size_t n) {
  for (size_t i = 0; i + 1 < n; i++)
    if (buf[i] == '\n' &&
        (buf[i + 1] == '\n' ||
         (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n')))
      return true;
  return false;
}

/* A held connection's socket is readable: hands it over when its request
 * head is in (or as much as a connection may hold, or the client has shut
 * its side), closes it when the client left without a byte, and otherwise
 * looks again after REPEEK_NS. */
static void look(cprof_http *srv, conn *c, short revents, int64_t now) {
  if (revents & POLLNVAL) {
    /* Closed under cprof by a raw system call: the number is not cprof's
     * any more, and is left alone. */
    cprof__lock(&srv->mu);
    unlink_conn(srv, c);
    cprof__unlock(&srv->mu);
    cprof__free(c);
    return;
  }
  ssize_t n = recv(c->fd, srv->peek, CONNECTION_MEMORY,
                   MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n <= 0) {
    cprof__lock(&srv->mu);
    drop_held(srv, c);
    cprof__unlock(&srv->mu);
    return;
  }
  if (head_complete(srv->peek, (size_t)n) || n == CONNECTION_MEMORY ||
      (revents & (POLLRDHUP | POLLHUP | POLLERR))) {
    hand_over(srv, c);
    return;
  }
  c->repeek_ns = now + REPEEK_NS;
}

/* Whether fd is still the file (device, inode) it was. */
static bool same_file(int fd, dev_t dev, ino_t ino) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* The program took one of the accept thread's descriptors (closed it with
 * a raw system call, which no interposer sees). The server is abandoned:
 * none of its descriptors is used, polled or closed again, whichever of
 * them the program may hold now; the held connections are forgotten; one
 * line says so. Returns with nothing left to do on this thread. */
static void abandon(cprof_http *srv) {
  cprof__lock(&srv->mu);
  srv->abandoned = true;
  /* Unless a stop is already under way (it joins), nobody will join this
   * thread: the server CPROF_HTTP started is never stopped. */
  if (!atomic_load(&srv->stopping)) {
    srv->detached = true;
    pthread_detach(pthread_self());
  }
  for (conn *c = srv->conns, *next; c; c = next) {
    next = c->next;
    if (c->held) {
      unlink_conn(srv, c);
      cprof__free(c);
    }
  }
  cprof__unlock(&srv->mu);
  cprof__warn("http: the program closed the endpoint's descriptors (a raw "
              "close system call) and may be using their numbers; HTTP "
              "endpoint on port %d stopped",
              srv->port);
  log_line(srv, "http: endpoint stopped: its descriptors were taken over");
}

static void *accept_main(void *arg) {
  cprof_http *srv = arg;
  bool waiting = false; /* a client waits while every slot is taken */
  int64_t backoff_until = 0;
  struct pollfd *p = cprof__calloc(srv->limit + 2, sizeof *p);
  conn **held = cprof__calloc(srv->limit + 1, sizeof *held);
  if (!p || !held) {
    /* Without its poll set the thread cannot hold connections: it
     * stops accepting, and connections wait in the backlog until stop. */
    cprof__free(p);
    cprof__free(held);
    return NULL;
  }
  for (;;) {
    if (!same_file(srv->listen_fd, srv->listen_dev, srv->listen_ino) ||
        !same_file(srv->wake_rd, srv->wake_dev, srv->wake_ino)) {
      abandon(srv);
      break;
    }
    int64_t now = cprof__mono_ns(), wake_at = INT64_MAX;
    cprof__lock(&srv->mu);
    if (atomic_load(&srv->stopping)) {
      cprof__unlock(&srv->mu);
      break;
    }
    unsigned late = reap(srv, now, &wake_at), evicted = 0;
    bool room = srv->nconns < srv->limit && now >= backoff_until;
    bool watch = room;
    if (srv->nconns < srv->limit) waiting = false; /* it will be accepted */
    if (srv->nconns >= srv->limit && srv->nconns - srv->nshut >= srv->limit) {
      if (!waiting)
        watch = true;
      else if (evict(srv, now, &wake_at))
        evicted = 1, waiting = false;
    }
    if (!room && backoff_until > now && backoff_until < wake_at)
      wake_at = backoff_until;
    /* The held connections to watch; one that has part of its head is
     * watched again at its repeek time. */
    unsigned nheld = 0;
    for (conn *c = srv->conns; c && nheld < srv->limit; c = c->next) {
      if (!c->held) continue;
      if (c->repeek_ns > now) {
        if (c->repeek_ns < wake_at) wake_at = c->repeek_ns;
        continue;
      }
      held[nheld++] = c;
    }
    srv->sleep_until = wake_at;
    cprof__unlock(&srv->mu);
    if (late)
      log_line(srv,
               "http: closed %u connection(s) whose request took over %lld s",
               late, (long long)(srv->header_ns / 1000000000));
    if (evicted)
      log_line(srv, "http: all %u connections taken; closed the one waiting "
               "longest for its request", srv->limit);
    if (room) {
      int got = accept_one(srv);
      if (got > 0) continue;
      if (got < 0) {
        backoff_until = now + 100000000;
        continue;
      }
    }
    p[0] = (struct pollfd){.fd = srv->wake_rd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = watch ? srv->listen_fd : -1,
                           .events = POLLIN};
    for (unsigned i = 0; i < nheld; i++)
      p[2 + i] = (struct pollfd){.fd = held[i]->fd,
                                 .events = POLLIN | POLLRDHUP};
    int timeout = -1;
    if (wake_at != INT64_MAX) {
      int64_t ms = (wake_at - cprof__mono_ns() + 999999) / 1000000;
      timeout = ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
    }
    int rc = poll(p, 2 + nheld, timeout);
    if (rc <= 0) continue;
    if ((p[0].revents | p[1].revents) & POLLNVAL) continue; /* checked above */
    if (p[0].revents & POLLIN) {
      char buf[64];
      while (read(srv->wake_rd, buf, sizeof buf) == (ssize_t)sizeof buf) {
      }
    }
    if (watch && !room && (p[1].revents & POLLIN)) waiting = true;
    now = cprof__mono_ns();
    for (unsigned i = 0; i < nheld; i++)
      if (p[2 + i].revents) look(srv, held[i], p[2 + i].revents, now);
  }
  cprof__free(p);
  cprof__free(held);
  return NULL;
}

/* Frees what start() set up so far; srv's listener, daemon and accept
 * thread must already be gone. */
static void free_server(cprof_http *srv) {
  if (srv->unix_path) untrack_socket(srv);
  while (srv->conns) {
    conn *c = srv->conns;
    unlink_conn(srv, c);
    end_request(c);
    if (c->held && !srv->abandoned) cprof__fd_close(c->fd);
    cprof__free(c);
  }
  if (!srv->abandoned) {
    if (srv->wake_rd >= 0) cprof__fd_close(srv->wake_rd);
    if (srv->wake_wr >= 0) cprof__fd_close(srv->wake_wr);
  }
  pthread_mutex_destroy(&srv->mu);
  cprof__free(srv->peek);
  cprof__free(srv->unix_path);
  cprof__free(srv->listen_host);
  cprof__free(srv->token);
  cprof__free(srv);
}

/* An inherited listening socket: a root's, handed to its heir (see
 * env_adopt); the socket is bound and listening already, and
 * its file, for a unix socket, is the heir's to remove now. */
static int adopt_listener(cprof_http *srv, const listen_addr *la, int fd,
                          char *why, size_t whylen) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    snprintf(why, whylen, "the inherited listener is not a socket");
    cprof__fd_close(fd);
    return CPROF_ESYS;
  }
  srv->listen_dev = st.st_dev;
  srv->listen_ino = st.st_ino;
  struct stat fst;
  if (la->family == AF_UNIX && lstat(la->u.un.sun_path, &fst) == 0 &&
      S_ISSOCK(fst.st_mode)) {
    srv->unix_path = cprof__strdup(la->u.un.sun_path);
    srv->unix_dev = fst.st_dev;
    srv->unix_ino = fst.st_ino;
  }
  return fd;
}

static int start_on(const cprof_http_config *cfg, int inherited,
                    cprof_http **out, char *why, size_t whylen);

static int start(const cprof_http_config *cfg, cprof_http **out, char *why,
                 size_t whylen) {
  return start_on(cfg, -1, out, why, whylen);
}

/* start, on the listening socket inherited when it is >= 0. */
static int start_on(const cprof_http_config *cfg, int inherited,
                    cprof_http **out, char *why, size_t whylen) {
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
  pthread_mutex_init(&srv->mu, NULL);
  /* An inherited listener is the server's from here: closed on failure. */
  srv->listen_fd = inherited;
  srv->wake_rd = srv->wake_wr = -1;
  srv->pid = getpid();
  srv->sleep_until = INT64_MAX;
  srv->logger = cfg->logger;
  srv->logger_ctx = cfg->logger_ctx;
  srv->opts.max_seconds = cfg->max_cpu_seconds
                              ? cfg->max_cpu_seconds
                              : CPROF__HTTP_DEFAULT_MAX_SECONDS;
  srv->limit = cfg->max_connections ? cfg->max_connections
                                    : DEFAULT_CONNECTIONS;
  unsigned idle = cfg->idle_timeout_seconds ? cfg->idle_timeout_seconds
                                            : DEFAULT_IDLE_SECONDS;
  unsigned header = cfg->header_timeout_seconds ? cfg->header_timeout_seconds
                                                : DEFAULT_HEADER_SECONDS;
  srv->idle_ns = (int64_t)idle * 1000000000;
  srv->header_ns = (int64_t)header * 1000000000;
  err = CPROF_ENOMEM;
  if (cfg->token && !(srv->token = cprof__strdup(cfg->token))) goto fail;
  srv->opts.token = srv->token;
  /* On loopback, the Host header must say so (DNS rebinding); a unix
   * socket has no names to rebind. */
  srv->opts.check_host = la.family != AF_UNIX && la.loopback;
  if (srv->opts.check_host && !(srv->listen_host = cprof__strdup(la.host)))
    goto fail;
  srv->opts.listen_host = srv->listen_host;
  if (!(srv->peek = cprof__malloc(CONNECTION_MEMORY))) goto fail;
  /* A pipe rather than an eventfd: each pipe is a file of its own, so
   * the accept thread can tell it from one the program put at its number. */
  int wake[2];
  struct stat wst;
  cprof__fd_begin();
  int prc = pipe2(wake, O_NONBLOCK | O_CLOEXEC);
  if (prc == 0) {
    srv->wake_rd = cprof__fd_adopt(wake[0], CPROF__FD_ENDPOINT);
    srv->wake_wr = cprof__fd_adopt(wake[1], CPROF__FD_ENDPOINT);
  }
  int perr = errno;
  cprof__fd_end();
  if (prc != 0 || fstat(srv->wake_rd, &wst) != 0) {
    snprintf(why, whylen, "pipe: %s", strerror(prc != 0 ? perr : errno));
    err = CPROF_ESYS;
    goto fail;
  }
  srv->wake_dev = wst.st_dev;
  srv->wake_ino = wst.st_ino;

  char shown[128];
  describe(&la, addr, shown, sizeof shown);
  int fd = inherited >= 0
               ? adopt_listener(srv, &la, inherited, why, whylen)
               : open_listener(srv, &la, shown, why, whylen);
  if (fd < 0) srv->listen_fd = -1;
  if (fd < 0) {
    err = fd;
    goto fail;
  }
  srv->listen_fd = fd;
  if (srv->unix_path) track_socket(srv);
  if (la.family != AF_UNIX) {
    listen_addr bound;
    socklen_t blen = sizeof bound.u;
    if (getsockname(fd, &bound.u.sa, &blen) == 0)
      srv->port = ntohs(la.family == AF_INET ? bound.u.in4.sin_port
                                             : bound.u.in6.sin6_port);
  }
  /* cprof accepts; libmicrohttpd gets each connection from the accept
   * thread (MHD_add_connection) and never sees the listening socket. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
                   MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
  /* libmicrohttpd's threads inherit this thread's signal mask: with every
   * signal blocked here, none of the application's signals (a SIGTERM it
   * waits for with sigwait, say) is ever delivered to one of them. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  cprof__guard_enter();
  /* The descriptors libmicrohttpd makes for itself (its inter-thread
   * channel) are the endpoint's too. */
  cprof__fd_capture(CPROF__FD_ENDPOINT);
  srv->daemon = mhd.start_daemon(
      flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
      mhd_log, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
      MHD_OPTION_CONNECTION_LIMIT, srv->limit + MHD_LIMIT_SLACK,
      MHD_OPTION_CONNECTION_TIMEOUT, idle, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)CONNECTION_MEMORY,
      /* The deepest requests (the first profile, which loads and runs libdw
       * to symbolize, then gzips; a /symbol of 4000 addresses) touch at
       * most 140 KiB of it. */
      MHD_OPTION_THREAD_STACK_SIZE, (size_t)CPROF__THREAD_STACK,
      MHD_OPTION_END);
  cprof__fd_capture(0);
  cprof__guard_exit();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!srv->daemon) {
    snprintf(why, whylen, "cannot start the HTTP server on %s", shown);
    err = CPROF_ESYS;
    goto fail;
  }
  int rc = cprof__thread_spawn(&srv->acceptor, accept_main, srv,
                               "cprof-http");
  if (rc != 0) {
    snprintf(why, whylen, "cannot start the accept thread: %s", strerror(rc));
    cprof__guard_enter();
    mhd.stop_daemon(srv->daemon);
    cprof__guard_exit();
    err = CPROF_ESYS;
    goto fail;
  }
  log_line(srv, "http: serving /debug/pprof/ on %s (port %d)", shown,
           srv->port);
  cprof__http_handler_init();
  /* The processes this one forks from now on are served here too. */
  if (cprof__tree_root(cprof__http_serve_local) != 0)
    log_line(srv, "http: the process tree is off: %s",
             cprof_strerror(CPROF_ESYS));
  /* Seed 003's Config: the mutex and block profiles cost something on
   * every contended lock, so the server turns them on only when asked, and
   * never lowers a rate the application set itself. */
  if (cfg->enable_mutex_profile && cprof_set_mutex_profile_fraction(-1) == 0)
    cprof_set_mutex_profile_fraction(CPROF__HTTP_MUTEX_FRACTION);
  if (cfg->enable_block_profile && cprof_block_profile_rate() <= 0)
    cprof_set_block_profile_rate(CPROF__HTTP_BLOCK_RATE);
  cprof__mark_enabled(true);
  *out = srv;
  return 0;

fail:
  if (srv->listen_fd >= 0) cprof__fd_close(srv->listen_fd);
  free_server(srv); /* removes a socket file it bound */
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
  /* In a fork child the server's threads do not exist and its
   * descriptors were closed at the fork: nothing is left to stop, and
   * libmicrohttpd's state (its threads' locks) is not touched. */
  if (srv->pid != getpid()) return 0;
  atomic_store(&srv->stopping, true);
  cprof__lock(&srv->mu);
  bool detached = srv->detached;
  wake_acceptor(srv);
  cprof__unlock(&srv->mu);
  if (!detached) cprof__join(srv->acceptor, NULL);
  if (srv->abandoned) {
    /* libmicrohttpd's stop would write to its channel and close its
     * connections, numbers the program may hold now: the daemon is left
     * as it is. */
    free_server(srv);
    return 0;
  }
  cprof__fd_close(srv->listen_fd);
  cprof__guard_enter();
  mhd.stop_daemon(srv->daemon); /* closes the connections, joins threads */
  cprof__guard_exit();
  free_server(srv);
  return 0;
}

int cprof_http_port(const cprof_http *srv) {
  return srv ? srv->port : CPROF_EINVAL;
}

/* The server CPROF_HTTP started; it lives as long as the process. */
static cprof_http *env_server;

/* Starts the CPROF_HTTP server, on the inherited listening socket when it
 * is >= 0 (a root's heir); on failure one line says why and, with an
 * inherited socket, closes it. */
static void env_start(int inherited);

void cprof__http_env_init(void) { env_start(-1); }

/* The heir of a root that exits (tree.c): the CPROF_HTTP endpoint goes on
 * here, on the root's listening socket, with the settings the root read
 * (they are in this process's memory too, copied at the fork). */
static void env_adopt(int listen_fd) {
  env_server = NULL; /* the root's, whose threads are not this process's */
  env_start(listen_fd);
}

/* Both run where the tree hands over, maybe in a signal handler: the
 * server's lock is tried, never waited for (no handover without it). */
static int env_listener(void) {
  cprof_http *srv = env_server;
  if (!srv || srv->pid != getpid() || cprof__trylock(&srv->mu) != 0)
    return -1;
  int fd = srv->abandoned || atomic_load(&srv->stopping) ? -1 : srv->listen_fd;
  cprof__unlock(&srv->mu);
  return fd;
}

static void env_handed_over(void) {
  cprof_http *srv = env_server;
  if (!srv || srv->pid != getpid()) return;
  /* The heir removes the socket file at its exit, not this process; the
   * accept thread stops taking connections, which the heir's takes. */
  atomic_store(&srv->handed_over, true);
  atomic_store(&srv->stopping, true);
  if (cprof__trylock(&srv->mu) == 0) {
    wake_acceptor(srv);
    cprof__unlock(&srv->mu);
  }
}

static void env_start(int inherited) {
  const char *addr = cprof__env_str("CPROF_HTTP");
  if (!addr) {
    if (inherited >= 0) cprof__fd_close(inherited);
    return;
  }
  const char *off = "HTTP endpoint disabled";
  /* An empty token is a mistake (a variable set from an empty secret),
   * never a request to serve without authentication. */
  const char *token = cprof__env_get("CPROF_HTTP_TOKEN");
  if (token && !*token) {
    cprof__warn("CPROF_HTTP_TOKEN is set but empty (unset it to serve "
                "without a token); %s",
                off);
    goto refused;
  }
  cprof_http_config cfg = {.addr = addr, .token = token};
  long long v;
  if (cprof__env_get("CPROF_HTTP_ALLOW_REMOTE")) {
    if (!cprof__env_int("CPROF_HTTP_ALLOW_REMOTE", 0, 1, off, &v))
      goto refused;
    cfg.allow_remote = (int)v;
  }
  if (cprof__env_get("CPROF_HTTP_MAX_SECONDS")) {
    if (!cprof__env_int("CPROF_HTTP_MAX_SECONDS", 1, 86400, off, &v))
      goto refused;
    cfg.max_cpu_seconds = (int)v;
  }
  char why[256] = "", q[CPROF__QUOTED_SIZE];
  if (start_on(&cfg, inherited, &env_server, why, sizeof why) != 0) {
    cprof__warn("CPROF_HTTP=%s: %s; %s", cprof__quoted(q, sizeof q, addr), why,
                off);
    return;
  }
  /* The one line an operator needs, above all with port 0. No logger
   * afterwards: per-request lines would flood the program's stderr. An
   * heir says nothing: a daemon's stderr is seldom the terminal's any
   * more, and the address is the one already announced. */
  static const cprof__tree_heir_ops ops = {
      .listener = env_listener,
      .handed_over = env_handed_over,
      .adopt = env_adopt,
  };
  cprof__tree_set_heir_ops(&ops);
  if (inherited >= 0)
    return;
  if (env_server->port)
    cprof__warn("serving /debug/pprof/ on %.128s (port %d)", addr,
                env_server->port);
  else
    cprof__warn("serving /debug/pprof/ on %.128s", addr);
  return;
refused:
  if (inherited >= 0) cprof__fd_close(inherited);
}
