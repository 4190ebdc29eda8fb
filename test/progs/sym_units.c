/*
 * Names every STEP-th address of this program's code and of libc's, as
 * the symbolizer does for a profile, and prints each with its file offset
 * (the same in every run): "OBJECT OFFSET" and then, one a line, each
 * frame's name, file, line and function start (as an offset too):
 *   sym_units STEP
 * test/e2e/symbol_units_same.sh runs it with the debug cache off, where
 * libdwfl finds each address's compile unit from .debug_aranges, and on,
 * where the cache's compile-unit tables find them: the output must be
 * the same.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode/symbolize.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  uint64_t step = strtoull(argv[1], NULL, 0);
  if (step == 0) return 2;
  cprof__sym_lock();
  if (cprof__sym_refresh() != 0) return 1;
  size_t n = 0;
  for (size_t i = 0; i < cprof__sym_nmappings(); i++) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at(i);
    if (!m->is_main && !strstr(m->path, "/libc.so")) continue;
    const char *base = strrchr(m->path, '/');
    base = base ? base + 1 : m->path;
    for (uint64_t a = m->start; a < m->limit; a += step, n++) {
      const cprof__sym_result *r = cprof__sym_lookup((uintptr_t)a);
      printf("%s %" PRIx64 "\n", base, a - m->start + m->offset);
      for (int k = 0; r && k < r->nframes; k++) {
        const cprof__sym_frame *f = &r->frames[k];
        printf("  %s|%s|%d|%" PRIx64 "\n", f->name, f->file, f->line,
               f->start >= m->start && f->start < m->limit
                   ? f->start - m->start + m->offset
                   : f->start);
      }
    }
  }
  cprof__sym_unlock();
  fprintf(stderr, "%zu addresses\n", n);
  return n == 0;
}
