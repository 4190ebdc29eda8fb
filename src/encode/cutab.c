/*
 * The compile-unit table's format (cutab.h). Integers are little-endian,
 * as the machine writes them (x86-64):
 *
 *   header  8-byte magic, u32 stamp_len, u32 nruns, u64 last_end, u64
 *           hash (cprof__hash_bytes) of the three before it and of
 *           everything after the header
 *   stamp   stamp_len bytes, padded to 8 with zeroes
 *   runs    nruns x 16 bytes: u64 start (strictly increasing), u64 the
 *           compile unit's DIE offset
 */
#include <string.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "encode/cutab.h"

static const unsigned char MAGIC[8] = {'C', 'P', 'C', 'U', 'T', 0, 0, 1};
enum { HDR = 32, RUN = 16 };

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The hash of p[0..HDR + body), the header's own field left out. */
static uint64_t hash_of(const unsigned char *p, size_t body) {
  uint64_t h = cprof__hash_bytes(CPROF__HASH_SEED, p + 8, 16);
  return cprof__hash_bytes(h, p + HDR, body);
}

static cprof__cutab_run run_at(const cprof__cutab *t, uint32_t i) {
  cprof__cutab_run r;
  memcpy(&r, t->runs + (size_t)i * RUN, sizeof r);
  return r;
}

int cprof__cutab_write(const cprof__cutab_run *runs, size_t n,
                       uint64_t last_end, const void *stamp,
                       size_t stamp_len, cprof_buf *out) {
  if (n > CPROF__CUTAB_MAX || stamp_len > UINT32_MAX / 2) return CPROF_EINVAL;
  for (size_t i = 1; i < n; i++)
    if (runs[i].start <= runs[i - 1].start) return CPROF_EINVAL;
  size_t body = pad8(stamp_len) + n * RUN;
  unsigned char *p = cprof__calloc(1, HDR + body);
  if (!p) return CPROF_ENOMEM;
  memcpy(p, MAGIC, sizeof MAGIC);
  uint32_t h[2] = {(uint32_t)stamp_len, (uint32_t)n};
  memcpy(p + 8, h, sizeof h);
  memcpy(p + 16, &last_end, sizeof last_end);
  memcpy(p + HDR, stamp, stamp_len);
  memcpy(p + HDR + pad8(stamp_len), runs, n * RUN);
  uint64_t hash = hash_of(p, body);
  memcpy(p + 24, &hash, sizeof hash);
  out->len = 0;
  int err = cprof__buf_append(out, p, HDR + body) != 0 ? CPROF_ENOMEM : 0;
  cprof__free(p);
  return err;
}

bool cprof__cutab_parse(const void *data, size_t len, cprof__cutab *t) {
  const unsigned char *p = data;
  if (!p || len < HDR || memcmp(p, MAGIC, sizeof MAGIC) != 0) return false;
  uint32_t h[2];
  uint64_t last_end, hash;
  memcpy(h, p + 8, sizeof h);
  memcpy(&last_end, p + 16, sizeof last_end);
  memcpy(&hash, p + 24, sizeof hash);
  if (h[1] > CPROF__CUTAB_MAX || pad8(h[0]) > len - HDR ||
      (size_t)h[1] * RUN != len - HDR - pad8(h[0]) ||
      hash_of(p, len - HDR) != hash)
    return false;
  for (size_t i = h[0]; i < pad8(h[0]); i++)
    if (p[HDR + i] != 0) return false;
  *t = (cprof__cutab){.stamp = p + HDR,
                      .stamp_len = h[0],
                      .runs = p + HDR + pad8(h[0]),
                      .nruns = h[1],
                      .last_end = last_end};
  for (uint32_t i = 1; i < t->nruns; i++)
    if (run_at(t, i).start <= run_at(t, i - 1).start) return false;
  return true;
}

/* libdwfl's search (addrarange in libdwfl/cu.c): a run holds the
 * addresses from its start to the next run's, and the last run those up
 * to and at last_end. */
bool cprof__cutab_find(const cprof__cutab *t, uint64_t addr,
                       uint64_t *cu_off) {
  uint32_t lo = 0, hi = t->nruns;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    cprof__cutab_run r = run_at(t, mid);
    if (addr < r.start) {
      hi = mid;
      continue;
    }
    if (addr > r.start) {
      if (mid + 1 < t->nruns) {
        if (addr >= run_at(t, mid + 1).start) {
          lo = mid + 1;
          continue;
        }
      } else if (addr > t->last_end) {
        return false;
      }
    }
    *cu_off = r.cu_off;
    return true;
  }
  return false;
}
