/*
 * The toy profile (toy.h): a window's start time; at its end, thread
 * sampling's stacks (source/thread_sample.h), each weighed by the window's
 * length, written through the encoder. Normal context.
 */
#include <stdint.h>

#include "base/internal.h"
#include "base/mem.h"
#include "capture/records.h"
#include "capture/stacktab.h"
#include "encode/writer.h"
#include "profile/toy.h"
#include "source/thread_sample.h"

typedef struct toy_window {
  int64_t start_ns, start_mono;
} toy_window;

static int toy_start(long long rate, void **handle) {
  (void)rate;
  toy_window *w = cprof__calloc(1, sizeof *w);
  if (!w) return CPROF_ENOMEM;
  w->start_ns = cprof__now_ns();
  w->start_mono = cprof__mono_ns();
  *handle = w;
  return 0;
}

static void toy_follow_forks(void *handle) { (void)handle; }

static int toy_stop(void *handle, const cprof_sink *sink) {
  toy_window *w = handle;
  int err = 0;
  if (sink) {
    cprof__records recs = {0};
    err = cprof__thread_sample_all(&recs);
    const int64_t length = cprof__mono_ns() - w->start_mono;
    const cprof__value_type st = {"toy", "nanoseconds"};
    const cprof__prof_desc d = {.sample_types = &st,
                                .nsample_types = 1,
                                .period_type = st,
                                .period = 1,
                                .time_nanos = w->start_ns,
                                .duration_nanos = length};
    cprof__prof *p = err ? NULL : cprof__prof_begin(&d, sink);
    if (!err && !p) err = CPROF_ENOMEM;
    for (size_t i = 0; p && i < recs.len; i++) {
      const uintptr_t *pcs;
      size_t n = cprof__stacktab_get(recs.v[i].sid, &pcs);
      cprof__prof_sample(p, pcs, n, &length, NULL, 0);
    }
    if (p) err = cprof__prof_end(p);
    cprof__records_free(&recs);
  }
  cprof__free(w);
  return err;
}

static long long toy_default_rate(void) { return 1; }

static const cprof__window_ops toy_window_ops = {
    .start = toy_start,
    .follow_forks = toy_follow_forks,
    .stop = toy_stop,
    .default_rate = toy_default_rate,
};

const cprof__profile_def cprof__toy_profile = {
    .name = "toy",
    .description = "A toy: every thread's stack at the end of a window, "
                   "weighed by the window's length.",
    .max_debug = 0,
    .push = CPROF__PUSH_WINDOW,
    .push_when_named = true,
    .window = &toy_window_ops,
};
