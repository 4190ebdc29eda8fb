/*
 * libFuzzer target for the symbol cache's entries (encode/symcache.c): an
 * entry is a file in the user's cache directory, which another process of
 * the user's (or anything with the user's rights) may have written, so
 * every byte of it is outside cprof's control. An input is parsed; when it
 * parses, every address it holds is found with its frames inside the
 * input, and it is written again: the copy parses and holds the same
 * results (those lookups find for an offset several parts hold),
 * whole, as an entry of half its addresses to which the other half is
 * added, and as that entry with a part of the other half appended (the
 * path every exit dump takes), also written into one part. The offsets
 * next to each are looked up by the ranges entries hold. Its stamp is
 * checked too (it stats the paths it names). ASan checks that nothing is
 * read outside the input. The corpus holds the entry five runs of ls
 * wrote: one part written whole, three appended, most of its entries with
 * ranges.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode/symcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const cprof__sym_result *a, const cprof__sym_frame *fa,
                 const cprof__sym_result *b, const cprof__sym_frame *fb) {
  if (a->nframes != b->nframes || a->has_line != b->has_line ||
      a->has_inline != b->has_inline || a->has_function != b->has_function ||
      a->decl_line != b->decl_line || a->call != b->call ||
      a->stub != b->stub || a->call_disp != b->call_disp ||
      a->range_lo != b->range_lo || a->range_hi != b->range_hi)
    return false;
  for (int i = 0; i < a->nframes; i++)
    if (strcmp(fa[i].name, fb[i].name) || strcmp(fa[i].file, fb[i].file) ||
        strcmp(fa[i].system_name, fb[i].system_name) ||
        fa[i].line != fb[i].line || fa[i].start != fb[i].start)
      return false;
  return true;
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Every offset v's parts hold, once each, in order: *n of them. */
static uint64_t *offsets(const cprof__symcache_view *v, size_t *n) {
  uint64_t *o = malloc(((size_t)v->nentries + 1) * sizeof *o);
  if (!o) abort();
  size_t k = 0;
  for (uint32_t p = 0; p < v->nparts; p++)
    for (uint32_t i = 0; i < v->part[p].nentries; i++)
      memcpy(&o[k++], v->part[p].entries + (size_t)i * 32, sizeof *o);
  qsort(o, k, sizeof *o, by_value);
  *n = 0;
  for (size_t i = 0; i < k; i++)
    if (*n == 0 || o[*n - 1] != o[i]) o[(*n)++] = o[i];
  return o;
}

/* Aborts unless w holds each of offs[0..n) with v's result for it. */
static void holds_all(const cprof__symcache_view *v,
                      const cprof__symcache_view *w, const uint64_t *offs,
                      size_t n) {
  static cprof__sym_frame fa[CPROF__SYM_MAX_FRAMES], fb[CPROF__SYM_MAX_FRAMES];
  for (size_t i = 0; i < n; i++) {
    cprof__sym_result a = {0}, b = {0};
    if (!cprof__symcache_find(v, offs[i], 0x400000, &a, fa) ||
        !cprof__symcache_find(w, offs[i], 0x400000, &b, fb) ||
        !same(&a, fa, &b, fb))
      abort();
  }
}

/* data[0..len) followed by more[0..more_len), in a buffer of its own. */
static uint8_t *joined(const void *data, size_t len, const void *more,
                       size_t more_len) {
  uint8_t *j = malloc(len + more_len + 1);
  if (!j) abort();
  memcpy(j, data, len);
  memcpy(j + len, more, more_len);
  return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A heap copy of exactly its size, so that ASan sees a read past it. */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  cprof__symcache_view v;
  (void)cprof__symcache_stamp_holds(copy, size, "cprof symbols 1");
  if (!cprof__symcache_parse(copy, size, &v)) {
    free(copy);
    return 0;
  }
  (void)cprof__symcache_stamp_holds(v.stamp, v.stamp_len, "cprof symbols 1");
  size_t n;
  uint64_t *offs = offsets(&v, &n);
  /* The offsets next to each held one, by the ranges: what they find lies
   * inside the input. (Ranges of a made-up entry may overlap and name
   * one offset differently, so no result is compared.) */
  for (size_t i = 0; i < n; i++) {
    static cprof__sym_frame f[CPROF__SYM_MAX_FRAMES];
    cprof__sym_result r = {0};
    for (int d = -1; d <= 1; d += 2)
      if (cprof__symcache_find_range(&v, offs[i] + (uint64_t)d,
                                     0x400000 + (uint64_t)d, &r, f))
        for (int k = 0; k < r.nframes; k++)
          if (strlen(f[k].name) + strlen(f[k].file) +
                  strlen(f[k].system_name) == SIZE_MAX)
            abort();
  }
  /* Written whole, in one part: the same results, those lookups find
   * (all of them while they fit the bound). */
  cprof_buf out = {0};
  if (cprof__symcache_write(&v, NULL, 0, v.stamp, v.stamp_len, &out) != 0)
    abort();
  cprof__symcache_view w;
  if (!cprof__symcache_parse(out.data, out.len, &w) || w.nparts != 1 ||
      w.damaged)
    abort();
  if (n <= CPROF__SYMCACHE_MAX) {
    if (w.nentries != n) abort();
    holds_all(&v, &w, offs, n);
  }
  cprof_buf_free(&out);
  if (n > CPROF__SYMCACHE_MAX) n = CPROF__SYMCACHE_MAX;

  /* Halves: the even addresses written alone, the odd added to them, as
   * an entry written again and as a part appended. */
  cprof__symcache_add *add = calloc(n ? n : 1, sizeof *add);
  cprof__sym_result *res = calloc(n ? n : 1, sizeof *res);
  cprof__sym_frame *frames =
      calloc(n ? n : 1, CPROF__SYM_MAX_FRAMES * sizeof *frames);
  if (!add || !res || !frames) abort();
  size_t neven = 0, nodd = 0, odd_at = (n + 1) / 2;
  for (size_t i = 0; i < n; i++) {
    cprof__sym_frame *f = frames + i * CPROF__SYM_MAX_FRAMES;
    if (!cprof__symcache_find(&v, offs[i], 0x400000, &res[i], f)) abort();
    res[i].frames = f;
    size_t at = i % 2 ? odd_at + nodd++ : neven++;
    add[at] = (cprof__symcache_add){offs[i], 0x400000, &res[i]};
  }
  cprof_buf half = {0}, both = {0}, part = {0}, whole = {0};
  cprof__symcache_view h, b, a, c;
  if (cprof__symcache_write(NULL, add, neven, v.stamp, v.stamp_len, &half) ||
      !cprof__symcache_parse(half.data, half.len, &h) ||
      cprof__symcache_write(&h, add + odd_at, nodd, v.stamp, v.stamp_len,
                            &both) ||
      !cprof__symcache_parse(both.data, both.len, &b))
    abort();
  holds_all(&v, &b, offs, n);
  if (cprof__symcache_append(add + odd_at, nodd, &part) != 0) abort();
  uint8_t *two = joined(half.data, half.len, part.data, part.len);
  if (!cprof__symcache_parse(two, half.len + part.len, &a) ||
      a.nparts != 2 || a.damaged)
    abort();
  holds_all(&v, &a, offs, n);
  /* ... and the two parts written into one. */
  if (cprof__symcache_write(&a, NULL, 0, v.stamp, v.stamp_len, &whole) ||
      !cprof__symcache_parse(whole.data, whole.len, &c) || c.nparts != 1)
    abort();
  holds_all(&v, &c, offs, n);
  free(two);
  cprof_buf_free(&half);
  cprof_buf_free(&both);
  cprof_buf_free(&part);
  cprof_buf_free(&whole);
  free(add);
  free(res);
  free(frames);
  free(offs);
  free(copy);
  return 0;
}
