/*
 * The encode stage's hash map (see hmap.h): linear probing over parallel key
 * and value arrays, kept at most half full.
 */
#include <string.h>

#include "base/hmap.h"
#include "base/mem.h"

static size_t slot_of(uint64_t key, size_t cap) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (size_t)key & (cap - 1);
}

static int grow(cprof__hmap *h) {
  size_t cap = h->cap ? h->cap * 2 : 64;
  uint64_t *keys = cprof__calloc(cap, sizeof *keys);
  uint64_t *vals = cprof__calloc(cap, sizeof *vals);
  if (!keys || !vals) {
    cprof__free(keys);
    cprof__free(vals);
    return CPROF_ENOMEM;
  }
  for (size_t i = 0; i < h->cap; i++) {
    if (!h->keys[i]) continue;
    size_t s = slot_of(h->keys[i], cap);
    while (keys[s]) s = (s + 1) & (cap - 1);
    keys[s] = h->keys[i];
    vals[s] = h->vals[i];
  }
  cprof__free(h->keys);
  cprof__free(h->vals);
  h->keys = keys;
  h->vals = vals;
  h->cap = cap;
  return 0;
}

int cprof__hmap_put(cprof__hmap *h, uint64_t key, uint64_t val) {
  if (2 * (h->len + 1) > h->cap) {
    int err = grow(h);
    if (err) return err;
  }
  size_t s = slot_of(key, h->cap);
  while (h->keys[s] && h->keys[s] != key) s = (s + 1) & (h->cap - 1);
  if (!h->keys[s]) {
    h->keys[s] = key;
    h->len++;
  }
  h->vals[s] = val;
  return 0;
}

bool cprof__hmap_get(const cprof__hmap *h, uint64_t key, uint64_t *val) {
  if (!h->cap) return false;
  size_t s = slot_of(key, h->cap);
  while (h->keys[s]) {
    if (h->keys[s] == key) {
      *val = h->vals[s];
      return true;
    }
    s = (s + 1) & (h->cap - 1);
  }
  return false;
}

void cprof__hmap_free(cprof__hmap *h) {
  cprof__free(h->keys);
  cprof__free(h->vals);
  memset(h, 0, sizeof *h);
}

/* Eight bytes a step: FNV-1a's step a byte made a multiply's latency a
 * byte, and hashing the names and files a dump interns (C++ names of a
 * hundred bytes and more) was 3-4% of a compiler's exit dump by perf. */
uint64_t cprof__hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  h ^= (uint64_t)n * k;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * k;
    h ^= h >> 32;
  }
  if (n) {
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * k;
    h ^= h >> 32;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h ? h : 1;
}
