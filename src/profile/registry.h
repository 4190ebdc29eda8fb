/*
 * The named-profile registry: Go's profile names mapped to the module that
 * collects each, plus the record form every named profile shares.
 *
 * A profile is collected as records: values per (stack id, tag), where the
 * tag is whatever else the profile keys on (an object size for heap, 0 for
 * count profiles). Records are raw (heap values are still sampled counts);
 * the profile's write function scales and encodes them. Keeping this form
 * lets every sink take a delta of any profile (p1 - p0, as Go's ?seconds=N
 * does) without knowing how it was collected.
 *
 * Normal context only.
 */
#ifndef CPROF_REGISTRY_H
#define CPROF_REGISTRY_H

#include <stdbool.h>

#include "capture/records.h"
#include "base/internal.h"

typedef struct cprof__profile_def {
  const char *name;
  const char *description; /* Go's description on the index page */
  bool supports_delta;     /* Go allows ?seconds=N on it */
  long (*entries)(void);   /* the index page's Count column */
  /* Snapshot of the profile's records. */
  int (*collect)(cprof__records *out);
  /* Writes records (a snapshot, or a delta over duration_ns when that is
   * nonzero) as pprof (debug 0) or Go's text (debug >= 1). */
  int (*write)(const cprof__records *recs, int debug, int64_t duration_ns,
               const cprof_sink *sink);
} cprof__profile_def;

/* How a caller waits out a profile window: returns false when the wait was
 * cut short (the client went away, the server is stopping). */
typedef bool (*cprof__wait_fn)(void *ctx, int64_t ns);

/* A wait that sleeps the whole time (ctx unused). */
CPROF__HIDDEN bool cprof__sleep_wait(void *ctx, int64_t ns);

/* Go's ?seconds=N: collects def, waits ns, collects again and writes
 * p1 - p0 as pprof with duration_nanos set. Returns 0; CPROF_ECANCELED when
 * the wait was cut short (nothing written); CPROF_EIO when collecting
 * failed; CPROF_ENOMEM when the delta could not be computed; or the
 * writer's error. */
CPROF__HIDDEN int cprof__profile_write_delta(const cprof__profile_def *def,
                                             int64_t ns, cprof__wait_fn wait,
                                             void *ctx,
                                             const cprof_sink *sink);

/* The definition for name, or NULL. */
CPROF__HIDDEN const cprof__profile_def *cprof__profile_find(const char *name);

#endif
