/*
 * Aggregation tables: a profile's values per (stack id, tag), where the tag
 * is whatever else a profile keys on (a thread, a label set). Adding is
 * lock-free and allocation-free, so signal handlers aggregate directly; the
 * table is preallocated and bounded, and adds that find it full are counted
 * in a per-table drop counter, which the profile reports.
 */
#ifndef CPROF_AGG_H
#define CPROF_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "capture/stacktab.h"

#define CPROF__AGG_MAX_VALUES 4

typedef struct cprof__agg cprof__agg;

/* A table of nvalues counters per key (nvalues <= CPROF__AGG_MAX_VALUES)
 * with room for capacity keys. Not signal-safe. NULL when out of memory. */
CPROF__HIDDEN cprof__agg *cprof__agg_new(size_t nvalues, size_t capacity);
CPROF__HIDDEN void cprof__agg_free(cprof__agg *a);

/* Adds vals (nvalues of them) to the counters of (sid, tag). Returns false
 * and counts a drop when the table is full. Async-signal-safe. */
CPROF__HIDDEN bool cprof__agg_add(cprof__agg *a, cprof__stack_id sid,
                                  uint32_t tag, const int64_t *vals);

/* Calls cb for every key with the current counters. Concurrent adds may or
 * may not be seen. Not signal-safe. */
CPROF__HIDDEN void cprof__agg_foreach(cprof__agg *a,
                                      void (*cb)(cprof__stack_id sid,
                                                 uint32_t tag,
                                                 const int64_t *vals,
                                                 void *ctx),
                                      void *ctx);

/* Zeroes every counter (keys stay). Not signal-safe. */
CPROF__HIDDEN void cprof__agg_clear(cprof__agg *a);

CPROF__HIDDEN uint64_t cprof__agg_drops(const cprof__agg *a);
CPROF__HIDDEN size_t cprof__agg_nvalues(const cprof__agg *a);

#endif
