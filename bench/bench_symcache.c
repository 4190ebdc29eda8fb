/*
 * Symbol cache lookups in an entry with appended parts, as a compiler's
 * exit dump makes them: an entry of 20,000 addresses written whole and 15
 * parts of 300 appended since (the most an entry holds before it is
 * written whole again), and 4,500 lookups, nine in ten of an address of
 * the part written whole, the rest spread over the appended parts. The
 * order cprof__symcache_find searches (the part written whole, then the
 * appended ones newest first) is timed against every part newest first,
 * the order before, in the same run, alternating. Times come from
 * CLOCK_MONOTONIC; the ratio is of the medians.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/mem.h"
#include "encode/symcache.h"

#define BASE 20000
#define PARTS 15
#define PER_PART 300
#define LOOKUPS 4500
#define ROUNDS 31

static const char STAMP[] = "bench stamp";

static cprof__sym_frame frame = {
    .name = "function_name_of_some_length",
    .system_name = "function_name_of_some_length",
    .file = "/usr/src/some/dir/file.c",
    .line = 42};
static cprof__sym_result result = {
    .nframes = 1, .has_line = true, .has_function = true, .frames = &frame};

static void adds_of(const uint64_t *offs, size_t n, cprof__symcache_add *a) {
  for (size_t i = 0; i < n; i++)
    a[i] = (cprof__symcache_add){offs[i], 0x400000 + offs[i], &result};
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Every part newest first, each as a view of its own. */
static bool find_newest_first(const cprof__symcache_view *parts, uint32_t n,
                              uint64_t off, cprof__sym_result *r,
                              cprof__sym_frame *f) {
  for (uint32_t i = n; i-- > 0;)
    if (cprof__symcache_find(&parts[i], off, 0x400000 + off, r, f))
      return true;
  return false;
}

static int by_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int main(void) {
  static uint64_t base[BASE], parts[PARTS][PER_PART], look[LOOKUPS];
  static cprof__symcache_add adds[BASE];
  for (size_t i = 0; i < BASE; i++) base[i] = 64 * i + 16;
  for (size_t p = 0; p < PARTS; p++)
    for (size_t i = 0; i < PER_PART; i++)
      parts[p][i] = 64 * (i * PARTS + p) + 40; /* between the base's */
  cprof_buf file = {0};
  adds_of(base, BASE, adds);
  if (cprof__symcache_write(NULL, adds, BASE, STAMP, sizeof STAMP, &file)) {
    fputs("write failed\n", stderr);
    return 1;
  }
  for (size_t p = 0; p < PARTS; p++) {
    cprof_buf part = {0};
    adds_of(parts[p], PER_PART, adds);
    if (cprof__symcache_append(adds, PER_PART, &part) ||
        cprof__buf_append(&file, part.data, part.len)) {
      fputs("append failed\n", stderr);
      return 1;
    }
    cprof_buf_free(&part);
  }
  cprof__symcache_view v, one[PARTS + 1];
  if (!cprof__symcache_parse(file.data, file.len, &v) ||
      v.nparts != PARTS + 1) {
    fputs("parse failed\n", stderr);
    return 1;
  }
  for (uint32_t i = 0; i < v.nparts; i++) {
    one[i] = v;
    one[i].part[0] = v.part[i];
    one[i].nparts = 1;
  }
  for (size_t i = 0; i < LOOKUPS; i++)
    look[i] = next() % 10 ? base[next() % BASE]
                          : parts[next() % PARTS][next() % PER_PART];
  int64_t now[ROUNDS], before[ROUNDS];
  size_t found = 0;
  cprof__sym_result r;
  cprof__sym_frame f[CPROF__SYM_MAX_FRAMES];
  for (int k = 0; k < ROUNDS; k++) {
    int64_t t0 = cprof__mono_ns();
    for (size_t i = 0; i < LOOKUPS; i++)
      found += cprof__symcache_find(&v, look[i], 0x400000 + look[i], &r, f);
    int64_t t1 = cprof__mono_ns();
    for (size_t i = 0; i < LOOKUPS; i++)
      found += find_newest_first(one, v.nparts, look[i], &r, f);
    int64_t t2 = cprof__mono_ns();
    now[k] = t1 - t0;
    before[k] = t2 - t1;
  }
  if (found != 2 * (size_t)ROUNDS * LOOKUPS) {
    fprintf(stderr, "lookups missed: %zu found\n", found);
    return 1;
  }
  qsort(now, ROUNDS, sizeof now[0], by_i64);
  qsort(before, ROUNDS, sizeof before[0], by_i64);
  double a = (double)now[ROUNDS / 2], b = (double)before[ROUNDS / 2];
  printf("symcache lookups, %d in an entry of %d addresses and %d parts of "
         "%d, %d rounds, medians\n",
         LOOKUPS, BASE, PARTS, PER_PART, ROUNDS);
  printf("written part first, then newest first  %6.0f ns/lookup\n",
         a / LOOKUPS);
  printf("every part newest first (before)        %6.0f ns/lookup\n",
         b / LOOKUPS);
  printf("ratio %.2f; %.2f ms against %.2f ms for the %d lookups\n", a / b,
         a / 1e6, b / 1e6, LOOKUPS);
  cprof_buf_free(&file);
  return 0;
}
