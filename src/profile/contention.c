/*
 * The `mutex` and `block` profiles, read from the contention source's
 * aggregation tables (source/lock_interpose.h): Go's debug=1 text and pprof,
 * delays in nanoseconds. Calls the source's accessors, capture/ and
 * encode/. Normal context only.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "base/mem.h"
#include "capture/stacktab.h"
#include "encode/writer.h"
#include "profile/contention.h"
#include "source/lock_interpose.h"

static int collect_from(bool mutex, cprof__records *out) {
  cprof__agg *a = cprof__contention_agg(mutex);
  if (!a) {
    out->time_ns = cprof__now_ns();
    return 0;
  }
  return cprof__records_from_agg(out, a);
}

static int block_collect(cprof__records *out) {
  return collect_from(false, out);
}

static int mutex_collect(cprof__records *out) {
  return collect_from(true, out);
}

static long entries_of(int (*collect)(cprof__records *)) {
  cprof__records recs = {0};
  long n = collect(&recs) == 0 ? (long)recs.len : 0;
  cprof__records_free(&recs);
  return n;
}

static long block_entries(void) { return entries_of(block_collect); }
static long mutex_entries(void) { return entries_of(mutex_collect); }

static int by_delay_desc(const void *a, const void *b) {
  const cprof__record *x = a, *y = b;
  if (x->v[1] != y->v[1]) return x->v[1] > y->v[1] ? -1 : 1;
  return x->sid < y->sid ? -1 : x->sid > y->sid;
}

static int write_text(bool is_mutex, const cprof__record *v, size_t len,
                      const cprof_sink *sink) {
  cprof_buf out = {0};
  /* Delays are kept in nanoseconds, so the "cycles" Go's text counts are
   * nanoseconds and a second holds 1e9 of them. */
  int err = cprof__buf_printf(&out, "--- %s:\ncycles/second=1000000000\n",
                              is_mutex ? "mutex" : "contention");
  if (!err && is_mutex)
    err = cprof__buf_printf(&out, "sampling period=%d\n",
                            cprof__mutex_fraction());
  cprof__text_begin_calls();
  for (size_t i = 0; !err && i < len; i++) {
    err = cprof__buf_printf(&out, "%lld %lld", (long long)v[i].v[1],
                            (long long)(v[i].v[0] / CPROF__CONTENTION_UNIT));
    if (!err) err = cprof__text_record(&out, v[i].sid);
  }
  cprof__text_end();
  return cprof__text_flush(&out, err, sink);
}

static int write_pprof(const cprof__agg *agg, const cprof__record *v,
                       size_t len, int64_t time_ns, int64_t duration_ns,
                       const cprof_sink *sink) {
  static const cprof__value_type types[2] = {{"contentions", "count"},
                                             {"delay", "nanoseconds"}};
  const cprof__prof_desc d = {
      .sample_types = types,
      .nsample_types = 2,
      .period_type = types[0],
      .period = 1,
      .time_nanos = time_ns,
      .duration_nanos = duration_ns,
      .first_is_call = true,
  };
  cprof__prof *p = cprof__prof_begin(&d, sink);
  if (!p) return CPROF_ENOMEM;
  cprof__prof_drop_comment(p, agg);
  for (size_t i = 0; i < len; i++) {
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(v[i].sid, &pcs);
    const int64_t vals[2] = {v[i].v[0] / CPROF__CONTENTION_UNIT, v[i].v[1]};
    cprof__prof_sample(p, pcs, n, vals, NULL, 0);
  }
  return cprof__prof_end(p);
}

static int contention_write(bool is_mutex, const cprof__records *recs,
                            int debug, int64_t duration_ns,
                            const cprof_sink *sink) {
  cprof__record *v = cprof__malloc((recs->len + 1) * sizeof *v);
  if (!v) return CPROF_ENOMEM;
  size_t len = 0;
  for (size_t i = 0; i < recs->len; i++)
    if (recs->v[i].v[0] > 0 || recs->v[i].v[1] > 0) v[len++] = recs->v[i];
  qsort(v, len, sizeof *v, by_delay_desc);
  int err = debug ? write_text(is_mutex, v, len, sink)
                  : write_pprof(cprof__contention_agg(is_mutex),
                                v, len, recs->time_ns, duration_ns, sink);
  cprof__free(v);
  return err;
}

static int block_write(const cprof__records *recs, int debug,
                       int64_t duration_ns, const cprof_sink *sink) {
  return contention_write(false, recs, debug, duration_ns, sink);
}

static int mutex_write(const cprof__records *recs, int debug,
                       int64_t duration_ns, const cprof_sink *sink) {
  return contention_write(true, recs, debug, duration_ns, sink);
}

static int set_block_rate(long long rate) {
  return cprof_set_block_profile_rate(rate);
}

static int set_mutex_fraction(long long rate) {
  cprof_set_mutex_profile_fraction((int)rate);
  return 0;
}

const cprof__profile_def cprof__block_profile = {
    .name = "block",
    .max_debug = 2,
    .rate_key = "rate",
    .rate_unit = "nanoseconds",
    .rate_min = 0,
    .rate_max = 1LL << 50,
    .set_rate = set_block_rate,
    .enabled = cprof__block_profile_enabled,
    .off_error = CPROF_EBLOCKOFF,
    .push = CPROF__PUSH_DELTA,
    .description = "Stack traces that led to blocking on synchronization "
                   "primitives",
    .supports_delta = true,
    .entries = block_entries,
    .collect = block_collect,
    .write = block_write,
};

const cprof__profile_def cprof__mutex_profile = {
    .name = "mutex",
    .max_debug = 2,
    .rate_key = "rate",
    .rate_unit = "fraction",
    .rate_min = 0,
    .rate_max = 1000000000LL,
    .set_rate = set_mutex_fraction,
    .enabled = cprof__mutex_profile_enabled,
    .off_error = CPROF_EMUTEXOFF,
    .push = CPROF__PUSH_DELTA,
    .description = "Stack traces of holders of contended mutexes",
    .supports_delta = true,
    .entries = mutex_entries,
    .collect = mutex_collect,
    .write = mutex_write,
};
