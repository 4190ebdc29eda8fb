/*
 * The compile-unit table of an object's debug information, kept in the
 * debug cache (docs/symbols.md): which compile unit covers an address, as
 * libdwfl answers it from .debug_aranges, so that a later process names a
 * new address of the object without libdw reading .debug_aranges again
 * (dwarf_getaranges: 2.4-3.7 ms of libc's 14 MB debug file, in each exit
 * dump that names a libc address no earlier run named). This file owns
 * the table's format, its checks and the lookup; symbolize.c builds it
 * through libdw and keeps it with the object's other cached results.
 * Normal context; no I/O.
 *
 * The table is the runs of consecutive address ranges of one compile unit
 * (libdwfl merges them alike), each its first address and its unit's DIE
 * offset, sorted, and the end of the last range. An address belongs to the
 * run with the greatest first address at or below it, gaps between runs
 * included, unless it lies past the last range's end: libdwfl's rule.
 */
#ifndef CPROF_CUTAB_H
#define CPROF_CUTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "cprof.h"

/* The most runs a table holds (libc has about 1,600). */
#define CPROF__CUTAB_MAX ((uint32_t)1 << 20)

typedef struct cprof__cutab_run {
  uint64_t start;  /* the run's first address, in the DWARF's terms */
  uint64_t cu_off; /* its compile unit's DIE offset in .debug_info */
} cprof__cutab_run;

/* A table, over bytes of the caller's. */
typedef struct cprof__cutab {
  const unsigned char *stamp;
  size_t stamp_len;
  const unsigned char *runs; /* nruns records, by start */
  uint32_t nruns;
  uint64_t last_end; /* the last range's address + length */
} cprof__cutab;

/* Writes to out a table stamped with stamp[0..stamp_len) (as a symbol
 * cache entry is: symcache.h) of runs[0..n), which must be sorted by
 * strictly increasing start, and last_end. 0, CPROF_EINVAL or
 * CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__cutab_write(const cprof__cutab_run *runs, size_t n,
                                     uint64_t last_end, const void *stamp,
                                     size_t stamp_len, cprof_buf *out);

/* Parses data[0..len): false unless it is a whole table whose runs are in
 * order and whose hash matches. */
CPROF__HIDDEN bool cprof__cutab_parse(const void *data, size_t len,
                                      cprof__cutab *t);

/* The DIE offset of the compile unit covering addr (in the DWARF's
 * terms), as libdwfl finds it; false when none does. */
CPROF__HIDDEN bool cprof__cutab_find(const cprof__cutab *t, uint64_t addr,
                                     uint64_t *cu_off);

#endif
