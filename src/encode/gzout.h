/*
 * A gzip stream written in pieces, for the pprof writer and the merger:
 * small writes are gathered before they reach the compressor (a profile is
 * written a message at a time, tens of bytes each, and deflate's own work
 * per call passed its work per byte: a compiler's exit dump made 13,698
 * calls for 310 KB), and the compressed bytes go to the caller's drain in
 * pieces of CPROF__GZOUT_CAP bytes. zlib runs inside cprof's guard, so
 * what it allocates is cprof's own. It allocates, so it must never run in
 * a signal handler.
 */
#ifndef CPROF_ENCODE_GZOUT_H
#define CPROF_ENCODE_GZOUT_H

#ifndef ZLIB_CONST
#define ZLIB_CONST
#endif
#include <stdbool.h>
#include <stddef.h>
#include <zlib.h>

#include "base/internal.h"

/* The gathered input's size, and the size of the pieces drained. */
#define CPROF__GZOUT_CAP (32 * 1024)

/* Takes n compressed bytes; 0, or an error code that stops the stream. */
typedef int (*cprof__gzout_drain)(void *ctx, const void *data, size_t n);

typedef struct {
  z_stream z;
  bool ready; /* deflateInit2 succeeded (at the first deflate) */
  int small_mem_level, mem_level; /* asked for; taken (once ready) */
  unsigned char *in, *out;
  size_t in_len;
  cprof__gzout_drain drain;
  void *ctx;
} cprof__gzout;

/* A gzip stream at level 1 (gzip.BestSpeed, as Go's runtime/pprof writes
 * its profiles): 0, or CPROF_ENOMEM (g is then to be freed all the same).
 * A stream whose bytes all fit the gathered input (CPROF__GZOUT_CAP)
 * gets zlib's memLevel mem_level, a longer one zlib's default 8: the
 * compressor is set up when the first bytes reach it, which tells. At
 * level 1, memLevel 5 took 0.62 ms for 32 KiB of a compiler's profiles
 * and 4.96 ms for 357 KB, memLevel 8 0.32 and 3.58 ms (files within
 * 0.6% of each other); 5's smaller tables are what a fork child's short
 * profile saves in page faults. */
CPROF__HIDDEN int cprof__gzout_init(cprof__gzout *g, int mem_level,
                                    cprof__gzout_drain drain, void *ctx);
/* Adds n bytes to the stream: 0, the drain's error, CPROF_EIO when
 * deflate fails, or CPROF_ENOMEM when it cannot be set up. */
CPROF__HIDDEN int cprof__gzout_write(cprof__gzout *g, const void *data,
                                     size_t n);
/* Ends the stream and drains the rest: errors as for write. */
CPROF__HIDDEN int cprof__gzout_finish(cprof__gzout *g);
/* Frees what init made (accepts a g whose init failed). */
CPROF__HIDDEN void cprof__gzout_free(cprof__gzout *g);

#endif
