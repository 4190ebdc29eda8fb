/*
 * The `heap` and `allocs` profiles, built from the heap sampler's samples
 * (source/heap_sampler.h): allocation counts aggregated as samples are taken,
 * in-use counts summed over the live sampled blocks when the records are
 * collected, so that freeing a sampled block touches no shared counter.
 * Records are raw sampled counts; writing unsamples them (Go's maths).
 * Calls the sampler's read-only accessors, capture/ and encode/. Normal
 * context only.
 */
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "capture/stacktab.h"
#include "encode/writer.h"
#include "profile/heap.h"
#include "source/heap_sampler.h"

/* The profiles. Records are raw sampled counts; writing unsamples them.
 * The allocation counts are aggregated as samples are taken; the in-use
 * counts are summed over the live sampled blocks when the records are
 * collected, so that freeing a sampled block touches no shared counter. */

static void add_inuse(cprof__stack_id sid, size_t size, void *ctx) {
  const int64_t v[4] = {0, 0, 1, (int64_t)size};
  cprof__records_sum_add(ctx, sid, cprof__heap_size_class(size), v);
}

/* The stripes of each (stack, size class) are added up, then the live
 * blocks. */
static int heap_collect(cprof__records *out) {
  cprof__agg *agg = cprof__heap_samples();
  if (!agg) return CPROF_ENOMEM;
  cprof__records raw = {0};
  cprof__records_sum c = {out, {0}, cprof__records_from_agg(&raw, agg)};
  out->time_ns = raw.time_ns;
  for (size_t i = 0; i < raw.len; i++) {
    const int64_t v[4] = {raw.v[i].v[0], raw.v[i].v[1], 0, 0};
    cprof__records_sum_add(&c, cprof__heap_unstripe(raw.v[i].sid),
                           raw.v[i].tag, v);
  }
  cprof__records_free(&raw);
  cprof__heap_foreach_live(add_inuse, &c);
  return cprof__records_sum_end(&c);
}

static long heap_entries(void) {
  cprof__records recs = {0};
  long n = heap_collect(&recs) == 0 ? (long)recs.len : 0;
  cprof__records_free(&recs);
  return n;
}

static int by_inuse_desc(const void *a, const void *b) {
  const cprof__record *x = a, *y = b;
  if (x->v[3] != y->v[3]) return x->v[3] > y->v[3] ? -1 : 1;
  if (x->sid != y->sid) return x->sid < y->sid ? -1 : 1;
  return x->tag < y->tag ? -1 : x->tag > y->tag;
}

static int write_trailer(cprof_buf *out) {
  struct mallinfo2 mi = mallinfo2();
  struct rusage ru;
  long long maxrss = getrusage(RUSAGE_SELF, &ru) == 0
                         ? (long long)ru.ru_maxrss * 1024
                         : 0;
  return cprof__buf_printf(
      out,
      "\n# mallinfo2\n# Arena = %zu\n# Ordblks = %zu\n# Smblks = %zu\n"
      "# Hblks = %zu\n# Hblkhd = %zu\n# Fsmblks = %zu\n# Uordblks = %zu\n"
      "# Fordblks = %zu\n# Keepcost = %zu\n# MaxRSS = %lld\n"
      "# HeapSampleRate = %ld\n# SampledLiveObjects = %llu\n"
      "# UntrackedSamples = %llu\n",
      mi.arena, mi.ordblks, mi.smblks, mi.hblks, mi.hblkhd, mi.fsmblks,
      mi.uordblks, mi.fordblks, mi.keepcost, maxrss,
      cprof__heap_rate(), (unsigned long long)cprof__heap_live_sampled(),
      (unsigned long long)cprof__heap_untracked());
}

static int write_text(const cprof__records *recs, const cprof_sink *sink) {
  cprof__record *v = cprof__malloc((recs->len + 1) * sizeof *v);
  if (!v) return CPROF_ENOMEM;
  if (recs->len) memcpy(v, recs->v, recs->len * sizeof *v);
  qsort(v, recs->len, sizeof *v, by_inuse_desc);
  int64_t tot[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < recs->len; i++)
    for (int k = 0; k < 4; k++) tot[k] += v[i].v[k];
  /* pprof reads alloc == inuse as an old two-column profile; Go keeps them
   * apart the same way. */
  int64_t alloc_bytes = tot[1] == tot[3] ? tot[1] + 1 : tot[1];
  cprof_buf out = {0};
  int err = cprof__buf_printf(
      &out, "heap profile: %lld: %lld [%lld: %lld] @ heap/%lld\n",
      (long long)tot[2], (long long)tot[3], (long long)tot[0],
      (long long)alloc_bytes, 2 * (long long)cprof__heap_rate());
  cprof__text_begin_calls();
  for (size_t i = 0; !err && i < recs->len; i++) {
    err = cprof__buf_printf(&out, "%lld: %lld [%lld: %lld]",
                            (long long)v[i].v[2], (long long)v[i].v[3],
                            (long long)v[i].v[0], (long long)v[i].v[1]);
    if (!err) err = cprof__text_record(&out, v[i].sid);
  }
  cprof__text_end();
  if (!err) err = write_trailer(&out);
  cprof__free(v);
  return cprof__text_flush(&out, err, sink);
}

static const cprof__value_type heap_types[] = {
    {"alloc_objects", "count"},
    {"alloc_space", "bytes"},
    {"inuse_objects", "count"},
    {"inuse_space", "bytes"},
};

static int write_pprof(const cprof__records *recs, int64_t duration_ns,
                       const char *default_type, const cprof_sink *sink) {
  long rate = cprof__heap_rate();
  const cprof__prof_desc d = {
      .sample_types = heap_types,
      .nsample_types = CPROF__ARRAY_LEN(heap_types),
      .period_type = {"space", "bytes"},
      .period = rate,
      .default_sample_type = default_type,
      .time_nanos = recs->time_ns,
      .duration_nanos = duration_ns,
      .first_is_call = true,
  };
  cprof__prof *p = cprof__prof_begin(&d, sink);
  if (!p) return CPROF_ENOMEM;
  cprof__prof_drop_comment(p, cprof__heap_samples());
  const uint64_t untracked = cprof__heap_untracked();
  const uint64_t grow_failures = cprof__heap_grow_failures();
  if (untracked || grow_failures) {
    char text[200];
    snprintf(text, sizeof text,
             "cprof heap: %llu sampled objects were not tracked to their "
             "free (live table full, or out of address space: %llu mappings "
             "of a chunk failed)",
             (unsigned long long)untracked,
             (unsigned long long)grow_failures);
    cprof__prof_comment(p, text);
  }
  for (size_t i = 0; i < recs->len; i++) {
    const cprof__record *r = &recs->v[i];
    int64_t vals[4];
    cprof__heap_unsample(r->v[0], r->v[1], rate, &vals[0], &vals[1]);
    cprof__heap_unsample(r->v[2], r->v[3], rate, &vals[2], &vals[3]);
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(r->sid, &pcs);
    const cprof__pprof_label label = {"bytes", NULL, (int64_t)r->tag, NULL};
    cprof__prof_sample(p, pcs, n, vals, &label, r->tag ? 1 : 0);
  }
  return cprof__prof_end(p);
}

static int heap_write(const cprof__records *recs, int debug,
                      int64_t duration_ns, const cprof_sink *sink) {
  return debug ? write_text(recs, sink)
               : write_pprof(recs, duration_ns, NULL, sink);
}

static int allocs_write(const cprof__records *recs, int debug,
                        int64_t duration_ns, const cprof_sink *sink) {
  return debug ? write_text(recs, sink)
               : write_pprof(recs, duration_ns, "alloc_space", sink);
}

/* One rate for both heap profiles: the sampler's. */
static int set_rate(long long rate) {
  cprof_heap_set_rate((long)rate);
  return 0;
}

/* What heap and allocs share: the samples, their rate, Go's text form. */
#define HEAP_SAMPLES                                         \
  .max_debug = 2, .text_for_negative_debug = true,           \
  .rate_key = "rate", .rate_unit = "bytes", .rate_min = 0,   \
  .rate_max = 1LL << 40, .set_rate = set_rate,               \
  .supports_delta = true, .entries = heap_entries,           \
  .collect = heap_collect, .serving = cprof__heap_serving

const cprof__profile_def cprof__heap_profile = {
    .name = "heap",
    HEAP_SAMPLES,
    .push = CPROF__PUSH_SNAPSHOT,
    .description = "A sampling of memory allocations of live objects",
    /* Go's index says more: its gc parameter, accepted here too. */
    .index_description =
        "A sampling of memory allocations of live objects. You can specify "
        "the gc GET parameter to run GC before taking the heap sample.",
    .write = heap_write,
};

const cprof__profile_def cprof__allocs_profile = {
    .name = "allocs",
    HEAP_SAMPLES,
    .push = CPROF__PUSH_NONE,
    .description = "A sampling of all past memory allocations",
    .write = allocs_write,
};
