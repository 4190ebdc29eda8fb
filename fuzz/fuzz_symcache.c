/*
 * libFuzzer target for the symbol cache's entries (encode/symcache.c): an
 * entry is a file in the user's cache directory, which another process of
 * the user's (or anything with the user's rights) may have written, so
 * every byte of it is outside cprof's control. An input is parsed; when it
 * parses, every address it holds is found with its frames inside the
 * input, and it is written again: the copy parses and holds the same
 * results, both whole and as an entry of half its addresses to which the
 * other half is added (the appending path every exit dump takes). Its stamp is checked too (it stats the paths it names). ASan
 * checks that nothing is read outside the input. The corpus holds an
 * entry written by a run of ls.
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
      a->stub != b->stub || a->call_disp != b->call_disp)
    return false;
  for (int i = 0; i < a->nframes; i++)
    if (strcmp(fa[i].name, fb[i].name) || strcmp(fa[i].file, fb[i].file) ||
        strcmp(fa[i].system_name, fb[i].system_name) ||
        fa[i].line != fb[i].line || fa[i].start != fb[i].start)
      return false;
  return true;
}

/* The file offset of v's entry i. */
static uint64_t offset_at(const cprof__symcache_view *v, uint32_t i) {
  uint64_t off;
  memcpy(&off, v->entries + (size_t)i * 24, sizeof off);
  return off;
}

/* Aborts unless the entry w holds every address of v, with its result. */
static void holds_all(const cprof__symcache_view *v,
                      const cprof__symcache_view *w) {
  static cprof__sym_frame fa[CPROF__SYM_MAX_FRAMES], fb[CPROF__SYM_MAX_FRAMES];
  if (w->nentries != v->nentries) abort();
  for (uint32_t i = 0; i < v->nentries; i++) {
    uint64_t off = offset_at(v, i);
    cprof__sym_result a = {0}, b = {0};
    if (!cprof__symcache_find(v, off, 0x400000, &a, fa) ||
        !cprof__symcache_find(w, off, 0x400000, &b, fb) ||
        !same(&a, fa, &b, fb))
      abort();
  }
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
  cprof_buf out = {0};
  if (cprof__symcache_write(&v, NULL, 0, v.stamp, v.stamp_len, &out) != 0)
    abort();
  cprof__symcache_view w;
  if (!cprof__symcache_parse(out.data, out.len, &w)) abort();
  holds_all(&v, &w);
  cprof_buf_free(&out);

  /* Halves: the even addresses written alone, the odd added to them. */
  size_t n = v.nentries;
  cprof__symcache_add *add = calloc(n ? n : 1, sizeof *add);
  cprof__sym_result *res = calloc(n ? n : 1, sizeof *res);
  cprof__sym_frame *frames =
      calloc(n ? n : 1, CPROF__SYM_MAX_FRAMES * sizeof *frames);
  if (!add || !res || !frames) abort();
  size_t neven = 0, nodd = 0, odd_at = (n + 1) / 2;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t off = offset_at(&v, i);
    cprof__sym_frame *f = frames + (size_t)i * CPROF__SYM_MAX_FRAMES;
    if (!cprof__symcache_find(&v, off, 0x400000, &res[i], f)) abort();
    res[i].frames = f;
    size_t at = i % 2 ? odd_at + nodd++ : neven++;
    add[at] = (cprof__symcache_add){off, 0x400000, &res[i]};
  }
  cprof_buf half = {0}, both = {0};
  cprof__symcache_view h, b;
  if (cprof__symcache_write(NULL, add, neven, v.stamp, v.stamp_len, &half) ||
      !cprof__symcache_parse(half.data, half.len, &h) ||
      cprof__symcache_write(&h, add + odd_at, nodd, v.stamp, v.stamp_len,
                            &both) ||
      !cprof__symcache_parse(both.data, both.len, &b))
    abort();
  holds_all(&v, &b);
  cprof_buf_free(&half);
  cprof_buf_free(&both);
  free(add);
  free(res);
  free(frames);
  free(copy);
  return 0;
}
