/*
 * The record form every profile shares: values per (stack id, tag), where
 * the tag is whatever else the profile keys on (an object size for heap, 0
 * for count profiles). Records are raw (heap values are still sampled
 * counts); each profile's writer scales and encodes them. Keeping this form
 * lets every sink take a delta of any profile (p1 - p0, as Go's ?seconds=N
 * does) without knowing how it was collected.
 *
 * Normal context only (records allocate).
 */
#ifndef CPROF_RECORDS_H
#define CPROF_RECORDS_H

#include "base/internal.h"
#include "base/hmap.h"
#include "capture/agg.h"

typedef struct cprof__record {
  cprof__stack_id sid;
  uint32_t tag;
  int64_t v[CPROF__AGG_MAX_VALUES];
} cprof__record;

typedef struct cprof__records {
  cprof__record *v;
  size_t len, cap;
  int64_t time_ns; /* when the records were collected */
} cprof__records;

CPROF__HIDDEN int cprof__records_add(cprof__records *r, cprof__stack_id sid,
                                     uint32_t tag, const int64_t *v,
                                     size_t nvalues);
/* Appends every entry of agg with a nonzero value; returns 0 or
 * CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__records_from_agg(cprof__records *r, cprof__agg *agg);
/* out = p1 - p0 per (stack id, tag); records whose values are all zero are
 * dropped; out->time_ns = p1->time_ns. */
CPROF__HIDDEN int cprof__records_delta(cprof__records *out,
                                       const cprof__records *p0,
                                       const cprof__records *p1);
CPROF__HIDDEN void cprof__records_free(cprof__records *r);

/* Records being summed by (stack id, tag), for collectors that add values
 * up: start it zeroed on the records to fill, and finish it with
 * cprof__records_sum_end, which gives the first error (CPROF_ENOMEM). */
typedef struct cprof__records_sum {
  cprof__records *recs;
  cprof__hmap index; /* (stack id << 32 | tag) + 1 -> position + 1 */
  int err;
} cprof__records_sum;

/* Adds v (CPROF__AGG_MAX_VALUES values) to the record of (sid, tag),
 * making it if needed; nothing once an error happened. */
CPROF__HIDDEN void cprof__records_sum_add(cprof__records_sum *s,
                                          cprof__stack_id sid, uint32_t tag,
                                          const int64_t *v);
CPROF__HIDDEN int cprof__records_sum_end(cprof__records_sum *s);

#endif
