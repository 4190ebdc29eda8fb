/*
 * profile.proto on the wire, as the encoder (pprof.c) writes it and the
 * merger (pprof_merge.c) reads and rewrites it: the wire types, the
 * Profile message's field numbers and the varint encoding.
 */
#ifndef CPROF_PPROF_WIRE_H
#define CPROF_PPROF_WIRE_H

#include <stddef.h>
#include <stdint.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* The field numbers of Profile, from profile.proto. */
enum {
  PROFILE_SAMPLE_TYPE = 1,
  PROFILE_SAMPLE = 2,
  PROFILE_MAPPING = 3,
  PROFILE_LOCATION = 4,
  PROFILE_FUNCTION = 5,
  PROFILE_STRING_TABLE = 6,
  PROFILE_DROP_FRAMES = 7,
  PROFILE_KEEP_FRAMES = 8,
  PROFILE_TIME_NANOS = 9,
  PROFILE_DURATION_NANOS = 10,
  PROFILE_PERIOD_TYPE = 11,
  PROFILE_PERIOD = 12,
  PROFILE_COMMENT = 13,
  PROFILE_DEFAULT_SAMPLE_TYPE = 14,
  PROFILE_DOC_URL = 15,
};

/* Writes v as a varint into dst (room for 10 bytes); returns its length. */
static inline size_t cprof__varint_encode(unsigned char *dst, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    dst[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  dst[n++] = (unsigned char)v;
  return n;
}

#endif
