/*
 * A private, bounded cache of separate debug files with their compressed
 * sections inflated, keyed by build ID (docs/symbols.md, "The debug
 * cache"). Distributions ship debug files with zlib-compressed DWARF
 * (libc6-dbg's libc: 4 MB on disk, 10 MB inflated), and libdw inflates
 * every section whole when it opens one: about 65 ms of a short program's
 * exit dump went there, in every process and at every run. The first
 * process that needs a file writes the inflated copy; every later one, in
 * any process and any run, maps that copy and inflates nothing.
 *
 * The copies are entries of the private cache directory
 * (base/cachedir.h), beside the symbol cache's and the unwind tables'.
 *
 * The copy is the original file's bytes unchanged, followed by the inflated
 * sections and a new section header table: the program headers and every
 * other section keep their offsets, and libdw reads the same DWARF.
 *
 * CPROF_DEBUG_CACHE=DIR (default $XDG_CACHE_HOME/cprof/debug, else
 * ~/.cache/cprof/debug; "off" turns it off), CPROF_DEBUG_CACHE_MB=N (the
 * bound, default 512; 0 turns it off). The directory must belong to the
 * process's user and be writable by nobody else; entries are checked the
 * same way, and by build ID, before use. Off in a privileged process.
 * Normal context; called under the symbolizer's lock.
 */
#ifndef CPROF_DEBUG_CACHE_H
#define CPROF_DEBUG_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "base/internal.h"

/* The cached, inflated copy of the debug file open at fd (status st),
 * whose build ID is bits[0..n): its descriptor (O_CLOEXEC, read-only), with
 * its path in path[0..cap) and its status in *out_st; written first when
 * it is not there yet. -1 when the file has no zlib-compressed section,
 * the cache is off or cannot hold it: the caller then uses fd. The caller
 * checks the copy's build ID and calls cprof__debug_cache_drop when it is
 * wrong. fd is left open. */
CPROF__HIDDEN int cprof__debug_cache_open(int fd, const struct stat *st,
                                          const unsigned char *bits, int n,
                                          char *path, size_t cap,
                                          struct stat *out_st);

/* Removes the entry for bits[0..n) (a copy found wrong). */
CPROF__HIDDEN void cprof__debug_cache_drop(const unsigned char *bits, int n);

/* Writes to out the inflated copy of the ELF file image[0..len) described
 * above. 1 when written, 0 when the image has no zlib-compressed section,
 * -1 when it is not a well-formed 64-bit little-endian ELF file, a section
 * does not inflate to its stated size, the copy would exceed max bytes or a
 * write failed. Every offset and size is checked against len, so any bytes
 * may be given (fuzz/fuzz_debug_cache.c). */
CPROF__HIDDEN int cprof__debug_cache_inflate(const unsigned char *image,
                                             size_t len, int out,
                                             unsigned long long max);

#endif
