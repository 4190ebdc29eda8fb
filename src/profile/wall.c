/*
 * The wall-clock profile (wall.h). Each window has a sampler thread of
 * cprof's own (cprof__thread_spawn: every signal blocked, left out of
 * every profile) that, at each tick, samples every thread
 * (source/thread_sample.h): a thread stopped in the kernel is
 * read from /proc/self/task/TID/{stat,syscall} and walked from there,
 * never signalled; only a thread that is running user code gets thread
 * sampling's signal, and it is in no system call to cut short.
 * Each thread's stack, with its current cprof labels (labels.h, read
 * from where the thread keeps them), is added to the window's table
 * keyed by (stack, thread, system call, state), weighing the time since
 * the previous tick. The window is written as pprof: samples/count and
 * wall/nanoseconds, labels state (running, or the system call it waits
 * in), thread and thread_id. Normal context only.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "base/env.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "capture/labels.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "capture/taskread.h"
#include "capture/tasksample.h"
#include "encode/writer.h"
#include "source/thread_sample.h"
#include "profile/wall.h"
#include "source/threads.h"

typedef struct wall_entry {
  cprof__stack_id sid;
  pid_t tid;
  long nr; /* the system call it waited in, or -1 */
  char state;
  char name[16]; /* the thread's, when the entry was made */
  int64_t count, ns;
} wall_entry;

typedef struct wall_window {
  int hz;
  int64_t period_ns;
  int64_t start_ns, start_mono; /* wall clock, monotonic */
  pthread_t thread;
  bool thread_started, stopping, follow;
  pthread_mutex_t lock; /* the fields below and stopping */
  pthread_cond_t cond;
  cprof__hmap index; /* entry key -> position + 1 */
  wall_entry *v;
  size_t len, cap;
  int64_t ticks, last_mono;
  /* How late the ticks ran, in all: a sampler starved of CPU looks at the
   * threads late, when a CPU comes free (docs/wall.md). */
  int64_t late_ns;
  int err; /* the first error a tick met */
  struct wall_window *next; /* in the list of open windows */
} wall_window;

/* Open windows, for fork: the child has no sampler thread. */
static wall_window *open_windows;
static CPROF__FORK_LOCK pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;

/* CPROF_WALL_HZ, read once (at load, from init), like CPROF_CPU_HZ. */
static int default_hz = CPROF__WALL_DEFAULT_HZ;
static pthread_once_t default_hz_once = PTHREAD_ONCE_INIT;

static void read_default_hz(void) {
  long long hz;
  if (cprof__env_int("CPROF_WALL_HZ", 1, CPROF__WALL_MAX_HZ, "using 20 Hz",
                     &hz))
    default_hz = (int)hz;
}

int cprof__wall_default_hz(void) {
  pthread_once(&default_hz_once, read_default_hz);
  return default_hz;
}

static uint64_t entry_key(cprof__stack_id sid, pid_t tid, long nr, char st) {
  uint64_t h = CPROF__HASH_SEED;
  h = cprof__hash_bytes(h, &sid, sizeof sid);
  h = cprof__hash_bytes(h, &tid, sizeof tid);
  h = cprof__hash_bytes(h, &nr, sizeof nr);
  h = cprof__hash_bytes(h, &st, sizeof st);
  return h;
}

/* The thread's name as it is now (entries are made as stacks are first
 * seen, so a thread that names itself after it starts has its name on all
 * but its first entries). */
static void read_name(pid_t tid, char *name, size_t size) {
  if (!cprof__proc_thread_name(tid, name, size))
    snprintf(name, size, "thread-%d", (int)tid);
}

/* Entries are found by a hash of their key, checked against the entry
 * (a collision probes on). Lock held. */
static int add_sample(wall_window *w, cprof__stack_id sid, pid_t tid, long nr,
                      char st, int64_t ns) {
  uint64_t key = entry_key(sid, tid, nr, st), pos;
  for (;; key = key + 1 ? key + 1 : 1) {
    if (!cprof__hmap_get(&w->index, key, &pos)) break;
    wall_entry *e = &w->v[pos - 1];
    if (e->sid == sid && e->tid == tid && e->nr == nr && e->state == st) {
      e->count++;
      e->ns += ns;
      return 0;
    }
  }
  if (w->len == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 256;
    wall_entry *nv = cprof__realloc(w->v, cap * sizeof *nv);
    if (!nv) return CPROF_ENOMEM;
    w->v = nv;
    w->cap = cap;
  }
  wall_entry *e = &w->v[w->len];
  *e = (wall_entry){.sid = sid, .tid = tid, .nr = nr, .state = st,
                    .count = 1, .ns = ns};
  read_name(tid, e->name, sizeof e->name);
  return cprof__hmap_put(&w->index, key, ++w->len);
}

/* One tick: every thread's sample, each with its labels. Lock held. */
static int add_tick(wall_window *w, const cprof__records *recs, int64_t ns) {
  int err = 0;
  for (size_t i = 0; !err && i < recs->len; i++) {
    const cprof__record *r = &recs->v[i];
    pid_t tid = (pid_t)r->tag;
    cprof__stack_id sid = r->sid;
    const cprof_labels *set = cprof__labels_of(tid);
    if (set) sid = cprof__labels_restack_with(sid, set);
    err = add_sample(w, sid, tid, (long)r->v[3] - 1, (char)r->v[1], ns);
  }
  return err;
}

static struct timespec mono_at(int64_t ns) {
  return (struct timespec){(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
}

static void *sampler_main(void *arg) {
  wall_window *w = arg;
  int64_t next = cprof__mono_ns();
  cprof__lock(&w->lock);
  while (!w->stopping) {
    cprof__unlock(&w->lock);
    /* Objects loaded meanwhile get their unwind tables: once a second. */
    if (w->ticks % w->hz == 0) cprof__stack_refresh();
    cprof__records recs = {0};
    int64_t now = cprof__mono_ns();
    /* Running threads' answers are waited for half a period at most, so
     * that ticks keep to their times. */
    int err = cprof__thread_sample_running(&recs, w->period_ns / 2);
    cprof__lock(&w->lock);
    if (now > next) w->late_ns += now - next;
    /* Each sample stands for the time since the previous tick (the
     * first, for one period). */
    int64_t ns = w->ticks ? now - w->last_mono : w->period_ns;
    if (!err) err = add_tick(w, &recs, ns > 0 ? ns : w->period_ns);
    if (err && !w->err) w->err = err;
    w->ticks++;
    w->last_mono = now;
    /* The bound on the total cost: ticks come less often when there are
     * more threads than the bound allows at this rate. */
    int64_t p = w->period_ns;
    if ((int64_t)recs.len * w->hz > CPROF__WALL_MAX_SAMPLES_PER_SECOND)
      p = (int64_t)recs.len * 1000000000 / CPROF__WALL_MAX_SAMPLES_PER_SECOND;
    cprof__records_free(&recs);
    next += p;
    now = cprof__mono_ns();
    if (next < now) next = now; /* a slow tick: no catching up */
    struct timespec until = mono_at(next);
    while (!w->stopping &&
           cprof__cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT) {
    }
  }
  cprof__unlock(&w->lock);
  return NULL;
}

static void free_table(wall_window *w) {
  cprof__hmap_free(&w->index);
  cprof__free(w->v);
  w->v = NULL;
  w->len = w->cap = 0;
}

static void init_sync(wall_window *w) {
  pthread_mutex_init(&w->lock, NULL);
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &a);
  pthread_condattr_destroy(&a);
}

static int spawn(wall_window *w) {
  w->ticks = 0;
  w->start_ns = cprof__now_ns();
  w->start_mono = cprof__mono_ns();
  int e = cprof__thread_spawn(&w->thread, sampler_main, w, "cprof-wall");
  w->thread_started = e == 0;
  return e ? CPROF_ESYS : 0;
}

/* Fork: the child has no sampler. A window that follows forks starts
 * again there from zero; the others are left with what they had (their
 * stop writes an empty window). */
static void before_fork(void) {
  cprof__lock(&list_lock);
  for (wall_window *w = open_windows; w; w = w->next) cprof__lock(&w->lock);
}

static void parent_after_fork(void) {
  for (wall_window *w = open_windows; w; w = w->next) cprof__unlock(&w->lock);
  cprof__unlock(&list_lock);
}

static void child_after_fork(void) {
  pthread_mutex_init(&list_lock, NULL);
  for (wall_window *w = open_windows; w; w = w->next) {
    init_sync(w);
    free_table(w);
    memset(&w->index, 0, sizeof w->index);
    w->thread_started = false;
    w->err = 0;
    if (w->follow && !w->stopping) spawn(w);
  }
}

static void fork_init(void) {
  cprof__atfork(CPROF__FORK_WALL, before_fork, parent_after_fork,
                child_after_fork);
}

static int window_start(long long hz, void **handle) {
  fork_init();
  cprof__stacktab_init();
  wall_window *w = cprof__calloc(1, sizeof *w);
  if (!w) return CPROF_ENOMEM;
  w->hz = (int)(hz ? hz : cprof__wall_default_hz());
  if (w->hz < 1 || w->hz > CPROF__WALL_MAX_HZ) w->hz = CPROF__WALL_DEFAULT_HZ;
  w->period_ns = 1000000000 / w->hz;
  init_sync(w);
  cprof__lock(&list_lock);
  int err = spawn(w);
  if (!err) {
    w->next = open_windows;
    open_windows = w;
  }
  cprof__unlock(&list_lock);
  if (err) {
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    cprof__free(w);
    return err;
  }
  *handle = w;
  return 0;
}

static void window_follow_forks(void *handle) {
  wall_window *w = handle;
  cprof__lock(&w->lock);
  w->follow = true;
  cprof__unlock(&w->lock);
}

/* The state label: the system call a thread waits in, else its /proc
 * state (running for a thread on a CPU or waiting for one). */
static const char *state_label(const wall_entry *e, char *buf, size_t size) {
  if (e->nr >= 0) {
    const char *n = cprof__syscall_name(e->nr);
    if (n) return n;
    snprintf(buf, size, "syscall_%ld", e->nr);
    return buf;
  }
  return cprof__task_state_name(e->state);
}

static int write_window(const wall_window *w, int64_t end_mono,
                        const cprof_sink *sink) {
  static const cprof__value_type types[] = {{"samples", "count"},
                                            {"wall", "nanoseconds"}};
  const cprof__prof_desc d = {
      .sample_types = types,
      .nsample_types = 2,
      .period_type = {"wall", "nanoseconds"},
      .period = w->period_ns,
      .default_sample_type = "wall",
      .time_nanos = w->start_ns,
      .duration_nanos = end_mono - w->start_mono,
  };
  cprof__prof *p = cprof__prof_begin(&d, sink);
  if (!p) return CPROF_ENOMEM;
  char comment[224];
  snprintf(comment, sizeof comment,
           "cprof wall: %d Hz per thread, %lld ticks, at most %d samples/s, "
           "ticks late by %lld us on average, running threads sampled by %s",
           w->hz, (long long)w->ticks, CPROF__WALL_MAX_SAMPLES_PER_SECOND,
           (long long)(w->ticks ? w->late_ns / w->ticks / 1000 : 0),
           cprof__task_sample_enabled() ? "perf events"
                                        : "a signal (no perf events)");
  cprof__prof_comment(p, comment);
  cprof__tail_hide_interposers(true);
  for (size_t i = 0; i < w->len; i++) {
    const wall_entry *e = &w->v[i];
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(e->sid, &pcs);
    char buf[32];
    const cprof__pprof_label labels[] = {
        {.key = "state", .str = state_label(e, buf, sizeof buf)},
        {.key = "thread", .str = e->name},
        {.key = "thread_id", .num = e->tid},
    };
    const int64_t values[2] = {e->count, e->ns};
    cprof__prof_sample(p, pcs, n, values, labels, 3);
  }
  cprof__tail_hide_interposers(false);
  return cprof__prof_end(p);
}

static int window_stop(void *handle, const cprof_sink *sink) {
  wall_window *w = handle;
  cprof__lock(&list_lock);
  for (wall_window **at = &open_windows; *at; at = &(*at)->next)
    if (*at == w) {
      *at = w->next;
      break;
    }
  cprof__unlock(&list_lock);
  cprof__lock(&w->lock);
  w->stopping = true;
  pthread_cond_signal(&w->cond);
  cprof__unlock(&w->lock);
  if (w->thread_started) cprof__join(w->thread, NULL);
  int64_t end = cprof__mono_ns();
  int err = w->err;
  if (sink && !err) err = write_window(w, end, sink);
  free_table(w);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  cprof__free(w);
  return err;
}

static long long window_default_rate(void) { return cprof__wall_default_hz(); }

static const cprof__window_ops wall_window_ops = {
    .start = window_start,
    .follow_forks = window_follow_forks,
    .stop = window_stop,
    .default_rate = window_default_rate,
};

const cprof__profile_def cprof__wall_profile = {
    .name = "wall",
    .description = "Wall-clock profile: every thread sampled at a fixed "
                   "rate, on and off the CPU, labelled with its state "
                   "(running or the system call it waits in). You can "
                   "specify the duration in the seconds GET parameter.",
    .max_debug = 0,
    .rate_key = "hz",
    .rate_unit = "samples per second per thread",
    .rate_min = 1,
    .rate_max = CPROF__WALL_MAX_HZ,
    .push = CPROF__PUSH_WINDOW,
    .push_when_named = true,
    .window = &wall_window_ops,
};
