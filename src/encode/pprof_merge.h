/*
 * The pprof merger: combines profiles that other processes wrote (each a
 * profile.proto Profile message, gzipped or not) into one gzipped profile,
 * labelling every sample with the process it came from. It works on the
 * wire: each part's messages are copied through with only their ids and
 * string indices rewritten, so fields it does not know survive the merge.
 *
 * The parts are untrusted input. Any byte string gives either a merged
 * profile or an error, never a crash or a read outside the part; a part
 * whose decompressed size passes CPROF__MERGE_MAX_PART is refused, and
 * memory stays within a small multiple of the decompressed input. Ids are
 * renumbered densely (1, 2, ... across all parts), so the merged ids never
 * collide whatever the parts used. Not signal-safe.
 */
#ifndef CPROF_PPROF_MERGE_H
#define CPROF_PPROF_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

/* The largest decompressed part accepted: profiles are megabytes. */
#define CPROF__MERGE_MAX_PART ((size_t)64 << 20)

typedef struct cprof__merge_part {
  const unsigned char *data; /* one profile.proto Profile message, gzipped or not */
  size_t len;
  int64_t pid;        /* every sample of this part gets the numeric label pid=<pid> */
  const char *name;   /* and, when not NULL or empty, the string label process=<name> */
} cprof__merge_part;

/* Merges n parts (n >= 1) into one gzipped Profile appended to out.
 *
 * The sample types must be the same in every part (types and units, in the
 * same order). period_type and period come from the first part; time_nanos
 * is the earliest nonzero one, duration_nanos the largest; drop_frames,
 * keep_frames, default_sample_type and doc_url come from the first part
 * that sets them. The comments are every part's, in order, then the
 * comments given here, each distinct text once. Every sample gains the
 * labels pid=<pid> and, when the part has a name, process=<name>, after
 * its own; a sample that already has a "pid" label (from an earlier merge)
 * keeps it and gains neither.
 *
 * Returns 0, CPROF_EINVAL for bad arguments, a malformed or too large part
 * or parts whose sample types differ, or CPROF_ENOMEM; on error out is left
 * as it was and err (when errlen > 0) holds one line saying why. */
CPROF__HIDDEN int cprof__pprof_merge(const cprof__merge_part *parts, size_t n,
                                     const char *const *comments,
                                     size_t ncomments, cprof_buf *out,
                                     char *err, size_t errlen);

#endif
