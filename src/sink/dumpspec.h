/*
 * The dump specification grammar (CPROF_DUMP and cprof_dump_configure):
 *
 *   spec   = item *("," item)
 *   item   = name ["=" param *(":" param)]
 *   param  = key "=" value
 *
 * e.g. "cpu,heap=debug=1,mutex=debug=1:rate=1000". The names and keys come
 * from the caller's table (the registry's profiles, names and aliases):
 * debug (up to the profile's highest text form), and the profile's rate
 * key with its bounds (rate for heap and allocs: bytes, one rate for both;
 * mutex: fraction; block: nanoseconds; hz for cpu). A pure parser of outside input: it never allocates, and every
 * rejection names the problem and the column where it is. Applying the
 * rates is dump.c's business.
 */
#ifndef CPROF_DUMPSPEC_H
#define CPROF_DUMPSPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/internal.h"

#define CPROF__DUMP_MAX_ITEMS 8

/* A profile as a spec may name it. */
typedef struct cprof__dump_profile {
  const char *name;      /* as a spec writes it */
  const char *canonical; /* the profile's own name */
  int max_debug;
  const char *rate_key; /* NULL: the profile takes no rate */
  long long rate_min, rate_max;
  /* Profiles with the same non-NULL value share one rate. */
  void (*rate_shared)(void);
} cprof__dump_profile;

typedef struct cprof__dump_item {
  const char *name; /* canonical name, static */
  int debug;
  bool has_rate; /* its rate key given: dump.c applies it */
  long long rate;
  void (*rate_shared)(void);
} cprof__dump_item;

typedef struct cprof__dump_spec {
  cprof__dump_item items[CPROF__DUMP_MAX_ITEMS];
  size_t n;
} cprof__dump_spec;

/* Parses spec against the profiles in known. Returns 0, or CPROF_EINVAL
 * with a one-line message in err ("unknown profile \"hepa\" at column 5"). */
CPROF__HIDDEN int cprof__dump_parse_with(const cprof__dump_profile *known,
                                         size_t nknown, const char *spec,
                                         cprof__dump_spec *out, char *err,
                                         size_t errlen);

/* cprof__dump_parse_with over the registry's profiles (dump.c). */
CPROF__HIDDEN int cprof__dump_parse(const char *spec, cprof__dump_spec *out,
                                    char *err, size_t errlen);

#endif
