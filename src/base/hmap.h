/*
 * A small open-addressing hash map from nonzero 64-bit keys to 64-bit
 * values, for the encode stage (address -> location id, function key ->
 * function id). Grows by doubling; normal context only.
 */
#ifndef CPROF_HMAP_H
#define CPROF_HMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/internal.h"

typedef struct cprof__hmap {
  uint64_t *keys;
  uint64_t *vals;
  size_t cap; /* a power of two, or 0 */
  size_t len;
} cprof__hmap;

/* Inserts or replaces; key must be nonzero. Returns 0 or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__hmap_put(cprof__hmap *h, uint64_t key, uint64_t val);
CPROF__HIDDEN bool cprof__hmap_get(const cprof__hmap *h, uint64_t key,
                                   uint64_t *val);
CPROF__HIDDEN void cprof__hmap_free(cprof__hmap *h);

/* A 64-bit hash of a byte string continuing from h (start with
 * CPROF__HASH_SEED), eight bytes a step, every bit of the result mixed
 * (its low bits index tables as they are); never returns 0. For tables in
 * memory only: nothing stored keeps one. */
#define CPROF__HASH_SEED 0xcbf29ce484222325ull
CPROF__HIDDEN uint64_t cprof__hash_bytes(uint64_t h, const void *data,
                                         size_t n);

#endif
