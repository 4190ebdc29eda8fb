/*
 * The unwind tables' cost: for each loaded object (this program, libc,
 * libstdc++ and libz loaded with dlopen, the vdso...), the bytes of
 * .eh_frame parsed, the rows and bytes of its table, and the time to build
 * it; then the totals, the build rate in MB of .eh_frame per second, and
 * the cost of a refresh when nothing changed (the common case, paid before
 * every profile is written).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/cfi_index.h"

static int print_object(const cprof__cfi_object_info *o, void *ctx) {
  (void)ctx;
  const char *name = o->name[0] ? strrchr(o->name, '/') : NULL;
  name = name ? name + 1 : (o->name[0] ? o->name : "(main program)");
  if (o->status != 0) {
    printf("  %-28s no table (%d)\n", name, o->status);
    return 0;
  }
  printf("  %-28s eh_frame %8zu B  rows %7zu  table %8zu B  (%.2f B/B)  "
         "%6.2f ms\n",
         name, o->eh_frame_bytes, o->rows, o->table_bytes,
         o->eh_frame_bytes ? (double)o->table_bytes / (double)o->eh_frame_bytes
                           : 0.0,
         (double)o->build_ns / 1e6);
  return 0;
}

int main(void) {
  /* What building costs: the cache of built tables (docs/unwinding.md)
   * would otherwise read them. */
  setenv("CPROF_DEBUG_CACHE", "off", 1);
  void *cxx = dlopen("libstdc++.so.6", RTLD_NOW);
  void *z = dlopen("libz.so.1", RTLD_NOW);
  int64_t t0 = cprof__mono_ns();
  if (cprof__cfi_refresh() != 0) return 1;
  int64_t first = cprof__mono_ns() - t0;
  cprof__cfi_objects(print_object, NULL);
  cprof__cfi_stats_t st;
  cprof__cfi_stats(&st);
  printf("total: %zu objects, %zu rows, %zu B of tables + %zu B of index, "
         "from %zu B of .eh_frame; built in %.2f ms (%.0f MB/s of "
         ".eh_frame)\n",
         st.objects, st.rows, st.table_bytes, st.index_bytes,
         st.eh_frame_bytes, (double)first / 1e6,
         (double)st.eh_frame_bytes / ((double)first / 1e3));
  enum { N = 10000 };
  t0 = cprof__mono_ns();
  for (int i = 0; i < N; i++) cprof__cfi_refresh();
  printf("refresh with nothing changed: %.0f ns\n",
         (double)(cprof__mono_ns() - t0) / N);
  if (cxx) dlclose(cxx);
  if (z) dlclose(z);
  return 0;
}
