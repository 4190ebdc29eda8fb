/*
 * The symbol cache's entries (symcache.c): what the symbolizer found for
 * addresses of one object, kept between processes and runs in the debug
 * cache's directory as one file per build ID (docs/symbols.md, "The
 * symbol cache"). This file is the format: parsing an entry (every offset
 * and size checked, so any bytes may be given: fuzz/fuzz_symcache.c),
 * finding an address in it, writing one, and the stamp that says which
 * files the results came from. The symbolizer (symbolize.c) decides what
 * goes in and when an entry may be used. Normal context.
 *
 * An address is keyed by its offset in the object's file (the same in
 * every process that maps the object); a function's first address is
 * kept relative to the address looked up.
 */
#ifndef CPROF_SYMCACHE_H
#define CPROF_SYMCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "cprof.h"
#include "encode/symbolize.h"

/* The most addresses one object's entry holds; the newest are kept. */
#define CPROF__SYMCACHE_MAX 65536

/* An entry holds its written part and at most 15 appended ones. */
#define CPROF__SYMCACHE_PARTS 16

/* One part's records; they point into the caller's bytes. */
typedef struct cprof__symcache_part {
  const unsigned char *entries; /* nentries records, by offset */
  uint32_t nentries;
  const unsigned char *frames; /* nframes records */
  uint32_t nframes;
  const char *strings; /* strings_len bytes, the last a NUL */
  uint32_t strings_len;
} cprof__symcache_part;

/* A parsed entry: the part written with its stamp, then the parts
 * appended to it since, oldest first. An offset held by two parts (two
 * processes that appended it at once) has the same result in both, as
 * every part carries the entry's stamp: a lookup takes the part written
 * whole's, else the newest appended part's. */
typedef struct cprof__symcache_view {
  const unsigned char *stamp;
  size_t stamp_len;
  cprof__symcache_part part[CPROF__SYMCACHE_PARTS];
  uint32_t nparts;   /* at least 1 */
  uint32_t nentries; /* over all parts, an offset counted in each */
  /* Bytes after the last part that make none (a write cut short, or more
   * parts than are kept): the next save writes the entry whole. */
  bool damaged;
} cprof__symcache_view;

/* Parses data[0..len): false unless it begins with an entry of this
 * format whose every record, index and string lies inside it. Appended
 * parts follow while each is whole and checks (its hash), at most
 * CPROF__SYMCACHE_PARTS in all; what follows them sets damaged. */
CPROF__HIDDEN bool cprof__symcache_parse(const void *data, size_t len,
                                         cprof__symcache_view *v);

/* Adds the appended part data[0..len) (as cprof__symcache_append wrote
 * it) to v: false when it is not one, or v has CPROF__SYMCACHE_PARTS. */
CPROF__HIDDEN bool cprof__symcache_add_part(cprof__symcache_view *v,
                                            const void *data, size_t len);

/* The result kept for file offset off, pc being where that offset is
 * mapped in this process: fills *r (all but its mapping and frames) and
 * frames[0..r->nframes), with strings in the view's bytes. False when the
 * entry has no such address. The part written whole is searched first,
 * then the appended ones newest first. */
CPROF__HIDDEN bool cprof__symcache_find(const cprof__symcache_view *v,
                                        uint64_t off, uint64_t pc,
                                        cprof__sym_result *r,
                                        cprof__sym_frame *frames);

/* For an offset with no entry of its own: the result of an entry whose
 * range holds it (made for an object without debug information, where
 * one symbol or FDE names a run of addresses alike), its names and
 * starts as they are at pc, its range moved with it, and no fact of the
 * code. false when no range holds off. */
CPROF__HIDDEN bool cprof__symcache_find_range(const cprof__symcache_view *v,
                                              uint64_t off, uint64_t pc,
                                              cprof__sym_result *r,
                                              cprof__sym_frame *frames);

/* One result to add: off the address's file offset, pc where it was
 * looked up. */
typedef struct cprof__symcache_add {
  uint64_t off, pc;
  const cprof__sym_result *r;
} cprof__symcache_add;

/* Writes to out an entry with stamp[0..stamp_len) holding add[0..n) (an
 * offset given twice keeps one of its results, which are the same) and
 * the addresses of old's parts (NULL for none) that add does not have,
 * each with the result cprof__symcache_find gives, up to
 * CPROF__SYMCACHE_MAX addresses, the added first, in one part. May sort
 * add. 0, CPROF_EINVAL or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__symcache_write(const cprof__symcache_view *old,
                                        cprof__symcache_add *add, size_t n,
                                        const void *stamp, size_t stamp_len,
                                        cprof_buf *out);

/* Writes to out a part holding add[0..n), to be appended to an entry
 * (cprof__symcache_appendable says which). Sorts add. 0, CPROF_EINVAL or
 * CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__symcache_append(cprof__symcache_add *add, size_t n,
                                         cprof_buf *out);

/* How many bytes of an entry's beginning cprof__symcache_appendable
 * reads, for a stamp of stamp_len bytes. */
CPROF__HIDDEN size_t cprof__symcache_head_len(size_t stamp_len);

/* Whether head[0..len), an entry's first bytes, begins an entry of this
 * format stamped with stamp[0..stamp_len), to which parts of results
 * under that stamp may be appended. */
CPROF__HIDDEN bool cprof__symcache_appendable(const void *head, size_t len,
                                              const void *stamp,
                                              size_t stamp_len);

/*
 * Stamps. A stamp is a tag (what wrote the entry: cprof's own build and
 * whatever else decides names) and a list of files with their status
 * (device, inode, size, modification time) or their absence: the object's
 * file and every place its debug information was looked for. An entry
 * is used only while its tag is the current one and every file listed is
 * as it was.
 */

/* Starts stamp (emptied first) with tag. */
CPROF__HIDDEN int cprof__symcache_stamp_begin(cprof_buf *stamp,
                                              const char *tag);

/* Appends path's status now (following links, as the search for debug
 * information opens it), or its absence. */
CPROF__HIDDEN int cprof__symcache_stamp_file(cprof_buf *stamp,
                                             const char *path);

/* True when stamp[0..len) is well formed, begins with tag and every file
 * it lists is as it was. */
CPROF__HIDDEN bool cprof__symcache_stamp_holds(const void *stamp, size_t len,
                                               const char *tag);

#endif
