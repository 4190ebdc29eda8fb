/*
 * libFuzzer target for the compile-unit tables of the debug cache
 * (encode/cutab.c): a table is a file in the user's cache directory, which
 * anything with the user's rights may have written. An input is parsed;
 * when it parses, its runs are in order and every address around each run
 * start and the last range's end is found as a plain search over the runs
 * finds it (the rule libdwfl follows), and the table written again from
 * its runs is the same bytes. ASan checks that nothing is read outside the
 * input. The corpus holds a table this machine's cache held (a small
 * shared library's).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode/cutab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t reference(const cprof__cutab_run *runs, size_t n,
                         uint64_t end, uint64_t addr) {
  size_t i = n;
  for (size_t k = 0; k < n; k++)
    if (runs[k].start <= addr) i = k;
  if (i == n) return -1;
  if (i == n - 1 && addr > runs[i].start && addr > end) return -1;
  return (int64_t)runs[i].cu_off;
}

static void check(const cprof__cutab *t, const cprof__cutab_run *runs,
                  uint64_t addr) {
  uint64_t off;
  int64_t got = cprof__cutab_find(t, addr, &off) ? (int64_t)off : -1;
  if (got != reference(runs, t->nruns, t->last_end, addr)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A heap copy of exactly its size, so that ASan sees a read past it. */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  cprof__cutab t;
  if (!cprof__cutab_parse(copy, size, &t)) {
    free(copy);
    return 0;
  }
  size_t n = t.nruns;
  cprof__cutab_run *runs = malloc((n ? n : 1) * sizeof *runs);
  if (!runs) abort();
  memcpy(runs, t.runs, n * sizeof *runs);
  for (size_t i = 1; i < n; i++)
    if (runs[i].start <= runs[i - 1].start) abort();
  /* A few hundred runs are checked around each edge: the reference is
   * linear. */
  for (size_t i = 0; i < n && i < 512; i++) {
    check(&t, runs, runs[i].start);
    check(&t, runs, runs[i].start + 1);
    if (runs[i].start) check(&t, runs, runs[i].start - 1);
  }
  check(&t, runs, t.last_end);
  check(&t, runs, t.last_end + 1);
  check(&t, runs, 0);
  check(&t, runs, UINT64_MAX);
  cprof_buf again = {0};
  if (cprof__cutab_write(runs, n, t.last_end, t.stamp, t.stamp_len,
                         &again) != 0 ||
      again.len != size || memcmp(again.data, copy, size) != 0)
    abort();
  cprof_buf_free(&again);
  free(runs);
  free(copy);
  return 0;
}
