/*
 * Symbolizer benchmark: 10,000 distinct addresses, every 16 bytes through
 * the executable mapping of this binary and then of libc, looked up once
 * cold (right after the session is built, so libdw loads symbol tables,
 * line tables and DWARF on demand) and once warm (from the per-address
 * cache). Times come from CLOCK_MONOTONIC.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode/symbolize.h"

#define NADDRS 10000

static uintptr_t addrs[NADDRS];

static size_t collect(const cprof__sym_mapping *m, size_t n) {
  for (uint64_t a = m->start; a < m->limit && n < NADDRS; a += 16)
    addrs[n++] = (uintptr_t)a;
  return n;
}

static void report(const char *what, size_t n, int64_t ns) {
  double ms = (double)ns / 1e6;
  double per = (double)ns / (double)n;
  if (per >= 1000)
    printf("symbolize %s: %zu addresses in %.1f ms (%.1f us/addr)\n", what, n,
           ms, per / 1000);
  else
    printf("symbolize %s: %zu addresses in %.1f ms (%.0f ns/addr)\n", what, n,
           ms, per);
}

int main(void) {
  cprof__sym_lock();
  int64_t t0 = cprof__mono_ns();
  int err = cprof__sym_refresh();
  int64_t t1 = cprof__mono_ns();
  if (err) {
    fprintf(stderr, "cprof__sym_refresh: %d\n", err);
    return 1;
  }
  printf("symbolize refresh: %zu mappings in %.1f ms\n", cprof__sym_nmappings(),
         (double)(t1 - t0) / 1e6);

  size_t n = collect(cprof__sym_mapping_at(0), 0);
  size_t own = n;
  for (size_t i = 1; i < cprof__sym_nmappings() && n < NADDRS; i++) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at(i);
    if (strstr(m->path, "/libc.so")) n = collect(m, n);
  }
  printf("symbolize addresses: %zu in the benchmark, %zu in libc\n", own,
         n - own);

  size_t named = 0, lined = 0;
  t0 = cprof__mono_ns();
  for (size_t i = 0; i < n; i++) {
    const cprof__sym_result *r = cprof__sym_lookup(addrs[i]);
    named += r && r->nframes > 0;
    lined += r && r->has_line;
  }
  t1 = cprof__mono_ns();
  report("cold", n, t1 - t0);
  printf("symbolize resolved: %zu with a function, %zu with a line\n", named,
         lined);

  t0 = cprof__mono_ns();
  for (size_t i = 0; i < n; i++) named -= cprof__sym_lookup(addrs[i])->nframes > 0;
  t1 = cprof__mono_ns();
  report("warm", n, t1 - t0);

  t0 = cprof__mono_ns();
  err = cprof__sym_refresh();
  t1 = cprof__mono_ns();
  printf("symbolize refresh (unchanged): %.3f ms\n", (double)(t1 - t0) / 1e6);
  cprof__sym_unlock();
  return err || named != 0;
}
