/*
 * libFuzzer target for the symbol cache's entries (encode/symcache.c): an
 * entry is a file in the user's cache directory, which another process of
 * the user's (or anything with the user's rights) may have written, so
 * every byte of it is outside cprof's control. An input is parsed; when it
 * parses, every address it holds is found with its frames inside the
 * input, and it is written again: the copy parses and holds the same
 * results. Its stamp is checked too (it stats the paths it names). ASan
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
      a->decl_line != b->decl_line)
    return false;
  for (int i = 0; i < a->nframes; i++)
    if (strcmp(fa[i].name, fb[i].name) || strcmp(fa[i].file, fb[i].file) ||
        strcmp(fa[i].system_name, fb[i].system_name) ||
        fa[i].line != fb[i].line || fa[i].start != fb[i].start)
      return false;
  return true;
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
  if (!cprof__symcache_parse(out.data, out.len, &w) ||
      w.nentries != v.nentries)
    abort();
  static cprof__sym_frame fa[CPROF__SYM_MAX_FRAMES], fb[CPROF__SYM_MAX_FRAMES];
  for (uint32_t i = 0; i < v.nentries; i++) {
    uint64_t off;
    memcpy(&off, v.entries + (size_t)i * 24, sizeof off);
    cprof__sym_result a = {0}, b = {0};
    if (!cprof__symcache_find(&v, off, 0x400000, &a, fa) ||
        !cprof__symcache_find(&w, off, 0x400000, &b, fb) ||
        !same(&a, fa, &b, fb))
      abort();
  }
  cprof_buf_free(&out);
  free(copy);
  return 0;
}
