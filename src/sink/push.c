/*
 * The pusher: uploads profiles to a Pyroscope-compatible ingest endpoint
 * (POST /ingest, multipart field "profile", no format parameter), for
 * fleets. A collector thread cuts the CPU profile into windows aligned to
 * the wall clock and takes a heap snapshot (and mutex/block deltas, when
 * those profiles are on) at each boundary; it hands the encoded profiles
 * to an uploader thread through a bounded queue that drops, and counts,
 * rather than grows. The uploader retries with backoff, under a timeout,
 * and never follows redirects (so credentials cannot leak to another
 * host) nor logs them. Values that end up in a request's headers or
 * request line (the token, the tenant, basic auth, the URL) are refused
 * when they hold a control character, which would end a header and let
 * the configuration inject headers of its own. Both threads are cprof's
 * own: they block every signal and mark themselves as profiler code, so
 * the heap sampler does not count their allocations. Nothing here runs on
 * the application's threads except start and stop.
 *
 * The process that pushes is a process tree's root (tree.h): the
 * processes it forks without exec join it, and at each boundary the
 * collector asks every member, through the tree, for its part of the
 * window that starts (a windowed profile's window, a delta profile's
 * change over it) and for its snapshots; each member's answers go up as a
 * series of their own, labelled with its pid. A fork child never runs the
 * pusher it inherited: its threads are its parent's.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "source/lock_interpose.h"
#include "profile/cpu.h"
#include "sink/dump.h"
#include "base/dynload.h"
#include "base/env.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "sink/profilez.h"
#include "sink/http.h"
#include "sink/push.h"
#include "sink/tree.h"
#include "profile/registry.h"
#include "source/threads.h"

#define DEFAULT_INTERVAL 10
#define DEFAULT_TIMEOUT 10
#define DEFAULT_QUEUE 16
#define MAX_ATTEMPTS 4

/* libcurl, loaded when the first pusher starts (dynload.h). Debian ships it
 * built on OpenSSL and, as a separate package, on GnuTLS. */
#define LIBCURL_FNS(X, v) \
  X(v, curl_easy_cleanup, easy_cleanup) \
  X(v, curl_easy_escape, easy_escape) \
  X(v, curl_easy_getinfo, easy_getinfo) \
  X(v, curl_easy_init, easy_init) \
  X(v, curl_easy_perform, easy_perform) \
  X(v, curl_easy_reset, easy_reset) \
  X(v, curl_easy_setopt, easy_setopt) \
  X(v, curl_free, free) \
  X(v, curl_global_init, global_init) \
  X(v, curl_mime_addpart, mime_addpart) \
  X(v, curl_mime_data, mime_data) \
  X(v, curl_mime_filename, mime_filename) \
  X(v, curl_mime_free, mime_free) \
  X(v, curl_mime_init, mime_init) \
  X(v, curl_mime_name, mime_name) \
  X(v, curl_mime_type, mime_type) \
  X(v, curl_slist_append, slist_append) \
  X(v, curl_slist_free_all, slist_free_all)
CPROF__DYNLIB_DEFINE(libcurl, LIBCURL_FNS, "libcurl.so.4", "libcurl-gnutls.so.4")

typedef struct push_job {
  char kind[16]; /* profile name, for logs */
  cprof_buf data;
  int64_t from_s, until_s;
  int sample_rate; /* cpu: hz; 0 otherwise */
  pid_t pid;       /* the process whose profile it is */
} push_job;

/* Each pushed profile's state: a windowed profile's current window; a
 * delta profile's records at the previous boundary. */
typedef struct delta_state {
  const cprof__profile_def *def;
  void *window;
  int rate; /* a windowed profile's, fixed when the pusher starts */
  cprof__records last;
  bool have_last;
  /* The tree's members' part of the window under way (windowed and
   * delta profiles): the call asking for it, and its uri without the
   * seconds. */
  cprof__tree_call *tree_call;
  char tree_uri[96];
  int64_t tree_from_s, tree_until_s;
} delta_state;

#define PUSH_PROFILES 16

struct cprof_push {
  char *ingest_url; /* base URL + "/ingest" */
  /* The series name, app{hostname=H,pid=N,service_name=app,labels}, not
   * yet URL-encoded, in two parts: before and after the pid. */
  char *name_head, *name_tail;
  pid_t owner; /* the process whose threads these are */
  char *basic_auth;
  char *bearer_header;
  char *tenant_header;
  char *safe_url; /* for logs: scheme://host[:port] only */
  int interval, timeout, hz;
  void (*logger)(void *ctx, const char *line);
  void *logger_ctx;

  pthread_mutex_t lock;
  pthread_cond_t cond; /* queue changes and stop */
  push_job *queue;
  size_t qcap, qhead, qlen;
  bool stopping;
  atomic_bool abort_uploads; /* stop: end a request in flight at once */
  pthread_t collector, uploader;
  bool collector_started, uploader_started;

  delta_state pushed[PUSH_PROFILES];
  size_t npushed;
  bool tree_said; /* a member's missing part was reported once */
  _Atomic uint64_t uploaded, failed, dropped, retried;
};

static void push_log(cprof_push *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void push_log(cprof_push *p, const char *fmt, ...) {
  char line[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (p->logger)
    p->logger(p->logger_ctx, line);
  else
    cprof__warn("push: %s", line);
}

/* "scheme://host[:port]" of url, without user information or path, so a
 * log line never carries a credential. */
static char *safe_origin(const char *url) {
  const char *scheme_end = strstr(url, "://");
  const char *host = scheme_end ? scheme_end + 3 : url;
  const char *at = NULL;
  for (const char *c = host; *c && *c != '/'; c++)
    if (*c == '@') at = c;
  if (at) host = at + 1;
  size_t hlen = strcspn(host, "/?#");
  size_t slen = scheme_end ? (size_t)(scheme_end - url) + 3 : 0;
  char *out = cprof__malloc(slen + hlen + 1);
  if (!out) return NULL;
  memcpy(out, url, slen);
  memcpy(out + slen, host, hlen);
  out[slen + hlen] = '\0';
  return out;
}

static bool label_key_ok(const char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9') || (i > 0 && c == '.');
    if (!ok) return false;
  }
  return true;
}

static bool is_control(char c) {
  return (unsigned char)c < 0x20 || c == 0x7f;
}

static bool has_control(const char *s) {
  for (; s && *s; s++)
    if (is_control(*s)) return true;
  return false;
}

static bool label_value_ok(const char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++)
    if (strchr(",{}=\"", s[i]) || is_control(s[i])) return false;
  return true;
}

/* Builds the series name "app{hostname=h,pid=N,service_name=app,k=v...}"
 * in two parts, before and after N: *tail gets the second. Returns NULL
 * and fills err for a malformed labels string. */
static char *series_name(const char *app, const char *labels, char **tail,
                         char *err, size_t errlen) {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (strchr(",{}=\"", *c)) *c = '_';
  *tail = NULL;
  cprof_buf head = {0};
  if (cprof__buf_printf(&head, "%s{hostname=%s,pid=", app, host) ||
      cprof__buf_append(&head, "", 1)) {
    cprof_buf_free(&head);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  cprof_buf b = {0};
  int rc = cprof__buf_printf(&b, ",service_name=%s", app);
  const char *p = labels ? labels : "";
  while (!rc && *p) {
    size_t n = strcspn(p, ",");
    const char *eq = memchr(p, '=', n);
    if (!eq || !label_key_ok(p, (size_t)(eq - p)) ||
        !label_value_ok(eq + 1, n - (size_t)(eq - p) - 1)) {
      char q[4 * 40 + 32];
      cprof__quote(q, sizeof q, p, n, 40);
      snprintf(err, errlen,
               "bad label %s: want key=value, key [A-Za-z_][A-Za-z0-9_.]*, "
               "value without , { } = \" or control characters",
               q);
      cprof_buf_free(&b);
      cprof_buf_free(&head);
      return NULL;
    }
    rc = cprof__buf_printf(&b, ",%.*s", (int)n, p);
    p += n;
    if (*p == ',') p++;
  }
  if (!rc) rc = cprof__buf_append(&b, "}", 2);
  if (rc) {
    cprof_buf_free(&b);
    cprof_buf_free(&head);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  *tail = (char *)b.data;
  return (char *)head.data;
}

static bool app_name_ok(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || strchr("_-.", *s)))
      return false;
  return true;
}

/* Queues a job; when the queue is full the oldest job is dropped (the
 * newest data is the most useful) and counted. Takes data's buffer. */
static bool stopping(cprof_push *p) {
  cprof__lock(&p->lock);
  bool s = p->stopping;
  cprof__unlock(&p->lock);
  return s;
}

static void enqueue(cprof_push *p, const char *kind, cprof_buf *data,
                    int64_t from_s, int64_t until_s, int sample_rate,
                    pid_t pid) {
  cprof__lock(&p->lock);
  if (p->qlen == p->qcap) {
    push_job *old = &p->queue[p->qhead];
    cprof_buf_free(&old->data);
    p->qhead = (p->qhead + 1) % p->qcap;
    p->qlen--;
    atomic_fetch_add(&p->dropped, 1);
  }
  push_job *j = &p->queue[(p->qhead + p->qlen) % p->qcap];
  snprintf(j->kind, sizeof j->kind, "%s", kind);
  j->data = *data;
  j->from_s = from_s;
  j->until_s = until_s;
  j->sample_rate = sample_rate;
  j->pid = pid;
  p->qlen++;
  memset(data, 0, sizeof *data);
  pthread_cond_broadcast(&p->cond);
  cprof__unlock(&p->lock);
}


static void collect_delta(cprof_push *p, delta_state *d, int64_t from_s,
                          int64_t until_s) {
  const cprof__profile_def *def = d->def;
  if (def->enabled && !def->enabled()) return;
  cprof__records now = {0}, delta = {0};
  if (def->collect(&now) != 0) goto out;
  if (d->have_last && cprof__records_delta(&delta, &d->last, &now) == 0 &&
      delta.len > 0) {
    cprof_buf data = {0};
    cprof_sink sink = cprof_sink_buf(&data);
    if (def->write(&delta, 0, now.time_ns - d->last.time_ns, &sink) == 0)
      enqueue(p, def->name, &data, from_s, until_s, 0, p->owner);
    cprof_buf_free(&data);
  }
  cprof__records_free(&d->last);
  d->last = now;
  d->have_last = true;
  memset(&now, 0, sizeof now);
out:
  cprof__records_free(&now);
  cprof__records_free(&delta);
}

static int window_rate(const cprof_push *p, const cprof__profile_def *def) {
  for (size_t i = 0; i < p->npushed; i++)
    if (p->pushed[i].def == def) return p->pushed[i].rate;
  return 0;
}

/* Ends d's window (writing it when sink is set) and starts the next. */
static void next_window(cprof_push *p, delta_state *d, int64_t from_s,
                        int64_t until_s, bool start_next) {
  const cprof__profile_def *def = d->def;
  void *ended = d->window;
  d->window = NULL;
  if (start_next && def->window->start(window_rate(p, def), &d->window) != 0)
    d->window = NULL;
  if (!ended) return;
  cprof_buf data = {0};
  cprof_sink sink = cprof_sink_buf(&data);
  if (def->window->stop(ended, start_next ? &sink : NULL) == 0 && start_next)
    enqueue(p, def->name, &data, from_s, until_s, window_rate(p, def),
            p->owner);
  cprof_buf_free(&data);
}

/* One boundary: each windowed profile's window that just ended, each
 * snapshot profile as it stands, and each delta profile's change (the
 * latter two only while the profile is on). */
static void collect_window(cprof_push *p, int64_t from_s, int64_t until_s) {
  static const cprof__push_kind order[] = {
      CPROF__PUSH_WINDOW, CPROF__PUSH_SNAPSHOT, CPROF__PUSH_DELTA};
  for (size_t k = 0; k < CPROF__ARRAY_LEN(order); k++) {
    for (size_t i = 0; i < p->npushed; i++) {
      delta_state *d = &p->pushed[i];
      if (d->def->push != order[k]) continue;
      if (order[k] == CPROF__PUSH_WINDOW) {
        next_window(p, d, from_s, until_s, true);
      } else if (order[k] == CPROF__PUSH_DELTA) {
        collect_delta(p, d, from_s, until_s);
      } else if (!d->def->enabled || d->def->enabled()) {
        cprof_buf data = {0};
        cprof_sink sink = cprof_sink_buf(&data);
        if (cprof_profile_write(d->def->name, 0, &sink) == 0)
          enqueue(p, d->def->name, &data, from_s, until_s, 0, p->owner);
        cprof_buf_free(&data);
      }
    }
  }
}

/* --- the tree's members (tree.h) --- */

/* How long after a window's end the members' parts are waited for. */
#define TREE_SLACK_MS 2000

static int64_t wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}

/* Asks the members that have not been asked for d's window yet (all of
 * them at its start; later, those that joined since) for their part of
 * it, for the seconds left of it. */
static void tree_ask(delta_state *d) {
  int64_t left = d->tree_until_s - wall_s();
  if (!d->tree_uri[0] || left < 1 || !cprof__tree_has_members()) return;
  char uri[sizeof d->tree_uri + 32];
  snprintf(uri, sizeof uri, "%s%cseconds=%lld", d->tree_uri,
           strchr(d->tree_uri, '?') ? '&' : '?', (long long)left);
  if (d->tree_call)
    cprof__tree_send_new(d->tree_call, uri);
  else
    d->tree_call = cprof__tree_send(uri, 0, CPROF__TREE_PUSH);
}

/* Starts the members' part of the window [from_s, until_s] of each
 * windowed profile, and of each delta profile that is on. */
static void tree_start(cprof_push *p, int64_t from_s, int64_t until_s) {
  for (size_t i = 0; i < p->npushed; i++) {
    delta_state *d = &p->pushed[i];
    const cprof__profile_def *def = d->def;
    d->tree_uri[0] = '\0';
    d->tree_call = NULL;
    d->tree_from_s = from_s;
    d->tree_until_s = until_s;
    int rate = window_rate(p, def);
    if (def->push == CPROF__PUSH_WINDOW && rate && def->rate_key)
      snprintf(d->tree_uri, sizeof d->tree_uri, "/debug/pprof/%s?%s=%d",
               cprof__profile_route(def), def->rate_key, rate);
    else if (def->push == CPROF__PUSH_WINDOW ||
             (def->push == CPROF__PUSH_DELTA &&
              (!def->enabled || def->enabled())))
      snprintf(d->tree_uri, sizeof d->tree_uri, "/debug/pprof/%s",
               cprof__profile_route(def));
    tree_ask(d);
  }
}

/* Waits for the members' answers to c (up to TREE_SLACK_MS more) and
 * queues each as its process's series; frees c. */
static void tree_collect(cprof_push *p, cprof__tree_call *c,
                         const cprof__profile_def *def, int64_t from_s,
                         int64_t until_s) {
  if (!c) return;
  cprof__tree_reply *reps;
  size_t n;
  cprof__tree_collect(c, cprof__mono_ns() + TREE_SLACK_MS * 1000000LL, &reps,
                      &n);
  int rate = def->push == CPROF__PUSH_WINDOW ? window_rate(p, def) : 0;
  for (size_t i = 0; i < n; i++) {
    cprof__tree_reply *r = &reps[i];
    if (r->status == 200 && r->body.len &&
        strcmp(r->type, "application/octet-stream") == 0) {
      enqueue(p, def->name, &r->body, from_s, until_s, rate, r->who.pid);
    } else if (!p->tree_said) {
      /* Once: a worker killed or hung mid-window is the usual reason. */
      p->tree_said = true;
      char why[32] = "no answer";
      if (r->status) snprintf(why, sizeof why, "HTTP %d", r->status);
      push_log(p,
               "pid %d (%s) gave no %s profile for %lld..%lld (%s); its "
               "series has a gap there (said once)",
               (int)r->who.pid, r->who.name, def->name, (long long)from_s,
               (long long)until_s, why);
    }
  }
  cprof__tree_free(c);
}

/* Waits until the wall clock reaches deadline_s, sending each second the
 * windows under way to the members that joined meanwhile; false when
 * stopping. */
static bool wait_until(cprof_push *p, int64_t deadline_s) {
  for (;;) {
    int64_t now = wall_s();
    if (now >= deadline_s) return !stopping(p);
    struct timespec ts = {(time_t)(now + 1 < deadline_s ? now + 1 : deadline_s),
                          0};
    cprof__lock(&p->lock);
    while (!p->stopping) {
      if (cprof__cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT) break;
    }
    bool go_on = !p->stopping;
    cprof__unlock(&p->lock);
    if (!go_on) return false;
    for (size_t i = 0; i < p->npushed; i++) tree_ask(&p->pushed[i]);
  }
}

/* One boundary for the members: the windows that end are asked for again
 * for the next one before anything else (so theirs start with the root's),
 * the snapshots are asked for, the root collects its own part, and then
 * the members' answers are queued. */
static void boundary(cprof_push *p, int64_t from_s, int64_t until_s,
                     int64_t next_s) {
  cprof__tree_call *ended[PUSH_PROFILES], *snaps[PUSH_PROFILES];
  for (size_t i = 0; i < p->npushed; i++) {
    delta_state *d = &p->pushed[i];
    ended[i] = d->tree_call;
    snaps[i] = NULL;
    if (d->def->push == CPROF__PUSH_SNAPSHOT &&
        (!d->def->enabled || d->def->enabled())) {
      char uri[96];
      snprintf(uri, sizeof uri, "/debug/pprof/%s",
               cprof__profile_route(d->def));
      snaps[i] = cprof__tree_send(uri, 0, CPROF__TREE_PUSH);
    }
  }
  tree_start(p, until_s, next_s);
  collect_window(p, from_s, until_s);
  for (size_t i = 0; i < p->npushed; i++) {
    tree_collect(p, ended[i], p->pushed[i].def, from_s, until_s);
    tree_collect(p, snaps[i], p->pushed[i].def, from_s, until_s);
  }
}

static void *collector_main(void *arg) {
  cprof_push *p = arg;
  cprof__guard_enter();
  int64_t now = cprof__now_ns() / 1000000000;
  int64_t from = now;
  /* Windows end on multiples of the interval, so series from many hosts
   * line up. */
  int64_t next = (now / p->interval + 1) * p->interval;
  for (size_t i = 0; i < p->npushed; i++) {
    delta_state *d = &p->pushed[i];
    if (d->def->push == CPROF__PUSH_WINDOW) {
      if (d->def->window->start(window_rate(p, d->def), &d->window) != 0) {
        d->window = NULL;
        push_log(p, "%s profile unavailable; pushing the other profiles",
                 d->def->name);
      }
    } else if (d->def->push == CPROF__PUSH_DELTA) {
      /* The deltas start from the state at the beginning. */
      collect_delta(p, d, from, from);
    }
  }
  tree_start(p, from, next);
  while (wait_until(p, next)) {
    boundary(p, from, next, next + p->interval);
    from = next;
    next += p->interval;
  }
  for (size_t i = 0; i < p->npushed; i++) {
    delta_state *d = &p->pushed[i];
    if (d->def->push == CPROF__PUSH_WINDOW) next_window(p, d, 0, 0, false);
    cprof__records_free(&d->last);
    cprof__tree_free(d->tree_call);
    d->tree_call = NULL;
  }
  cprof__guard_exit();
  return NULL;
}

/* Ends a request in flight when the pusher stops, so stopping (at exit,
 * say) never waits for a slow or stalled backend. */
static int abort_on_stop(void *ctx, curl_off_t dltotal, curl_off_t dlnow,
                         curl_off_t ultotal, curl_off_t ulnow) {
  (void)dltotal;
  (void)dlnow;
  (void)ultotal;
  (void)ulnow;
  return atomic_load(&((cprof_push *)ctx)->abort_uploads) ? 1 : 0;
}

static size_t discard_body(char *ptr, size_t size, size_t n, void *ctx) {
  (void)ptr;
  (void)ctx;
  return size * n;
}

/* One POST. Returns the HTTP status, or 0 when the request did not
 * complete (connection refused, timeout). */
static long post(cprof_push *p, CURL *curl, const push_job *j) {
  char series[1024];
  int len = snprintf(series, sizeof series, "%s%d%s", p->name_head,
                     (int)j->pid, p->name_tail);
  if (len < 0 || (size_t)len >= sizeof series) return 0;
  char *name = libcurl.easy_escape(curl, series, 0);
  if (!name) return 0;
  char url[2048];
  int n = snprintf(url, sizeof url,
                   "%s?name=%s&from=%lld&until=%lld&spyName=cprof", p->ingest_url,
                   name, (long long)j->from_s, (long long)j->until_s);
  libcurl.free(name);
  if (n < 0 || (size_t)n >= sizeof url) return 0;
  if (j->sample_rate)
    snprintf(url + n, sizeof url - (size_t)n, "&sampleRate=%d", j->sample_rate);

  curl_mime *mime = libcurl.mime_init(curl);
  curl_mimepart *part = libcurl.mime_addpart(mime);
  libcurl.mime_name(part, "profile");
  libcurl.mime_filename(part, "profile.pb.gz");
  libcurl.mime_type(part, "application/octet-stream");
  libcurl.mime_data(part, (const char *)j->data.data, j->data.len);

  struct curl_slist *headers = NULL;
  if (p->bearer_header) headers = libcurl.slist_append(headers, p->bearer_header);
  if (p->tenant_header) headers = libcurl.slist_append(headers, p->tenant_header);

  libcurl.easy_reset(curl);
  libcurl.easy_setopt(curl, CURLOPT_URL, url);
  libcurl.easy_setopt(curl, CURLOPT_MIMEPOST, mime);
  libcurl.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  libcurl.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  libcurl.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  libcurl.easy_setopt(curl, CURLOPT_TIMEOUT, (long)p->timeout);
  libcurl.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, (long)p->timeout);
  libcurl.easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
  libcurl.easy_setopt(curl, CURLOPT_USERAGENT, "cprof");
  libcurl.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  libcurl.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
  libcurl.easy_setopt(curl, CURLOPT_XFERINFODATA, p);
  if (p->basic_auth) {
    libcurl.easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    libcurl.easy_setopt(curl, CURLOPT_USERPWD, p->basic_auth);
  }
  long status = 0;
  if (libcurl.easy_perform(curl) == CURLE_OK)
    libcurl.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  libcurl.slist_free_all(headers);
  libcurl.mime_free(mime);
  return status;
}


static void *uploader_main(void *arg) {
  cprof_push *p = arg;
  cprof__guard_enter();
  CURL *curl = libcurl.easy_init();
  for (;;) {
    cprof__lock(&p->lock);
    while (p->qlen == 0 && !p->stopping) cprof__cond_wait(&p->cond, &p->lock);
    if (p->qlen == 0) {
      cprof__unlock(&p->lock);
      break;
    }
    push_job job = p->queue[p->qhead];
    p->qhead = (p->qhead + 1) % p->qcap;
    p->qlen--;
    cprof__unlock(&p->lock);

    long status = 0;
    for (int attempt = 1; curl && attempt <= MAX_ATTEMPTS; attempt++) {
      long got = post(p, curl, &job);
      /* A request abandoned because the pusher is stopping says nothing
       * about the backend: the last real answer stands. */
      if (got == 0 && atomic_load(&p->abort_uploads)) break;
      status = got;
      /* Retry what may pass later: no answer, a timeout, rate limiting and
       * server errors. Other client errors will not change. */
      bool retry = status == 0 || status == 408 || status == 429 ||
                   status >= 500;
      if (!retry || attempt == MAX_ATTEMPTS || stopping(p)) break;
      atomic_fetch_add(&p->retried, 1);
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1 << (attempt - 1); /* 1, 2, 4 seconds */
      cprof__lock(&p->lock);
      while (!p->stopping &&
             cprof__cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT) {
      }
      cprof__unlock(&p->lock);
    }
    if (status >= 200 && status < 300) {
      atomic_fetch_add(&p->uploaded, 1);
    } else {
      uint64_t failures = atomic_fetch_add(&p->failed, 1);
      /* One line for the first failure and every hundredth after it. */
      if (failures % 100 == 0) {
        char why[32] = "no answer";
        if (status) snprintf(why, sizeof why, "HTTP %ld", status);
        push_log(p, "upload of %s to %s failed (%s); %llu failed so far",
                 job.kind, p->safe_url, why,
                 (unsigned long long)failures + 1);
      }
    }
    cprof_buf_free(&job.data);
  }
  if (curl) libcurl.easy_cleanup(curl);
  cprof__guard_exit();
  return NULL;
}

static void push_free(cprof_push *p) {
  if (!p) return;
  for (size_t i = 0; i < p->qlen; i++)
    cprof_buf_free(&p->queue[(p->qhead + i) % p->qcap].data);
  cprof__free(p->queue);
  cprof__free(p->ingest_url);
  cprof__free(p->name_head);
  cprof__free(p->name_tail);
  cprof__free(p->basic_auth);
  cprof__free(p->bearer_header);
  cprof__free(p->tenant_header);
  cprof__free(p->safe_url);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  cprof__free(p);
}

static char *dup_printf(const char *fmt, const char *s) {
  cprof_buf b = {0};
  if (cprof__buf_printf(&b, fmt, s) || cprof__buf_append(&b, "", 1)) {
    cprof_buf_free(&b);
    return NULL;
  }
  return (char *)b.data;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_loaded = CPROF_EUNSUPPORTED;
static void curl_init_once(void) {
  curl_loaded = cprof__dynload(&libcurl_lib);
  if (curl_loaded) return;
  cprof__guard_enter();
  libcurl.global_init(CURL_GLOBAL_DEFAULT);
  cprof__guard_exit();
}

static const char *program_name(char *buf, size_t len) {
  if (cprof__proc_read(AT_FDCWD, "/proc/self/comm", buf, len) > 0) {
    buf[strcspn(buf, "\n")] = '\0';
    for (char *c = buf; *c; c++)
      if (!app_name_ok((char[]){*c, 0})) *c = '_';
    if (*buf) return buf;
  }
  return "app";
}

/* Whether the comma-separated list names d (by its name or alias). */
static bool listed(const char *list, const cprof__profile_def *d) {
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    if ((strlen(d->name) == n && memcmp(p, d->name, n) == 0) ||
        (d->alias && strlen(d->alias) == n && memcmp(p, d->alias, n) == 0))
      return true;
    p += n;
    if (*p == ',') p++;
  }
  return false;
}

/* A profiles list must name, between commas, only profiles that are
 * pushed, each at least once. */
static bool profiles_ok(const char *list, char *err, size_t errlen) {
  if (!list) return true;
  if (!*list) {
    snprintf(err, errlen, "profiles names no profile");
    return false;
  }
  for (const char *p = list;;) {
    size_t n = strcspn(p, ",");
    char name[64];
    const cprof__profile_def *d = NULL;
    if (n > 0 && n < sizeof name) {
      memcpy(name, p, n);
      name[n] = '\0';
      d = cprof__profile_find(name);
    }
    if (!d || d->push == CPROF__PUSH_NONE) {
      char q[CPROF__QUOTED_SIZE], word[64];
      snprintf(word, sizeof word, "%.*s", (int)(n < 63 ? n : 63), p);
      snprintf(err, errlen, "profiles: %s is not a profile that is pushed",
               cprof__quoted(q, sizeof q, word));
      return false;
    }
    p += n;
    if (!*p) return true;
    p++; /* the comma */
  }
}

int cprof__push_start(const cprof_push_config *cfg, cprof_push **out,
                      char *err, size_t errlen) {
  if (!cfg || !out || !cfg->url) {
    snprintf(err, errlen, "a configuration with a url is required");
    return CPROF_EINVAL;
  }
  if (strncmp(cfg->url, "http://", 7) != 0 &&
      strncmp(cfg->url, "https://", 8) != 0) {
    snprintf(err, errlen, "url must start with http:// or https://");
    return CPROF_EINVAL;
  }
  /* Each of these goes into the request line or a header as it is. */
  const struct {
    const char *name, *value;
  } raw[] = {{"url", cfg->url},
             {"bearer_token", cfg->bearer_token},
             {"tenant_id", cfg->tenant_id},
             {"basic_auth", cfg->basic_auth}};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(raw); i++)
    if (has_control(raw[i].value)) {
      snprintf(err, errlen, "%s must not contain control characters",
               raw[i].name);
      return CPROF_EINVAL;
    }
  if (cfg->interval_seconds < 0 || cfg->interval_seconds > 3600 ||
      cfg->timeout_seconds < 0 || cfg->timeout_seconds > 600 ||
      cfg->queue_length < 0 || cfg->queue_length > 1024 || cfg->cpu_hz < 0 ||
      cfg->cpu_hz > CPROF__CPU_MAX_HZ) {
    snprintf(err, errlen,
             "out of range: interval 1..3600 s, timeout 1..600 s, queue "
             "1..1024, cpu_hz 1..%d",
             CPROF__CPU_MAX_HZ);
    return CPROF_EINVAL;
  }
  if (!profiles_ok(cfg->profiles, err, errlen)) return CPROF_EINVAL;
  pthread_once(&curl_once, curl_init_once);
  if (curl_loaded) {
    snprintf(err, errlen, "%s", libcurl_lib.why);
    return curl_loaded;
  }
  char comm[32];
  const char *app = cfg->app_name ? cfg->app_name : program_name(comm, sizeof comm);
  if (!app_name_ok(app)) {
    char q[CPROF__QUOTED_SIZE];
    snprintf(err, errlen, "app name %s must be letters, digits, _ - .",
             cprof__quoted(q, sizeof q, app));
    return CPROF_EINVAL;
  }
  if (cfg->bearer_token && cfg->basic_auth) {
    snprintf(err, errlen, "give basic auth or a bearer token, not both");
    return CPROF_EINVAL;
  }
  cprof_push *p = cprof__calloc(1, sizeof *p);
  if (!p) return CPROF_ENOMEM;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  p->owner = getpid();
  p->interval = cfg->interval_seconds ? cfg->interval_seconds : DEFAULT_INTERVAL;
  p->timeout = cfg->timeout_seconds ? cfg->timeout_seconds : DEFAULT_TIMEOUT;
  p->hz = cfg->cpu_hz;
  p->qcap = cfg->queue_length ? (size_t)cfg->queue_length : DEFAULT_QUEUE;
  p->logger = cfg->logger;
  p->logger_ctx = cfg->logger_ctx;
  for (size_t i = 0; i < cprof__profiles_count(); i++) {
    const cprof__profile_def *d = cprof__profile_at(i);
    if (d->push == CPROF__PUSH_NONE || p->npushed == PUSH_PROFILES ||
        (cfg->profiles ? !listed(cfg->profiles, d) : d->push_when_named))
      continue;
    delta_state *st = &p->pushed[p->npushed++];
    st->def = d;
    /* The rates are read here, on the starting thread (the environment
     * may be rearranged once the constructor is done): the
     * configuration's cpu_hz is the CPU profile's, every other windowed
     * profile pushes at its own default. */
    if (d->window)
      st->rate = p->hz && d == &cprof__cpu_profile
                     ? p->hz
                     : (int)d->window->default_rate();
  }
  size_t ulen = strlen(cfg->url);
  while (ulen && cfg->url[ulen - 1] == '/') ulen--;
  p->queue = cprof__calloc(p->qcap, sizeof *p->queue);
  p->ingest_url = cprof__malloc(ulen + sizeof "/ingest");
  if (p->ingest_url) {
    memcpy(p->ingest_url, cfg->url, ulen);
    memcpy(p->ingest_url + ulen, "/ingest", sizeof "/ingest");
  }
  p->name_head = series_name(app, cfg->labels, &p->name_tail, err, errlen);
  if (!p->name_head) {
    push_free(p);
    return CPROF_EINVAL;
  }
  p->safe_url = safe_origin(cfg->url);
  if (cfg->basic_auth) p->basic_auth = cprof__strdup(cfg->basic_auth);
  if (cfg->bearer_token)
    p->bearer_header = dup_printf("Authorization: Bearer %s", cfg->bearer_token);
  if (cfg->tenant_id)
    p->tenant_header = dup_printf("X-Scope-OrgID: %s", cfg->tenant_id);
  if (!p->queue || !p->ingest_url || !p->safe_url ||
      (cfg->basic_auth && !p->basic_auth) ||
      (cfg->bearer_token && !p->bearer_header) ||
      (cfg->tenant_id && !p->tenant_header)) {
    push_free(p);
    return CPROF_ENOMEM;
  }
  if (cprof__thread_spawn(&p->uploader, uploader_main, p, "cprof-upload") != 0) {
    push_free(p);
    return CPROF_ESYS;
  }
  p->uploader_started = true;
  if (cprof__thread_spawn(&p->collector, collector_main, p, "cprof-push") != 0) {
    cprof_push_stop(p);
    return CPROF_ESYS;
  }
  p->collector_started = true;
  /* The processes this one forks from now on are pushed from here too. */
  if (cprof__tree_root(cprof__http_serve_local) != 0)
    push_log(p, "the process tree is off: %s", cprof_strerror(CPROF_ESYS));
  cprof__mark_enabled(true);
  *out = p;
  return 0;
}

int cprof_push_start(const cprof_push_config *cfg, cprof_push **out) {
  char err[200] = "";
  int rc = cprof__push_start(cfg, out, err, sizeof err);
  if (rc && err[0] && cfg && cfg->logger) cfg->logger(cfg->logger_ctx, err);
  return rc;
}

int cprof_push_stop(cprof_push *p) {
  if (!p) return CPROF_EINVAL;
  /* A fork child's copy: the threads are its parent's, and its locks may
   * have been held at the fork. The parent pushes this process's
   * profiles through the tree. */
  if (p->owner != getpid()) return 0;
  cprof__lock(&p->lock);
  p->stopping = true;
  atomic_store(&p->abort_uploads, true);
  pthread_cond_broadcast(&p->cond);
  cprof__unlock(&p->lock);
  if (p->collector_started) cprof__join(p->collector, NULL);
  if (p->uploader_started) cprof__join(p->uploader, NULL);
  push_free(p);
  return 0;
}

void cprof_push_get_stats(const cprof_push *p, cprof_push_stats *out) {
  memset(out, 0, sizeof *out);
  if (!p) return;
  cprof_push *q = (cprof_push *)p;
  out->uploaded = atomic_load(&q->uploaded);
  out->failed = atomic_load(&q->failed);
  out->dropped = atomic_load(&q->dropped);
  out->retried = atomic_load(&q->retried);
}

/* The environment's pusher, started by the constructor and stopped at
 * exit. */
static cprof_push *env_pusher;

static void stop_env_pusher(void) {
  cprof_push *p = env_pusher;
  /* A fork child leaves its parent's pusher alone (cprof_push_stop), and
   * reachable. */
  if (p && p->owner != getpid()) return;
  env_pusher = NULL;
  if (p) cprof_push_stop(p);
}

void cprof__push_env_init(void) {
  const char *url = cprof__env_str("CPROF_PUSH_URL");
  if (!url) return;
  cprof_push_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.url = url;
  cfg.app_name = cprof__env_str("CPROF_PUSH_APP");
  cfg.labels = cprof__env_str("CPROF_PUSH_LABELS");
  cfg.basic_auth = cprof__env_str("CPROF_PUSH_BASIC_AUTH");
  cfg.bearer_token = cprof__env_str("CPROF_PUSH_TOKEN");
  cfg.tenant_id = cprof__env_str("CPROF_PUSH_TENANT");
  cfg.profiles = cprof__env_str("CPROF_PUSH_PROFILES");
  long long v;
  const char *off = "pushing disabled";
  /* Named by variable here; cprof__push_start would name the field. */
  const struct {
    const char *name, *value;
  } raw[] = {{"CPROF_PUSH_URL", cfg.url},
             {"CPROF_PUSH_TOKEN", cfg.bearer_token},
             {"CPROF_PUSH_TENANT", cfg.tenant_id},
             {"CPROF_PUSH_BASIC_AUTH", cfg.basic_auth}};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(raw); i++)
    if (has_control(raw[i].value)) {
      cprof__warn("CPROF_PUSH_*: %s must not contain control characters; %s",
                  raw[i].name, off);
      return;
    }
  if (cprof__env_str("CPROF_PUSH_INTERVAL")) {
    if (!cprof__env_int("CPROF_PUSH_INTERVAL", 1, 3600, off, &v)) return;
    cfg.interval_seconds = (int)v;
  }
  char err[200] = "";
  int rc = cprof__push_start(&cfg, &env_pusher, err, sizeof err);
  if (rc == CPROF_EINVAL)
    cprof__warn("CPROF_PUSH_*: %s; pushing disabled", err);
  else if (rc && err[0])
    cprof__warn("CPROF_PUSH_URL: %s; pushing disabled", err);
  else if (rc)
    cprof__warn("CPROF_PUSH_URL: %s; pushing disabled", cprof_strerror(rc));
  else
    atexit(stop_env_pusher);
}
