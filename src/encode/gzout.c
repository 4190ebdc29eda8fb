/*
 * A gzip stream written in pieces (gzout.h). It owns its z_stream and its
 * two buffers; it calls zlib, mem.h's memory functions and the caller's
 * drain.
 */
#include <limits.h>
#include <string.h>

#include "base/mem.h"
#include "encode/gzout.h"

int cprof__gzout_init(cprof__gzout *g, int mem_level,
                      cprof__gzout_drain drain, void *ctx) {
  memset(g, 0, sizeof *g);
  g->drain = drain;
  g->ctx = ctx;
  g->small_mem_level = mem_level;
  g->in = cprof__malloc(CPROF__GZOUT_CAP);
  g->out = cprof__malloc(CPROF__GZOUT_CAP);
  if (!g->in || !g->out) return CPROF_ENOMEM;
  g->z.next_out = g->out;
  g->z.avail_out = CPROF__GZOUT_CAP;
  return 0;
}

/* Sets the compressor up for a stream that fits the gathered input
 * (whole: the first deflate finishes it) or not. */
static int start(cprof__gzout *g, bool whole) {
  /* windowBits 15 + 16 asks for a gzip header and trailer, which is what
   * pprof expects of a profile file. */
  cprof__guard_enter();
  int rc = deflateInit2(&g->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16,
                        whole ? g->small_mem_level : 8, Z_DEFAULT_STRATEGY);
  cprof__guard_exit();
  if (rc != Z_OK) return CPROF_ENOMEM;
  g->ready = true;
  g->mem_level = whole ? g->small_mem_level : 8;
  return 0;
}

/* Hands what the compressor wrote to the drain. */
static int drain_out(cprof__gzout *g) {
  size_t n = CPROF__GZOUT_CAP - g->z.avail_out;
  g->z.next_out = g->out;
  g->z.avail_out = CPROF__GZOUT_CAP;
  return n ? g->drain(g->ctx, g->out, n) : 0;
}

/* Gives deflate n bytes at data, or finishes the stream (Z_FINISH). */
static int deflate_bytes(cprof__gzout *g, const void *data, size_t n,
                         int flush) {
  const unsigned char *src = data;
  if (n == 0 && flush == Z_NO_FLUSH) return 0;
  if (!g->ready) {
    int err = start(g, flush == Z_FINISH);
    if (err) return err;
  }
  do {
    /* avail_in is a uInt: larger inputs go in pieces it holds. */
    uInt take = n > UINT_MAX ? UINT_MAX : (uInt)n;
    int f = n > take ? Z_NO_FLUSH : flush;
    g->z.next_in = src;
    g->z.avail_in = take;
    for (;;) {
      int err = g->z.avail_out == 0 ? drain_out(g) : 0;
      if (err) return err;
      cprof__guard_enter();
      int rc = deflate(&g->z, f);
      cprof__guard_exit();
      if (rc == Z_STREAM_END) return 0;
      if (rc != Z_OK) return CPROF_EIO;
      if (f == Z_NO_FLUSH && g->z.avail_in == 0) break;
    }
    src += take;
    n -= take;
  } while (n > 0);
  return 0;
}

int cprof__gzout_write(cprof__gzout *g, const void *data, size_t n) {
  if (n > CPROF__GZOUT_CAP - g->in_len) {
    int err = deflate_bytes(g, g->in, g->in_len, Z_NO_FLUSH);
    g->in_len = 0;
    if (err) return err;
    /* A write as large as the buffer goes straight through. */
    if (n >= CPROF__GZOUT_CAP) return deflate_bytes(g, data, n, Z_NO_FLUSH);
  }
  if (n) memcpy(g->in + g->in_len, data, n);
  g->in_len += n;
  return 0;
}

int cprof__gzout_finish(cprof__gzout *g) {
  int err = deflate_bytes(g, g->in, g->in_len, Z_FINISH);
  g->in_len = 0;
  return err ? err : drain_out(g);
}

void cprof__gzout_free(cprof__gzout *g) {
  if (g->ready) {
    cprof__guard_enter();
    deflateEnd(&g->z);
    cprof__guard_exit();
  }
  cprof__free(g->in);
  cprof__free(g->out);
  memset(g, 0, sizeof *g);
}
