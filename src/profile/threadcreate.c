/*
 * The `threadcreate` profile: how many threads each creating stack started,
 * from the pthread_create interposer's table (source/threads.h), as Go's
 * count profile. Normal context only.
 */
#include "encode/writer.h"
#include "profile/threadcreate.h"
#include "capture/stacktab.h"
#include "source/thread_scan.h"
#include "source/threads.h"

static int threadcreate_collect(cprof__records *out) {
  cprof__agg *creations = cprof__threads_creations();
  if (!creations) return CPROF_ENOMEM;
  int err = cprof__records_from_agg(out, creations);
  /* Threads started without the trampoline count under one synthetic
   * frame: their creating stack is not known (source/thread_scan.h). */
  const int64_t unseen = (int64_t)cprof__thread_scan_unseen();
  const uintptr_t pc = CPROF__PC_UNSEEN_THREAD;
  if (!err && unseen)
    err = cprof__records_add(out, cprof__stacktab_intern(&pc, 1), 0, &unseen, 1);
  return err;
}

static long threadcreate_entries(void) {
  cprof__records recs = {0};
  long total = 0;
  if (threadcreate_collect(&recs) == 0)
    for (size_t i = 0; i < recs.len; i++) total += (long)recs.v[i].v[0];
  cprof__records_free(&recs);
  return total;
}

static int threadcreate_write(const cprof__records *recs, int debug,
                              int64_t duration_ns, const cprof_sink *sink) {
  /* Its stacks are taken by the pthread_create interposer. */
  return cprof__write_count_profile("threadcreate", recs, debug, duration_ns,
                                    true, sink);
}

const cprof__profile_def cprof__threadcreate_profile = {
    .name = "threadcreate",
    .description = "Stack traces that led to the creation of new OS threads",
    .supports_delta = true,
    .max_debug = 2,
    .entries = threadcreate_entries,
    .collect = threadcreate_collect,
    .write = threadcreate_write,
};
