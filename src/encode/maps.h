/*
 * A parser for /proc/PID/maps text. It is a parser of outside input (the
 * kernel's, but also whatever a test or fuzzer feeds it), so it validates
 * every field and never reads past the text it is given. It does not
 * allocate: entries point into the caller's text.
 */
#ifndef CPROF_MAPS_H
#define CPROF_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

typedef struct cprof__map_entry {
  uint64_t start;
  uint64_t end;
  uint64_t offset;
  uint64_t inode;
  bool readable, writable, executable, shared;
  const char *path; /* not NUL-terminated; " (deleted)" already trimmed */
  size_t path_len;  /* 0 for anonymous mappings */
  bool deleted;
} cprof__map_entry;

/* Parses one line (without its newline). Returns 0, or CPROF_EINVAL for a
 * malformed line. */
CPROF__HIDDEN int cprof__maps_parse_line(const char *line, size_t len,
                                         cprof__map_entry *out);

/* Calls cb for every line of text; a nonzero return from cb stops the walk
 * and is returned. Returns CPROF_EINVAL at the first malformed line, else 0. */
CPROF__HIDDEN int cprof__maps_parse(const char *text, size_t len,
                                    int (*cb)(const cprof__map_entry *e,
                                              void *ctx),
                                    void *ctx);

#endif
