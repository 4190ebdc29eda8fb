/*
 * The dump specification grammar (CPROF_DUMP and cprof_dump_configure):
 *
 *   spec   = item *("," item)
 *   item   = name ["=" param *(":" param)]
 *   param  = key "=" value
 *
 * e.g. "cpu,heap=debug=1,mutex=debug=1:rate=1000". Names: cpu, heap,
 * allocs, threadcreate, goroutine (alias threads), mutex, block. Keys:
 * debug (every profile; cpu has no text form), rate (heap and allocs:
 * bytes, one rate for both; mutex: fraction; block: nanoseconds), hz
 * (cpu). A pure parser of outside input: it never allocates, and every
 * rejection names the problem and the column where it is. Applying the
 * rates is dump.c's business.
 */
#ifndef CPROF_DUMPSPEC_H
#define CPROF_DUMPSPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/internal.h"

#define CPROF__DUMP_MAX_ITEMS 8

typedef struct cprof__dump_item {
  const char *name; /* canonical name, static */
  int debug;
  bool has_rate; /* rate= given: dump.c sets it when dumps are configured */
  long long rate;
  int hz; /* cpu only; 0 = default */
} cprof__dump_item;

typedef struct cprof__dump_spec {
  cprof__dump_item items[CPROF__DUMP_MAX_ITEMS];
  size_t n;
} cprof__dump_spec;

/* Parses spec. Returns 0, or CPROF_EINVAL with a one-line message in err
 * ("unknown profile \"hepa\" at column 5"). */
CPROF__HIDDEN int cprof__dump_parse(const char *spec, cprof__dump_spec *out,
                                    char *err, size_t errlen);

#endif
