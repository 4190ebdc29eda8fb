/*
 * A protobuf reader just big enough for profile.proto, and a gunzip, for
 * the unit tests that check the wire format cprof writes (test_pprof.c,
 * test_pprof_merge.c) with a reader of their own rather than the code's.
 * Bounded: nothing is read at or past a reader's end.
 */
#ifndef CPROF_TEST_PBREAD_H
#define CPROF_TEST_PBREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct rd {
  const unsigned char *p, *end;
  bool bad;
} rd;

/* A varint; one longer than ten bytes, or cut short, marks r bad. */
static inline uint64_t rd_varint(rd *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) break;
    unsigned char c = *r->p++;
    v |= (uint64_t)(c & 0x7f) << (shift < 64 ? shift : 0);
    if (!(c & 0x80)) return v;
  }
  r->bad = true;
  return 0;
}

/* Reads one field: its number, wire type and either its varint value or,
 * for a length-delimited field, a reader over its bytes. Any other wire
 * type marks r bad. */
static inline bool rd_field(rd *r, int *field, int *wire, uint64_t *v,
                            rd *sub) {
  if (r->bad || r->p >= r->end) return false;
  uint64_t key = rd_varint(r);
  *field = (int)(key >> 3);
  *wire = (int)(key & 7);
  if (*wire == 0) {
    *v = rd_varint(r);
  } else if (*wire == 2) {
    uint64_t n = rd_varint(r);
    if (n > (uint64_t)(r->end - r->p)) {
      r->bad = true;
      return false;
    }
    *sub = (rd){r->p, r->p + n, false};
    r->p += n;
  } else {
    r->bad = true;
    return false;
  }
  return !r->bad;
}

/* Appends a repeated varint field, packed or not, keeping the first max
 * values and counting all; *packed (when not NULL) records which form. */
static inline void rd_repeated(int wire, uint64_t v, rd *sub, uint64_t *out,
                               size_t *n, size_t max, bool *packed) {
  if (packed) *packed = wire != 0;
  if (wire == 0) {
    if (*n < max) out[*n] = v;
    (*n)++;
    return;
  }
  while (sub->p < sub->end && !sub->bad) {
    uint64_t x = rd_varint(sub);
    if (*n < max) out[*n] = x;
    (*n)++;
  }
}

/* A message's varint fields, by field number below nout. */
static inline void decode_fields(rd *r, uint64_t *out, size_t nout) {
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(r, &f, &w, &v, &sub))
    if (w == 0 && f > 0 && (size_t)f < nout) out[f] = v;
}

/* Inflates one whole gzip (or zlib) stream into malloc'd memory; NULL when
 * the stream is bad, incomplete or followed by anything. */
static inline unsigned char *gunzip(const unsigned char *in, size_t len,
                                    size_t *outlen) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 32) != Z_OK) return NULL;
  size_t cap = 1 << 16, n = 0;
  unsigned char *out = malloc(cap);
  z.next_in = (unsigned char *)(uintptr_t)in;
  z.avail_in = (uInt)len;
  int rc;
  do {
    if (n == cap) out = realloc(out, cap *= 2);
    z.next_out = out + n;
    z.avail_out = (uInt)(cap - n);
    rc = inflate(&z, Z_NO_FLUSH);
    n = cap - z.avail_out;
  } while (rc == Z_OK);
  bool whole = rc == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  if (!whole) {
    free(out);
    return NULL;
  }
  *outlen = n;
  return out;
}

#endif
