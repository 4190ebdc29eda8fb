/*
 * The peak heap profile (heap_peak.h). A tracker thread wakes every
 * CPROF_HEAP_PEAK_MS (default 50 ms) while heap samples are being taken
 * (after an interval without one it sleeps until the next) and sums the
 * estimated bytes of the heap sampler's live sampled blocks (each
 * unsampled as the heap profile does); when the sum passes the kept peak
 * by more than 1% (and at least one sampling interval), it copies the live
 * set's records, which become the profile. Allocation and free paths are
 * untouched but for the sampled allocation's count of samples: the cost is
 * the tracker's walk of the live set, proportional to the sampled blocks
 * live (about one per rate bytes in use). Collecting runs the same check
 * first, so a profile is never below the heap at that moment. Written
 * through the heap profile's writer, with allocation columns zero. Calls
 * the sampler's accessors, the heap profile and the registry; normal
 * context.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "base/fork.h"
#include "base/env.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "profile/heap.h"
#include "profile/heap_peak.h"
#include "profile/registry.h"
#include "source/heap_sampler.h"
#include "source/threads.h"

static CPROF__FORK_LOCK pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;
static cprof__records peak;   /* under peak_lock */
static int64_t peak_bytes;    /* the estimated total peak holds */
static atomic_bool started;
static long long interval_ms = 50;

typedef struct sum_ctx {
  long rate;
  int64_t bytes;
} sum_ctx;

static void add_bytes(cprof__stack_id sid, size_t size, void *ctx) {
  (void)sid;
  sum_ctx *c = ctx;
  int64_t count, bytes;
  cprof__heap_unsample(1, (int64_t)size, c->rate, &count, &bytes);
  c->bytes += bytes;
}

static int64_t live_bytes(long rate) {
  sum_ctx c = {rate, 0};
  cprof__heap_foreach_live(add_bytes, &c);
  return c.bytes;
}

typedef struct snap_ctx {
  cprof__records_sum sum;
  long rate;
  int64_t bytes;
} snap_ctx;

static void add_block(cprof__stack_id sid, size_t size, void *ctx) {
  snap_ctx *c = ctx;
  const int64_t v[4] = {0, 0, 1, (int64_t)size};
  cprof__records_sum_add(&c->sum, sid, cprof__heap_size_class(size), v);
  int64_t count, bytes;
  cprof__heap_unsample(1, (int64_t)size, c->rate, &count, &bytes);
  c->bytes += bytes;
}

/* Takes a new peak when the live total passed the kept one; peak_lock
 * held. */
static void check(void) {
  long rate = cprof__heap_rate();
  if (rate <= 0) return;
  int64_t now = live_bytes(rate);
  int64_t margin = peak_bytes / 100 > rate ? peak_bytes / 100 : rate;
  if (peak.time_ns && now <= peak_bytes + margin) return;
  cprof__records snap = {0};
  snap_ctx c = {{&snap, {0}, 0}, rate, 0};
  snap.time_ns = cprof__now_ns();
  cprof__heap_foreach_live(add_block, &c);
  if (cprof__records_sum_end(&c.sum) != 0 ||
      (peak.time_ns && c.bytes <= peak_bytes)) {
    cprof__records_free(&snap);
    return;
  }
  cprof__records_free(&peak);
  peak = snap;
  peak_bytes = c.bytes;
}

static void *tracker_main(void *arg) {
  (void)arg;
  struct timespec ts = {(time_t)(interval_ms / 1000),
                        (long)(interval_ms % 1000) * 1000000};
  for (;;) {
    uint32_t seen = cprof__heap_sample_seq();
    nanosleep(&ts, NULL);
    cprof__lock(&peak_lock);
    check();
    cprof__unlock(&peak_lock);
    /* Only a new sample raises the live total: after an interval without
     * one, the tracker sleeps until one is taken. */
    if (cprof__heap_sample_seq() == seen) cprof__heap_wait_sample(seen);
  }
  return NULL;
}

/* fork waits for a check in progress: the tracker allocates in it, and an
 * allocator that does not prepare for fork (GCC 12's AddressSanitizer)
 * would leave the child its lock held. */
static void before_fork(void) { cprof__lock(&peak_lock); }
static void parent_after_fork(void) { cprof__unlock(&peak_lock); }

/* A fork child has no tracker (and its copy of the lock is made anew). */
static void child_after_fork(void) {
  pthread_mutex_init(&peak_lock, NULL);
  atomic_store(&started, false);
}

static void heap_peak_start(void) {
  cprof__heap_serving(); /* the peak is made of heap samples */
  if (atomic_exchange(&started, true)) return;
  pthread_t t;
  if (cprof__thread_spawn(&t, tracker_main, NULL, "cprof-heappeak") != 0) {
    atomic_store(&started, false);
    return;
  }
  pthread_detach(t);
}

int cprof_heap_peak_reset(void) {
  cprof__lock(&peak_lock);
  cprof__records_free(&peak);
  peak_bytes = 0;
  cprof__unlock(&peak_lock);
  heap_peak_start();
  return 0;
}

static int peak_collect(cprof__records *out) {
  int err = 0;
  cprof__lock(&peak_lock);
  check();
  out->time_ns = peak.time_ns ? peak.time_ns : cprof__now_ns();
  for (size_t i = 0; !err && i < peak.len; i++)
    err = cprof__records_add(out, peak.v[i].sid, peak.v[i].tag, peak.v[i].v,
                             4);
  cprof__unlock(&peak_lock);
  return err;
}

static long peak_entries(void) {
  cprof__lock(&peak_lock);
  long n = (long)peak.len;
  cprof__unlock(&peak_lock);
  return n;
}

static int peak_write(const cprof__records *recs, int debug,
                      int64_t duration_ns, const cprof_sink *sink) {
  return cprof__heap_profile.write(recs, debug, duration_ns, sink);
}

static void peak_reset(void) { cprof_heap_peak_reset(); }

static const cprof__profile_def heap_peak_profile = {
    .name = "heap_peak",
    .description = "A sampling of the live objects at the highest in-use "
                   "heap since profiling was enabled or the last reset",
    .supports_delta = false,
    .max_debug = 2,
    .text_for_negative_debug = true,
    .entries = peak_entries,
    .collect = peak_collect,
    .write = peak_write,
    .reset = peak_reset,
    .serving = heap_peak_start, /* the peak is kept from then on */
};

void cprof__heap_peak_init(void) {
  long long ms;
  if (cprof__env_int("CPROF_HEAP_PEAK_MS", 1, 60000,
                     "the default of 50 ms is used", &ms))
    interval_ms = ms;
  cprof__atfork(CPROF__FORK_HEAP_PEAK, before_fork, parent_after_fork,
                child_after_fork);
  cprof__profile_register(&heap_peak_profile);
}
