/*
 * The pprof writer: a streaming encoder for profile.proto's Profile message,
 * gzipped through zlib on its way to a sink. Messages are encoded as they
 * are added and deflated immediately; only the string table (and its index)
 * is held until cprof__pprof_finish() writes it last, so memory stays
 * proportional to the distinct strings, not to the profile.
 *
 * The caller assigns mapping, location and function ids (nonzero) and is
 * responsible for their uniqueness; the encoder does not deduplicate them.
 * Errors (allocation, the sink) are latched: later calls become no-ops and
 * cprof__pprof_finish() returns the first error. Not signal-safe; one
 * encoder per thread.
 */
#ifndef CPROF_PPROF_H
#define CPROF_PPROF_H

#include <stdbool.h>
#include <stdint.h>

#include "base/internal.h"

typedef struct cprof__pprof cprof__pprof;

typedef struct cprof__pprof_mapping {
  uint64_t id;
  uint64_t memory_start;
  uint64_t memory_limit;
  uint64_t file_offset;
  const char *filename;
  const char *build_id;
  bool has_functions;
  bool has_filenames;
  bool has_line_numbers;
  bool has_inline_frames;
} cprof__pprof_mapping;

typedef struct cprof__pprof_line {
  uint64_t function_id;
  int64_t line;
  int64_t column;
} cprof__pprof_line;

/* A label: key with either str (non-NULL) or num (+ optional num_unit). */
typedef struct cprof__pprof_label {
  const char *key;
  const char *str;
  int64_t num;
  const char *num_unit;
} cprof__pprof_label;

/* Starts a profile written to sink; gzip = false writes the raw message
 * (used by tests and by callers that compress themselves). Returns NULL
 * only when out of memory. */
CPROF__HIDDEN cprof__pprof *cprof__pprof_new(const cprof_sink *sink, bool gzip);

/* Interns a string, returning its string-table index ("" and NULL are 0). */
CPROF__HIDDEN int64_t cprof__pprof_string(cprof__pprof *p, const char *s);

CPROF__HIDDEN void cprof__pprof_sample_type(cprof__pprof *p, const char *type,
                                            const char *unit);
CPROF__HIDDEN void cprof__pprof_period(cprof__pprof *p, const char *type,
                                       const char *unit, int64_t period);
CPROF__HIDDEN void cprof__pprof_time(cprof__pprof *p, int64_t time_nanos,
                                     int64_t duration_nanos);
CPROF__HIDDEN void cprof__pprof_comment(cprof__pprof *p, const char *comment);
CPROF__HIDDEN void cprof__pprof_default_sample_type(cprof__pprof *p,
                                                    const char *type);
CPROF__HIDDEN void cprof__pprof_drop_frames(cprof__pprof *p, const char *re);
CPROF__HIDDEN void cprof__pprof_keep_frames(cprof__pprof *p, const char *re);
CPROF__HIDDEN void cprof__pprof_doc_url(cprof__pprof *p, const char *url);

CPROF__HIDDEN void cprof__pprof_add_mapping(cprof__pprof *p,
                                            const cprof__pprof_mapping *m);
/* Lines are ordered innermost (inlined callee) first, caller last. */
CPROF__HIDDEN void cprof__pprof_location(cprof__pprof *p, uint64_t id,
                                         uint64_t mapping_id, uint64_t address,
                                         const cprof__pprof_line *lines,
                                         size_t nlines, bool is_folded);
CPROF__HIDDEN void cprof__pprof_function(cprof__pprof *p, uint64_t id,
                                         const char *name,
                                         const char *system_name,
                                         const char *filename,
                                         int64_t start_line);
/* location_ids leaf first; one value per sample type. */
CPROF__HIDDEN void cprof__pprof_sample(cprof__pprof *p,
                                       const uint64_t *location_ids,
                                       size_t nlocations, const int64_t *values,
                                       size_t nvalues,
                                       const cprof__pprof_label *labels,
                                       size_t nlabels);

/* Writes the string table, flushes the stream and frees the encoder.
 * Returns 0 or the first error. */
CPROF__HIDDEN int cprof__pprof_finish(cprof__pprof *p);

#endif
