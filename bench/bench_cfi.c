/*
 * The unwind tables' cost: for each loaded object (this program, libc,
 * libstdc++ and libz loaded with dlopen, the vdso...), the bytes of
 * .eh_frame parsed, the rows and bytes of its table, and the time to build
 * it; then the totals, the build rate in MB of .eh_frame per second, and
 * the cost of a refresh when nothing changed (the common case, paid before
 * every profile is written); last, a lookup in the largest table through
 * its page index against the same table's rows bisected whole, in the
 * same run, the caches swept between walks of 40 lookups as a program
 * sweeps them between samples.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/cfi_build.h"
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

/* The largest table, copied (its arrays stay where they are). */
static int largest_cb(const cprof__cfi_object_info *o, void *ctx) {
  cprof__cfi_table *best = ctx;
  if (o->table && o->table->nrows > best->nrows) *best = *o->table;
  return 0;
}

/* ns a lookup in t of random offsets in its range, the caches swept
 * (sweep, len bytes) after every 40. */
static double lookup_ns(const cprof__cfi_table *t, unsigned char *sweep,
                        size_t len, unsigned *found) {
  uint64_t x = 88172645463325252ull;
  uint32_t lo = t->pc[0], span = t->pc[t->nrows - 1] - lo;
  int64_t spent = 0;
  *found = 0;
  for (int walk = 0; walk < 400; walk++) {
    for (size_t i = 0; i < len; i += 64) sweep[i]++;
    int64_t t0 = cprof__mono_ns();
    for (int k = 0; k < 40; k++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      cprof__cfi_rule r;
      *found += cprof__cfi_table_find(t, lo + (uint32_t)(x % span), &r);
    }
    spent += cprof__mono_ns() - t0;
  }
  return (double)spent / (400 * 40);
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
  cprof__cfi_table big = {0};
  cprof__cfi_objects(largest_cb, &big);
  size_t len = (size_t)32 << 20;
  unsigned char *sweep = calloc(len, 1);
  if (big.nrows > 1 && sweep) {
    cprof__cfi_table flat = big;
    flat.page = NULL;
    flat.npages = 0;
    unsigned f1 = 0, f2 = 0;
    double a = 0, b = 0;
    for (int round = 0; round < 3; round++) { /* alternating */
      a += lookup_ns(&big, sweep, len, &f1);
      b += lookup_ns(&flat, sweep, len, &f2);
    }
    printf("lookup in the largest table (%u rows, %u pages), caches swept "
           "between walks of 40: %.0f ns with the page index, %.0f ns "
           "bisecting every row (%.2fx)%s\n",
           big.nrows, big.npages, a / 3, b / 3, b / a,
           f1 == f2 ? "" : " (DIFFERENT ANSWERS)");
  }
  free(sweep);
  if (cxx) dlclose(cxx);
  if (z) dlclose(z);
  return 0;
}
