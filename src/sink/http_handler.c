/*
 * The /debug/pprof/ routes (see http.h): one request in, one response out,
 * with Go's net/http/pprof behaviour for every route, parameter, header,
 * status code and error text, plus cprof's additions (bearer token, the
 * Host check against DNS rebinding, a cap on profile seconds, hz, bounds on
 * /symbol). Routing is Go's ServeMux's: a path that is not clean is
 * redirected to its cleaned form. Parameters are what Go's r.FormValue
 * reads: the pairs of an urlencoded POST body, then the query's (the
 * server passes a route other than /symbol a body only when its
 * Content-Type says it is a form). It owns the rule "one CPU profile at a
 * time from the endpoint". It knows nothing of sockets or libmicrohttpd,
 * and must never hold a lock while it waits for a profile's duration.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "profile/cpu.h"
#include "sink/http.h"
#include "base/mem.h"
#include "base/proc.h"
#include "base/text.h"
#include "sink/query.h"
#include "encode/pprof_merge.h"
#include "encode/symbolize.h"
#include "sink/dump.h"
#include "sink/tree.h"
#include "sink/ui.h"

#define PREFIX "/debug/pprof/"
#define TEXT "text/plain; charset=utf-8"
#define OCTETS "application/octet-stream"
#define HTML "text/html; charset=utf-8"

const cprof__profile_def *(*cprof__http_find)(const char *name) =
    cprof__profile_find_route;

/* Go allows one CPU profile at a time; so does the endpoint, for each of
 * its windowed profiles, across all servers in the process (a window of
 * one does not keep another's out): the definitions whose window is open,
 * each in a slot of its own. */
#define WINDOW_SLOTS 8
static _Atomic(const cprof__profile_def *) window_in_use[WINDOW_SLOTS];

/* Claims def's slot: false when a window of def is already open (or, with
 * more windowed profiles than slots, when every slot is taken). */
static bool window_claim(const cprof__profile_def *def) {
  for (size_t i = 0; i < WINDOW_SLOTS; i++)
    if (atomic_load(&window_in_use[i]) == def) return false;
  for (size_t i = 0; i < WINDOW_SLOTS; i++) {
    const cprof__profile_def *none = NULL;
    if (atomic_compare_exchange_strong(&window_in_use[i], &none, def)) {
      /* Another request for def may have claimed a slot meanwhile: the
       * lower slot wins. */
      for (size_t k = 0; k < i; k++)
        if (atomic_load(&window_in_use[k]) == def) {
          atomic_store(&window_in_use[i], NULL);
          return false;
        }
      return true;
    }
  }
  return false;
}

/* A fork child has none of the windows its parent's requests held open
 * (their threads are not there): its own requests may open them. */
static void windows_child_after_fork(void) {
  for (size_t i = 0; i < WINDOW_SLOTS; i++)
    atomic_store(&window_in_use[i], NULL);
}

static void windows_fork_init(void) {
  cprof__atfork(CPROF__FORK_HTTP, NULL, NULL, windows_child_after_fork);
}

void cprof__http_handler_init(void) {
  windows_fork_init();
}

static void window_release(const cprof__profile_def *def) {
  for (size_t i = 0; i < WINDOW_SLOTS; i++) {
    const cprof__profile_def *d = def;
    if (atomic_compare_exchange_strong(&window_in_use[i], &d, NULL)) return;
  }
}

static void set_body(cprof__http_resp *r, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  r->body.len = 0;
  if (cprof__buf_printf(&r->body, "%s\n", msg) != 0) r->body.len = 0;
}

/* Go's serveError: text/plain, X-Go-Pprof: 1, no Content-Disposition, the
 * message and a newline. */
static void vfail(cprof__http_resp *r, int status, const char *fmt,
                  va_list ap) {
  r->status = status;
  r->content_type = TEXT;
  r->disposition[0] = 0;
  r->go_pprof_error = true;
  set_body(r, fmt, ap);
}

__attribute__((format(printf, 3, 4))) static void fail(cprof__http_resp *r,
                                                       int status,
                                                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(r, status, fmt, ap);
  va_end(ap);
}

void cprof__http_fail(cprof__http_resp *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(r, status, fmt, ap);
  va_end(ap);
}

/* Go's http.NotFound (no X-Go-Pprof: it is the mux answering, not pprof). */
static void not_found(cprof__http_resp *r) {
  r->status = 404;
  r->content_type = TEXT;
  r->body.len = 0;
  cprof__buf_printf(&r->body, "404 page not found\n");
}

/* A 200 answer; a filename (plus suffix) makes it an attachment. */
static void ok(cprof__http_resp *r, const char *type, const char *filename,
               const char *suffix) {
  r->status = 200;
  r->content_type = type;
  if (filename &&
      snprintf(r->disposition, sizeof r->disposition,
               "attachment; filename=\"%s%s\"", filename,
               suffix) >= (int)sizeof r->disposition)
    r->disposition[0] = 0; /* profile names are short; never reached */
}

/* The viewer's page itself (GET or HEAD /debug/pprof/ui/ or .../ui, any
 * query): code without data, which reads the token from its URL's
 * #token= fragment and sends it with every request it makes, so a browser
 * can open it without a way to set a header. */
static bool is_ui_page(const cprof__http_req *req) {
  if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
    return false;
  size_t plen = strcspn(req->uri, "?");
  return (plen == sizeof PREFIX "ui/" - 1 &&
          memcmp(req->uri, PREFIX "ui/", plen) == 0) ||
         (plen == sizeof PREFIX "ui" - 1 &&
          memcmp(req->uri, PREFIX "ui", plen) == 0);
}

/* Sleeps ns in slices of at most 100 ms; false when the client left or the
 * server is stopping. */
static bool wait_ns(const cprof__http_req *req, int64_t ns) {
  int64_t end = cprof__mono_ns() + ns;
  for (;;) {
    int64_t left = end - cprof__mono_ns();
    if (left <= 0) return true;
    int ms = left > 100000000 ? 100 : (int)((left + 999999) / 1000000);
    if (req->wait) {
      if (!req->wait(req->wait_ctx, ms)) return false;
    } else {
      struct timespec ts = {0, (long)ms * 1000000};
      nanosleep(&ts, NULL);
    }
  }
}

/* wait_ns as the registry's wait function. */
static bool http_wait(void *ctx, int64_t ns) { return wait_ns(ctx, ns); }

/* The parameters as Go's r.FormValue finds them: an urlencoded POST
 * body's pairs ahead of the query's. */
typedef struct form {
  cprof__query body, query;
} form;

/* The first value of key with its length, or NULL. */
static const char *form_value(const form *f, const char *key, size_t *len) {
  const char *v = cprof__query_value(&f->body, key, len);
  return v ? v : cprof__query_value(&f->query, key, len);
}

/* Go's strconv.Atoi(r.FormValue(key)) with the error ignored: 0 when the
 * parameter is absent or not a number, and, as Atoi returns it with its
 * range error, INT64_MAX or INT64_MIN when it is out of range. */
static int64_t atoi_or_zero(const form *f, const char *key) {
  size_t len;
  const char *s = form_value(f, key, &len);
  int64_t v = 0;
  if (s) cprof__go_parse_int(s, len, &v);
  return v;
}

/* strconv.ParseInt(r.FormValue(key), 10, 64) without an error: false when
 * absent, empty, not a number or out of range. */
static bool parse_int(const form *f, const char *key, int64_t *out) {
  size_t len;
  const char *s = form_value(f, key, &len);
  return s && cprof__go_parse_int(s, len, out) == CPROF__INT_OK;
}

static void serve_cmdline(cprof__http_resp *r) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(r, 500, "cannot read /proc/self/cmdline");
    return;
  }
  char chunk[4096];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof chunk)) > 0)
    if (cprof__buf_append(&r->body, chunk, (size_t)n) != 0) break;
  close(fd);
  /* The kernel ends every argument with NUL; Go joins them with NUL. */
  if (r->body.len && r->body.data[r->body.len - 1] == 0) r->body.len--;
  ok(r, TEXT, NULL, NULL);
}

/* A windowed profile (Go's /debug/pprof/profile): Go's parameters, limits
 * and texts. The rate parameter is the profile's own (hz for cpu). */
static void serve_window(const cprof__http_opts *o, const cprof__http_req *req,
                         const form *q, const cprof__profile_def *def,
                         cprof__http_resp *r) {
  /* Go: any error from ParseInt, a range error too, means 30. */
  int64_t sec;
  if (!parse_int(q, "seconds", &sec) || sec <= 0) sec = 30;
  int64_t hz = 0;
  size_t hzlen;
  const char *key = def->rate_key;
  if (key && form_value(q, key, &hzlen) && hzlen &&
      (!parse_int(q, key, &hz) || hz < def->rate_min || hz > def->rate_max)) {
    fail(r, 400, "invalid value for \"%s\" - must be an integer in [%lld, %lld]",
         key, def->rate_min, def->rate_max);
    return;
  }
  if (sec > o->max_seconds) {
    fail(r, 400, "profile duration exceeds server's limit of %d seconds",
         o->max_seconds);
    return;
  }
  bool claim = !req->shared_window;
  if (claim && !window_claim(def)) {
    fail(r, 500, "Could not enable CPU profiling: %s",
         cprof_strerror(CPROF_EBUSY));
    return;
  }
  void *w;
  int err = def->window->start(hz, &w);
  if (err) {
    if (claim) window_release(def);
    fail(r, 500, "Could not enable CPU profiling: %s", cprof_strerror(err));
    return;
  }
  bool stayed = wait_ns(req, sec * 1000000000) || req->wait_ends_window;
  cprof_sink sink = cprof_sink_buf(&r->body);
  err = def->window->stop(w, stayed ? &sink : NULL);
  if (claim) window_release(def);
  if (!stayed) {
    r->drop = true;
    return;
  }
  if (err) {
    fail(r, 500, "Could not write CPU profile: %s", cprof_strerror(err));
    return;
  }
  ok(r, OCTETS, cprof__profile_route(def), "");
}

static void serve_delta(const cprof__http_opts *o, const cprof__http_req *req,
                        const form *q, const cprof__profile_def *def,
                        cprof__http_resp *r) {
  int64_t sec;
  if (!parse_int(q, "seconds", &sec) || sec <= 0) {
    fail(r, 400, "invalid value for \"seconds\" - must be a positive integer");
    return;
  }
  if (!def->supports_delta) {
    fail(r, 400,
         "\"seconds\" parameter is not supported for this profile type");
    return;
  }
  /* Where Go (before 1.23) checked its WriteTimeout. */
  if (sec > o->max_seconds) {
    fail(r, 400, "profile duration exceeds server's limit of %d seconds",
         o->max_seconds);
    return;
  }
  if (atoi_or_zero(q, "debug") != 0) {
    fail(r, 400, "seconds and debug params are incompatible");
    return;
  }

  cprof_sink sink = cprof_sink_buf(&r->body);
  int err = cprof__profile_write_delta(def, sec * 1000000000, http_wait,
                                       (void *)req, &sink);
  if (err == CPROF_ECANCELED) {
    r->drop = true;
  } else if (err == CPROF_EIO) {
    fail(r, 500, "failed to collect profile");
  } else if (err == CPROF_ENOMEM) {
    fail(r, 500, "failed to compute delta");
  } else if (err) {
    fail(r, 500, "failed to write profile: %s", cprof_strerror(err));
  } else {
    ok(r, OCTETS, def->name, "-delta");
  }
}

/* The debug level a profile is written with. A negative debug is text to
 * Go's handler (Content-Type) but not to runtime/pprof's writers: some
 * profiles (heap, allocs) write text for any debug != 0, the others pprof
 * for debug <= 0. */
static int write_debug(const cprof__profile_def *def, int64_t debug) {
  if (debug >= 0) return debug > 1000 ? 1000 : (int)debug;
  return def->text_for_negative_debug;
}

static bool serve_tree(const cprof__http_opts *o, const cprof__http_req *req,
                       const form *q, const char *name,
                       const cprof__profile_def *def, cprof__http_resp *r);

static void serve_named(const cprof__http_opts *o, const cprof__http_req *req,
                        const form *q, const char *name, cprof__http_resp *r) {
  const cprof__profile_def *def = cprof__http_find(name);
  if (!def) {
    fail(r, 404, "Unknown profile");
    return;
  }
  if (serve_tree(o, req, q, name, def, r)) return;
  if (def->window) {
    serve_window(o, req, q, def, r);
    return;
  }
  size_t slen;
  if (form_value(q, "seconds", &slen) && slen) {
    serve_delta(o, req, q, def, r);
    return;
  }
  /* gc=N asks Go to collect garbage first; C has none: accepted, ignored. */
  int64_t debug = atoi_or_zero(q, "debug");
  cprof__records recs = {0};
  cprof_sink sink = cprof_sink_buf(&r->body);
  int err = def->collect(&recs);
  if (!err) err = def->write(&recs, write_debug(def, debug), 0, &sink);
  cprof__records_free(&recs);
  /* ?reset=1 (heap_peak): forget what was just served. */
  if (!err && def->reset && atoi_or_zero(q, "reset") != 0) def->reset();
  if (err) {
    fail(r, 500, "failed to write profile: %s", cprof_strerror(err));
    return;
  }
  if (debug != 0)
    ok(r, TEXT, NULL, NULL);
  else
    ok(r, OCTETS, def->name, "");
}

/* --- the process tree (tree.h, docs/processes.md) --- */

/* This process's name, for its samples' process label. */
static void own_name(char name[16]) {
  memset(name, 0, 16);
  /* The main thread's name: the calling thread's is cprof's own. */
  if (!cprof__proc_thread_name(getpid(), name, 16)) name[0] = '\0';
}

/* How long a tree's answer may take: the window or delta asked for, and
 * then TREE_SLACK_S for the members to write and send theirs. */
#define TREE_SLACK_S 2
static int64_t tree_budget_ns(const form *q, const cprof__profile_def *def) {
  int64_t sec = 0;
  size_t len;
  if (form_value(q, "seconds", &len) && len) {
    if (!parse_int(q, "seconds", &sec) || sec < 0) sec = 0;
  }
  if (def->window && sec <= 0) sec = 30;
  if (sec > 3600) sec = 3600;
  return (sec + TREE_SLACK_S) * 1000000000LL;
}

/* Why a member is not in the answer, as a comment line. */
static void tree_missing(cprof_buf *out, const cprof__tree_reply *rep,
                         int64_t budget_ns) {
  if (rep->status == 0)
    cprof__buf_printf(out,
                      "cprof tree: pid %d (%s) gave no answer (it exited, "
                      "or took more than %lld s); left out",
                      (int)rep->who.pid, rep->who.name,
                      (long long)(budget_ns / 1000000000));
  else
    cprof__buf_printf(out, "cprof tree: pid %d (%s) answered %d; left out",
                      (int)rep->who.pid, rep->who.name, rep->status);
}

/* One member alone (?pid=N): its answer, as it gave it. */
static void tree_one(const cprof__http_req *req, const cprof__profile_def *def,
                     int64_t pid, int64_t budget_ns, cprof__http_resp *r) {
  int64_t start = cprof__mono_ns();
  cprof__tree_call *c = cprof__tree_send(req->uri, (pid_t)pid, 0);
  if (!c) {
    fail(r, 404, "no process %lld in this process tree", (long long)pid);
    return;
  }
  cprof__tree_reply *reps;
  size_t n;
  cprof__tree_collect(c, start + budget_ns, &reps, &n);
  if (n == 0 || reps[0].status == 0) {
    fail(r, 504, "process %lld gave no answer within %lld s",
         (long long)pid, (long long)(budget_ns / 1000000000));
  } else {
    r->body = reps[0].body;
    reps[0].body = (cprof_buf){0};
    if (strcmp(reps[0].type, OCTETS) == 0 && reps[0].status == 200) {
      ok(r, OCTETS, cprof__profile_route(def), "");
    } else {
      r->status = reps[0].status;
      r->content_type = TEXT;
      r->go_pprof_error = reps[0].status != 200;
    }
  }
  cprof__tree_free(c);
}

/* A tree's window as the root serves its own part: each slice of its
 * wait also sends the request, for the seconds left, to the members that
 * joined since it started, so a worker started during the window is in it
 * for the time it lived. */
typedef struct late_joiners {
  const cprof__http_req *req; /* the client's request, its wait */
  cprof__tree_call *call;
  int64_t end_ns;             /* when the window ends */
} late_joiners;

/* uri with its seconds parameter set to secs (added when missing). */
static int with_seconds(const char *uri, int64_t secs, cprof_buf *out) {
  const char *q = strchr(uri, '?');
  size_t plen = q ? (size_t)(q - uri) : strlen(uri);
  int err = cprof__buf_append(out, uri, plen);
  if (!err) err = cprof__buf_printf(out, "?seconds=%lld", (long long)secs);
  for (const char *p = q ? q + 1 : NULL; p && *p && !err;) {
    size_t len = strcspn(p, "&");
    if (!(len >= 8 && memcmp(p, "seconds=", 8) == 0)) {
      err = cprof__buf_append(out, "&", 1);
      if (!err) err = cprof__buf_append(out, p, len);
    }
    p += len;
    if (*p == '&') p++;
  }
  if (!err) err = cprof__buf_append(out, "", 1);
  return err;
}

static bool late_joiners_wait(void *ctx, int ms) {
  late_joiners *lj = ctx;
  bool stay = lj->req->wait ? lj->req->wait(lj->req->wait_ctx, ms) : true;
  if (!lj->req->wait) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
  }
  int64_t left_s = (lj->end_ns - cprof__mono_ns() + 500000000) / 1000000000;
  if (stay && left_s >= 1) {
    cprof_buf uri = {0};
    if (with_seconds(lj->req->uri, left_s, &uri) == 0)
      cprof__tree_send_new(lj->call, (const char *)uri.data);
    cprof_buf_free(&uri);
  }
  return stay;
}

/* Every process of the tree: the members' answers merged into this
 * process's own. pprof answers become one profile whose samples carry
 * their process's pid and name; text answers follow one another, each
 * under a line naming its process. */
static void tree_all(const cprof__http_opts *o, const cprof__http_req *req,
                     const form *q, const char *route, int64_t budget_ns,
                     cprof__http_resp *r) {
  int64_t start = cprof__mono_ns();
  cprof__tree_call *c = cprof__tree_send(req->uri, 0, 0);
  cprof__http_opts mine = *o;
  mine.local = true;
  const cprof__profile_def *def = cprof__http_find(route);
  if (c && def && def->window) {
    late_joiners lj = {req, c, start + budget_ns - TREE_SLACK_S * 1000000000LL};
    cprof__http_req timed = *req;
    timed.wait = late_joiners_wait;
    timed.wait_ctx = &lj;
    serve_named(&mine, &timed, q, route, r);
  } else {
    serve_named(&mine, req, q, route, r);
  }
  if (!c) return;
  cprof__tree_reply *reps;
  size_t n;
  cprof__tree_collect(c, start + budget_ns, &reps, &n);
  if (r->status != 200 || r->drop) {
    cprof__tree_free(c);
    return;
  }
  char name[16];
  own_name(name);
  cprof_buf notes = {0};
  const char *note_lines[CPROF__TREE_MAX_MEMBERS];
  size_t nnotes = 0;
  size_t note_at[CPROF__TREE_MAX_MEMBERS];
  if (r->content_type && strcmp(r->content_type, OCTETS) == 0) {
    cprof__merge_part *parts = cprof__calloc(n + 1, sizeof *parts);
    if (!parts) {
      cprof__tree_free(c);
      fail(r, 500, "%s", cprof_strerror(CPROF_ENOMEM));
      return;
    }
    parts[0] = (cprof__merge_part){r->body.data, r->body.len, getpid(), name};
    size_t k = 1;
    for (size_t i = 0; i < n; i++) {
      if (reps[i].status == 200 && strcmp(reps[i].type, OCTETS) == 0) {
        parts[k++] = (cprof__merge_part){reps[i].body.data, reps[i].body.len,
                                         reps[i].who.pid, reps[i].who.name};
      } else {
        note_at[nnotes++] = notes.len;
        tree_missing(&notes, &reps[i], budget_ns);
        cprof__buf_append(&notes, "", 1);
      }
    }
    for (size_t i = 0; i < nnotes; i++)
      note_lines[i] = notes.data ? (const char *)notes.data + note_at[i] : "";
    cprof_buf merged = {0};
    char why[160] = "";
    int err = cprof__pprof_merge(parts, k, note_lines, nnotes, &merged, why,
                                 sizeof why);
    cprof__free(parts);
    if (err) {
      cprof_buf_free(&merged);
      fail(r, 500, "could not merge the process tree's profiles: %s",
           why[0] ? why : cprof_strerror(err));
    } else {
      cprof_buf_free(&r->body);
      r->body = merged;
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      cprof__buf_printf(&r->body, "\n# cprof tree: pid %d (%s), parent %d\n",
                        (int)reps[i].who.pid, reps[i].who.name,
                        (int)reps[i].who.ppid);
      if (reps[i].status == 200) {
        cprof__buf_append(&r->body, reps[i].body.data, reps[i].body.len);
      } else {
        cprof__buf_printf(&r->body, "# ");
        tree_missing(&r->body, &reps[i], budget_ns);
        cprof__buf_printf(&r->body, "\n");
      }
    }
  }
  cprof_buf_free(&notes);
  cprof__tree_free(c);
}

/* The tree's part of a profile request: true when it answered. Without
 * ?pid, a root with members answers for all of them; ?pid=N answers for
 * process N alone (this one's own pid: this process, as if alone). */
static bool serve_tree(const cprof__http_opts *o, const cprof__http_req *req,
                       const form *q, const char *name,
                       const cprof__profile_def *def, cprof__http_resp *r) {
  if (o->local) return false;
  size_t len;
  int64_t pid = 0;
  if (form_value(q, "pid", &len) && len) {
    if (!parse_int(q, "pid", &pid) || pid <= 0 || pid > INT32_MAX) {
      fail(r, 400, "invalid value for \"pid\" - must be a process id");
      return true;
    }
    if (pid == getpid()) return false;
    tree_one(req, def, pid, tree_budget_ns(q, def), r);
    return true;
  }
  if (!cprof__tree_has_members()) return false;
  tree_all(o, req, q, name, tree_budget_ns(q, def), r);
  return true;
}

/* /debug/pprof/processes?dump=1: a dump of every listed profile, in this
 * process and, in a tree's root, in every member, each where its dumps
 * go (docs/processes.md). */
static void serve_tree_dump(const cprof__http_opts *o, cprof__http_resp *r) {
  size_t members = 0;
  if (cprof__dump_now(o->local ? "tree" : "http", &members) != 0) {
    fail(r, 409, "dumps are not configured in process %d (CPROF_DUMP)",
         (int)getpid());
    return;
  }
  cprof__buf_printf(&r->body, "dumped: process %d and %zu members\n",
                    (int)getpid(), members);
  ok(r, TEXT, NULL, NULL);
}

/* /debug/pprof/processes: this process and its tree's live members. */
static void serve_processes(cprof__http_resp *r) {
  char name[16];
  own_name(name);
  cprof__buf_printf(&r->body, "pid\tppid\tstarted\trole\tname\n");
  cprof__buf_printf(&r->body, "%d\t%d\t-\troot\t%s\n", (int)getpid(),
                    (int)getppid(), name);
  cprof__tree_member *m =
      cprof__calloc(CPROF__TREE_MAX_MEMBERS, sizeof *m);
  size_t n = m ? cprof__tree_members(m, CPROF__TREE_MAX_MEMBERS) : 0;
  for (size_t i = 0; i < n && i < CPROF__TREE_MAX_MEMBERS; i++) {
    char when[CPROF__UTC_TEXT];
    cprof__utc_text(m[i].start_unix_ns / 1000000000, when);
    cprof__buf_printf(&r->body, "%d\t%d\t%s\tmember\t%s\n", (int)m[i].pid,
                      (int)m[i].ppid, when, m[i].name);
  }
  cprof__free(m);
  ok(r, TEXT, NULL, NULL);
}

void cprof__http_serve_local(const char *uri, unsigned flags,
                             bool (*wait)(void *ctx, int ms),
                             void *wait_ctx, cprof__http_resp *resp) {
  cprof__http_opts o = {.token = NULL,
                        .max_seconds = 3600,
                        .check_host = false,
                        .local = true};
  cprof__http_req req = {.method = "GET",
                         .uri = uri,
                         .wait = wait,
                         .wait_ctx = wait_ctx,
                         .wait_ends_window = wait != NULL,
                         .shared_window = (flags & CPROF__TREE_PUSH) != 0};
  memset(resp, 0, sizeof *resp);
  cprof__http_handle(&o, &req, resp);
}

typedef struct symbol_ctx {
  cprof_buf *out;
  int err;
} symbol_ctx;

static void symbol_one(uint64_t addr, void *ctx) {
  symbol_ctx *c = ctx;
  if (c->err || cprof__pc_is_synthetic((uintptr_t)addr)) return;
  const cprof__sym_result *res = cprof__sym_lookup((uintptr_t)addr);
  if (!res || res->nframes == 0) return;
  /* Go names the innermost function at a pc (FuncForPC). */
  c->err = cprof__buf_printf(c->out, "0x%" PRIx64 " %s\n", addr,
                             res->frames[0].name);
}

static void serve_symbol(const cprof__http_req *req, const char *query,
                         cprof__http_resp *r) {
  bool post = strcmp(req->method, "POST") == 0;
  const char *in = post ? req->body : query;
  size_t len = post ? req->body_len : strlen(query);
  /* Every address may cost a cold lookup under the symbolizer's lock,
   * which every profile needs too: a request asks for a bounded number. */
  size_t words = len ? 1 : 0;
  for (const char *p = in; len && (p = memchr(p, '+', len - (size_t)(p - in)));
       p++)
    words++;
  if (words > CPROF__HTTP_MAX_SYMBOLS) {
    fail(r, 413, "too many addresses (limit %d per request)",
         CPROF__HTTP_MAX_SYMBOLS);
    return;
  }
  symbol_ctx c = {&r->body, cprof__buf_printf(&r->body, "num_symbols: 1\n")};
  if (!c.err && len) {
    cprof__sym_lock();
    c.err = cprof__sym_refresh();
    if (!c.err) cprof__symbol_addresses(in, len, symbol_one, &c);
    cprof__sym_unlock();
  }
  if (c.err) {
    fail(r, 500, "symbolization failed: %s", cprof_strerror(c.err));
    return;
  }
  ok(r, TEXT, NULL, NULL);
}

/* HTML-escapes s the way Go's html.EscapeString does. */
static void put_escaped(cprof_buf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '<':
        cprof__buf_printf(b, "&lt;");
        break;
      case '>':
        cprof__buf_printf(b, "&gt;");
        break;
      case '&':
        cprof__buf_printf(b, "&amp;");
        break;
      case '\'':
        cprof__buf_printf(b, "&#39;");
        break;
      case '"':
        cprof__buf_printf(b, "&#34;");
        break;
      default:
        cprof__buf_append(b, s, 1);
    }
  }
}

typedef struct index_entry {
  const char *name, *desc;
  long count;
} index_entry;

static int by_name(const void *a, const void *b) {
  return strcmp(((const index_entry *)a)->name, ((const index_entry *)b)->name);
}

/* Go's index page, byte for byte where the content is the same. The trace
 * row is left out (cprof has no execution tracer), and the goroutine?debug=2
 * link appears only when there is a goroutine profile to dump. */
static void serve_index(cprof__http_resp *r) {
  size_t n = cprof__profiles_count();
  index_entry *e = cprof__calloc(n + 1, sizeof *e);
  if (!e) {
    fail(r, 500, "%s", cprof_strerror(CPROF_ENOMEM));
    return;
  }
  /* Go's page links the full goroutine dump by name. */
  bool goroutine = cprof__http_find("goroutine") != NULL;
  /* The goroutine and threadcreate counts both list the threads: one
   * listing serves both (36% of a request when each took its own). */
  cprof__proc_tids_batch_begin();
  for (size_t i = 0; i < n; i++) {
    const cprof__profile_def *d = cprof__profile_at(i);
    e[i].name = cprof__profile_route(d);
    e[i].desc = d->index_description ? d->index_description : d->description;
    e[i].count = d->entries ? d->entries() : 0;
    if (e[i].count < 0) e[i].count = 0;
  }
  cprof__proc_tids_batch_end();
  e[n++] = (index_entry){
      "cmdline", "The command line invocation of the current program", 0};
  qsort(e, n, sizeof *e, by_name);

  cprof_buf *b = &r->body;
  cprof__buf_printf(
      b, "%s",
      "<html>\n<head>\n<title>/debug/pprof/</title>\n<style>\n"
      ".profile-name{\n\tdisplay:inline-block;\n\twidth:6rem;\n}\n"
      "</style>\n</head>\n<body>\n/debug/pprof/\n<br>\n"
      "<p>Set debug=1 as a query parameter to export in legacy "
      "text format</p>\n<br>\nTypes of profiles available:\n"
      "<table>\n<thead><td>Count</td><td>Profile</td></thead>\n");
  for (size_t i = 0; i < n; i++) {
    cprof__buf_printf(b, "<tr><td>%ld</td><td><a href='", e[i].count);
    put_escaped(b, e[i].name);
    cprof__buf_printf(b, "?debug=1'>");
    put_escaped(b, e[i].name);
    cprof__buf_printf(b, "</a></td></tr>\n");
  }
  cprof__buf_printf(b, "</table>\n");
  if (goroutine)
    cprof__buf_printf(b,
                      "<a href=\"goroutine?debug=2\">full goroutine stack "
                      "dump</a>\n");
  cprof__buf_printf(b, "<br>\n<a href=\"ui/\">flame graph viewer</a>\n");
  /* A process tree's root (docs/processes.md): its profiles cover the
   * members too. */
  size_t members = cprof__tree_members(NULL, 0);
  if (members)
    cprof__buf_printf(b,
                      "<br>\n<a href=\"processes\">%zu processes</a>: this "
                      "one and the %zu it forked; every profile covers them "
                      "all, ?pid=N one\n",
                      members + 1, members);
  cprof__buf_printf(b, "<br>\n<p>\nProfile Descriptions:\n<ul>\n");
  for (size_t i = 0; i < n; i++) {
    cprof__buf_printf(b, "<li><div class=profile-name>");
    put_escaped(b, e[i].name);
    cprof__buf_printf(b, ": </div> ");
    put_escaped(b, e[i].desc ? e[i].desc : "");
    cprof__buf_printf(b, "</li>\n");
  }
  int err = cprof__buf_printf(b, "</ul>\n</p>\n</body>\n</html>");
  cprof__free(e);
  if (err) {
    fail(r, 500, "%s", cprof_strerror(err));
    return;
  }
  ok(r, HTML, NULL, NULL);
}

/* The profile viewer (ui.c): its page and the list of profiles it offers.
 * The page fetches the profiles themselves through the routes above. */
static void serve_ui(const char *what, cprof__http_resp *r) {
  int err = strcmp(what, "profiles.json") == 0
                ? cprof__ui_profiles_json(&r->body)
                : cprof__ui_page(&r->body);
  if (err) {
    fail(r, 500, "%s", cprof_strerror(err));
    return;
  }
  ok(r, *what ? "application/json" : HTML, NULL, NULL);
}

static bool method_allowed(const char *m) {
  return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 ||
         strcmp(m, "POST") == 0;
}

bool cprof__http_admit(const cprof__http_opts *o, const cprof__http_req *req,
                       cprof__http_resp *r) {
  memset(r, 0, sizeof *r);
  if (!method_allowed(req->method)) {
    r->allow = true;
    fail(r, 405, "Method Not Allowed");
    return false;
  }
  /* A page on another site can reach a loopback server through a name it
   * controls that resolves to 127.0.0.1 (DNS rebinding); the browser
   * still sends that name as Host. */
  if (o->check_host && req->host &&
      !cprof__host_is_loopback(req->host, req->host_len, o->listen_host)) {
    fail(r, 403,
         "Forbidden: the Host header must name a loopback address (localhost, "
         "127.0.0.1, [::1])");
    return false;
  }
  if (req->uri_too_long || strlen(req->uri) > CPROF__HTTP_MAX_URI) {
    fail(r, 414, "request URI too long (limit %d bytes)", CPROF__HTTP_MAX_URI);
    return false;
  }
  if (!is_ui_page(req) &&
      !cprof__http_token_ok(o->token, req->authorization,
                            req->authorization_len)) {
    r->www_authenticate = true;
    fail(r, 401, "%s",
         req->authorization
             ? "Unauthorized: invalid bearer token"
             : "Unauthorized: send \"Authorization: Bearer <token>\"");
    return false;
  }
  return true;
}

/* True when the len bytes at path are the string s. */
static bool path_is(const char *path, size_t len, const char *s) {
  return len == strlen(s) && memcmp(path, s, len) == 0;
}

bool cprof__http_wants_body(const cprof__http_req *req) {
  if (strcmp(req->method, "POST") != 0) return false;
  size_t plen = strcspn(req->uri, "?"), n;
  char path[CPROF__HTTP_MAX_URI + 1], why[128];
  return cprof__path_decode(req->uri, plen, path, sizeof path, &n, why,
                            sizeof why) == 0 &&
         path_is(path, n, PREFIX "symbol");
}

/* Go's http.Redirect(w, r, url, 301) as ServeMux calls it, url being the
 * cleaned path (len bytes at path) escaped and the raw query: Location is
 * that url with bytes past ASCII as %xx (Go's hexEscapeNonASCII); GET and
 * HEAD get Go's HTML type and a short body (a HEAD's is not sent), POST
 * neither. */
static void redirect(const cprof__http_req *req, const char *path, size_t len,
                     const char *rawq, cprof__http_resp *r) {
  size_t qlen = strlen(rawq);
  char *url = cprof__malloc(3 * len + qlen + 2);
  if (!url) {
    fail(r, 500, "%s", cprof_strerror(CPROF_ENOMEM));
    return;
  }
  size_t n = cprof__path_escape(path, len, url);
  if (qlen) {
    url[n++] = '?';
    memcpy(url + n, rawq, qlen + 1);
    n += qlen;
  }
  cprof_buf *b = &r->body;
  b->len = 0;
  int err = 0;
  bool post = strcmp(req->method, "POST") == 0;
  if (!post) {
    err |= cprof__buf_printf(b, "<a href=\"");
    put_escaped(b, url);
    err |= cprof__buf_printf(b, "\">Moved Permanently</a>.\n\n");
  }
  /* Location lives after the body, in the body's memory, which the server
   * frees only once the headers are out. */
  size_t body_len = b->len;
  err |= cprof__buf_append(b, "", 1);
  size_t at = b->len;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)url[i];
    err |= c < 0x80 ? cprof__buf_append(b, &url[i], 1)
                    : cprof__buf_printf(b, "%%%x", c);
  }
  err |= cprof__buf_append(b, "", 1);
  cprof__free(url);
  if (err) {
    fail(r, 500, "%s", cprof_strerror(CPROF_ENOMEM));
    return;
  }
  b->len = body_len;
  r->status = 301;
  r->content_type = post ? NULL : HTML;
  r->location = (const char *)b->data + at;
}

/* What a request needs beyond its stack frame: its path, decoded and
 * cleaned, and its parameters. */
typedef struct scratch {
  char path[CPROF__HTTP_MAX_URI + 1];
  char clean[CPROF__HTTP_MAX_URI + 2];
  form form;
} scratch;

static void route(const cprof__http_opts *o, const cprof__http_req *req,
                  scratch *s, cprof__http_resp *r) {
  const char *qmark = strchr(req->uri, '?');
  size_t plen = qmark ? (size_t)(qmark - req->uri) : strlen(req->uri), n;
  const char *rawq = qmark ? qmark + 1 : "";
  char why[128];
  if (cprof__path_decode(req->uri, plen, s->path, sizeof s->path, &n, why,
                         sizeof why)) {
    fail(r, 400, "%s", why);
    return;
  }
  /* Go's ServeMux: the root of a subtree without its slash goes to the
   * subtree, and a path that is not clean to its cleaned form, the query
   * along in both cases. */
  size_t cn = cprof__path_clean(s->path, n, s->clean);
  if (path_is(s->clean, cn, "/debug/pprof") ||
      path_is(s->clean, cn, PREFIX "ui")) {
    s->clean[cn++] = '/';
    redirect(req, s->clean, cn, rawq, r);
    return;
  }
  if (cn != n || memcmp(s->clean, s->path, n) != 0) {
    redirect(req, s->clean, cn, rawq, r);
    return;
  }
  const char *path = s->path;
  if (n < strlen(PREFIX) || memcmp(path, PREFIX, strlen(PREFIX)) != 0) {
    not_found(r);
    return;
  }
  const char *name = path + strlen(PREFIX);
  /* A "%00" in a name names no profile and no route. */
  if (strlen(name) != n - strlen(PREFIX)) {
    fail(r, 404, "Unknown profile");
    return;
  }

  /* /symbol reads its raw query (or body) itself, as Go does. */
  if (strcmp(name, "symbol") == 0) {
    serve_symbol(req, rawq, r);
    return;
  }

  form *q = &s->form;
  q->body.npairs = 0;
  if (cprof__query_parse(&q->query, rawq, strlen(rawq), why, sizeof why)) {
    fail(r, 400, "%s", why);
    return;
  }
  if (strcmp(req->method, "POST") == 0 && req->body_len) {
    if (req->body_len > CPROF__QUERY_MAX_LEN) {
      fail(r, 413, "request body too large (limit %d bytes)",
           CPROF__QUERY_MAX_LEN);
      return;
    }
    if (cprof__query_parse(&q->body, req->body, req->body_len, why,
                           sizeof why)) {
      fail(r, 400, "too many form parameters (limit %d)",
           CPROF__QUERY_MAX_PAIRS);
      return;
    }
  }
  if (*name == 0) {
    serve_index(r);
  } else if (strcmp(name, "ui/") == 0 ||
             strcmp(name, "ui/profiles.json") == 0) {
    serve_ui(name + 3, r);
  } else if (strcmp(name, "cmdline") == 0) {
    serve_cmdline(r);
  } else if (strcmp(name, "processes") == 0) {
    if (atoi_or_zero(q, "dump") != 0)
      serve_tree_dump(o, r);
    else
      serve_processes(r);
  } else if (strcmp(name, "trace") == 0) {
    fail(r, 501,
         "Could not enable tracing: execution traces are not supported by "
         "cprof");
  } else {
    serve_named(o, req, q, name, r);
  }
}

void cprof__http_handle(const cprof__http_opts *o, const cprof__http_req *req,
                        cprof__http_resp *r) {
  if (!cprof__http_admit(o, req, r)) return;
  if (req->body_too_large) {
    /* /symbol's body, or a form (which has the query's limit). */
    fail(r, 413, "request body too large (limit %u bytes)",
         cprof__http_wants_body(req) ? CPROF__HTTP_MAX_BODY
                                     : CPROF__QUERY_MAX_LEN);
    return;
  }
  /* Too big for a thread's stack frame on every request path: heap. */
  scratch *s = cprof__malloc(sizeof *s);
  if (!s) {
    fail(r, 500, "%s", cprof_strerror(CPROF_ENOMEM));
    return;
  }
  route(o, req, s, r);
  cprof__free(s);
}
