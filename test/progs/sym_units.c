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
 *   sym_units STEP LIBRARY
 * names every STEP-th address of LIBRARY's code instead (loaded with
 * dlopen), and none of the program's or libc's: test/e2e/symbol_ranges.sh
 * names a library without debug information so, where the symbol cache
 * names addresses by the ranges its entries hold.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/stack.h"
#include "encode/symbolize.h"

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) return 2;
  uint64_t step = strtoull(argv[1], NULL, 0);
  if (step == 0) return 2;
  const char *lib = argc == 3 ? argv[2] : NULL;
  void *handle = lib ? dlopen(lib, RTLD_NOW) : NULL;
  if (lib && !handle) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  /* For a library, the symbol cache's entries are used too: the unwind
   * tables' index, which says which code the loader mapped (where the
   * cache keys addresses by file offset), is published as a profile's
   * first sample would. (Without it, as for the program and libc, only
   * the compile-unit tables are.) */
  if (lib) cprof__stack_refresh();
  cprof__sym_lock();
  if (cprof__sym_refresh() != 0) return 1;
  size_t n = 0;
  for (size_t i = 0; i < cprof__sym_nmappings(); i++) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at(i);
    if (lib ? strcmp(m->path, lib) != 0
            : !m->is_main && !strstr(m->path, "/libc.so"))
      continue;
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
  cprof__sym_save(); /* as a profile's end does */
  unsigned long long ranged = (unsigned long long)cprof__sym_range_hits();
  cprof__sym_unlock();
  fprintf(stderr, "%zu addresses, %llu named by a cached range\n", n,
          ranged);
  if (handle) dlclose(handle);
  return n == 0;
}
