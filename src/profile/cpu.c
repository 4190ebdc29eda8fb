/*
 * The CPU profile: sessions of the CPU-time sampler (source/cpu_timer.h) turned
 * into pprof, with each sample's thread name and id as labels; the public
 * cprof_cpu_start/stop, and the one-window profile the sinks ask for.
 * Calls the sampler's session functions, capture/ and encode/. Normal
 * context only.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "base/fork.h"
#include "base/env.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "capture/stacktab.h"
#include "encode/writer.h"
#include "profile/cpu.h"
#include "source/cpu_timer.h"

typedef cprof__cpu_thread_name exited_name;

/* A thread's name: from the names of threads that exited during the
 * session, else from /proc, else "thread-TID". */
static void thread_name(pid_t tid, const exited_name *gone, size_t ngone,
                        char *out, size_t len) {
  for (size_t i = 0; i < ngone; i++) {
    if (gone[i].tid == tid) {
      snprintf(out, len, "%s", gone[i].name);
      return;
    }
  }
  if (!cprof__proc_thread_name(tid, out, len))
    snprintf(out, len, "thread-%d", (int)tid);
}

typedef struct write_ctx {
  cprof__prof *prof;
  const exited_name *gone; /* threads that exited, as the session ended */
  size_t ngone;
  cprof__hmap names; /* tid -> index + 1 into the name cache */
  exited_name *cache;
  size_t ncache;
} write_ctx;

static const char *cached_name(write_ctx *w, pid_t tid) {
  uint64_t idx;
  if (cprof__hmap_get(&w->names, (uint64_t)tid + 1, &idx))
    return w->cache[idx].name;
  exited_name *c = cprof__realloc(w->cache, (w->ncache + 1) * sizeof *c);
  if (!c) return "";
  w->cache = c;
  c[w->ncache].tid = tid;
  thread_name(tid, w->gone, w->ngone, c[w->ncache].name, sizeof c->name);
  cprof__hmap_put(&w->names, (uint64_t)tid + 1, w->ncache);
  return c[w->ncache++].name;
}

static void write_sample(cprof__stack_id sid, uint32_t tag,
                         const int64_t *vals, void *ctx) {
  write_ctx *w = ctx;
  if (vals[0] == 0) return;
  const uintptr_t *pcs;
  size_t n = cprof__stacktab_get(sid, &pcs);
  const cprof__pprof_label labels[2] = {
      {.key = "thread", .str = cached_name(w, (pid_t)tag)},
      {.key = "thread_id", .num = (int64_t)tag},
  };
  cprof__prof_sample(w->prof, pcs, n, vals, labels, 2);
}

static int write_window(const cprof__cpu_window *s, const cprof_sink *sink) {
  static const cprof__value_type types[2] = {{"samples", "count"},
                                             {"cpu", "nanoseconds"}};
  const cprof__prof_desc d = {
      .sample_types = types,
      .nsample_types = 2,
      .period_type = {"cpu", "nanoseconds"},
      .period = 1000000000 / s->hz,
      .time_nanos = s->start_ns,
      .duration_nanos = s->end_ns - s->start_ns,
  };
  cprof__prof *p = cprof__prof_begin(&d, sink);
  if (!p) return CPROF_ENOMEM;
  cprof__prof_drop_comment(p, s->agg);
  char text[128];
  if (s->unarmed) {
    snprintf(text, sizeof text,
             "cprof cpu: %llu threads could not be given a CPU timer",
             (unsigned long long)s->unarmed);
    cprof__prof_comment(p, text);
  }
  if (s->signo == SIGPROF)
    snprintf(text, sizeof text, "cprof cpu: the timers' signal: SIGPROF");
  else if (s->signo >= SIGRTMIN)
    snprintf(text, sizeof text, "cprof cpu: the timers' signal: SIGRTMIN+%d",
             s->signo - SIGRTMIN);
  else
    snprintf(text, sizeof text, "cprof cpu: the timers' signal: none at the end");
  cprof__prof_comment(p, text);
  if (s->no_room) {
    snprintf(text, sizeof text,
             "cprof cpu: %llu samples not taken: too little stack left",
             (unsigned long long)s->no_room);
    cprof__prof_comment(p, text);
  }
  write_ctx w = {.prof = p, .gone = s->gone, .ngone = s->ngone};
  cprof__agg_foreach(s->agg, write_sample, &w);
  cprof__hmap_free(&w.names);
  cprof__free(w.cache);
  uint64_t lost = s->lost;
  if (lost) {
    const uintptr_t pc = CPROF__PC_LOST;
    const int64_t vals[2] = {(int64_t)lost,
                             (int64_t)lost * (1000000000 / s->hz)};
    cprof__prof_sample(p, &pc, 1, vals, NULL, 0);
  }
  return cprof__prof_end(p);
}

int cprof__cpu_session_stop(cprof__cpu_session *s, const cprof_sink *sink) {
  cprof__cpu_window w;
  int err = cprof__cpu_session_end(s, sink != NULL, &w);
  if (err || !sink) return err;
  err = write_window(&w, sink);
  cprof__cpu_window_free(&w);
  return err;
}

int cprof__cpu_profile_for(int hz, int64_t ns, cprof__wait_fn wait,
                           void *ctx, const cprof_sink *sink) {
  cprof__cpu_session *s;
  int err = cprof__cpu_session_start(hz, &s);
  if (err) return err;
  bool complete = wait(ctx, ns);
  err = cprof__cpu_session_stop(s, complete ? sink : NULL);
  return complete ? err : CPROF_ECANCELED;
}

/* The application's own session, behind the public API. */
static cprof__cpu_session *app_session;
static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t app_once = PTHREAD_ONCE_INIT;

/* A fork child does not carry the application's session on (the sampler
 * released it there). */
static void app_after_fork(void) {
  app_session = NULL;
  pthread_mutex_init(&app_lock, NULL);
}

static void app_init(void) {
  cprof__atfork(CPROF__FORK_CPU_PROFILE, NULL, NULL, app_after_fork);
}

int cprof_cpu_start(int hz) {
  pthread_once(&app_once, app_init);
  cprof__lock(&app_lock);
  int err = app_session ? CPROF_EBUSY
                        : cprof__cpu_session_start(hz, &app_session);
  cprof__unlock(&app_lock);
  return err;
}

int cprof_cpu_stop(const cprof_sink *sink) {
  cprof__lock(&app_lock);
  cprof__cpu_session *s = app_session;
  app_session = NULL;
  cprof__unlock(&app_lock);
  if (!s) return CPROF_EINVAL;
  return cprof__cpu_session_stop(s, sink);
}


/* CPROF_CPU_HZ, read once (at load, by cprof__cpu_default_hz from init):
 * a bad value is reported then, once, not when a profile starts. */
static int default_hz = CPROF__CPU_DEFAULT_HZ;
static pthread_once_t default_hz_once = PTHREAD_ONCE_INIT;

static void read_default_hz(void) {
  long long hz;
  if (cprof__env_int("CPROF_CPU_HZ", 1, CPROF__CPU_MAX_HZ, "using 100 Hz",
                     &hz))
    default_hz = (int)hz;
}

int cprof__cpu_default_hz(void) {
  pthread_once(&default_hz_once, read_default_hz);
  return default_hz;
}

static int window_start(long long hz, void **handle) {
  cprof__cpu_session *s;
  int err = cprof__cpu_session_start((int)(hz ? hz : cprof__cpu_default_hz()),
                                     &s);
  if (!err) *handle = s;
  return err;
}

static void window_follow_forks(void *handle) {
  cprof__cpu_session_follow_forks(handle);
}

static int window_stop(void *handle, const cprof_sink *sink) {
  return cprof__cpu_session_stop(handle, sink);
}

static long long window_default_rate(void) { return cprof__cpu_default_hz(); }

static const cprof__window_ops cpu_window = {
    .start = window_start,
    .follow_forks = window_follow_forks,
    .stop = window_stop,
    .default_rate = window_default_rate,
};

const cprof__profile_def cprof__cpu_profile = {
    .name = "cpu",
    .route = "profile",
    .description = "CPU profile. You can specify the duration in the seconds "
                   "GET parameter. After you get the profile file, use the go "
                   "tool pprof command to investigate the profile.",
    .max_debug = 0,
    .rate_key = "hz",
    .rate_unit = "samples per second of CPU time",
    .rate_min = 1,
    .rate_max = CPROF__CPU_MAX_HZ,
    .push = CPROF__PUSH_WINDOW,
    .window = &cpu_window,
};
