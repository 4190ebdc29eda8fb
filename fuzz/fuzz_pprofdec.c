/*
 * libFuzzer target for tools/pprofdec.c, the pprof reader behind
 * `cprof top`: any bytes, gzipped or not, must decode to a profile or to
 * an error message, and a decoded profile's top table, default sample type
 * and number formatting must work for every sample type. It must never
 * write files or keep state between inputs.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pprofdec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pprofdec_profile p;
  char err[256];
  if (pprofdec_decode(data, size, &p, err, sizeof err) != 0) {
    if (!memchr(err, 0, sizeof err) || !err[0]) __builtin_trap();
    return 0;
  }
  (void)pprofdec_default_index(&p);
  (void)pprofdec_find_index(&p, "1");
  for (size_t vi = 0; vi < p.nsample_types && vi < 4; vi++) {
    pprofdec_top t;
    if (pprofdec_compute_top(&p, vi, &t, err, sizeof err) != 0) continue;
    char unit[16], buf[64];
    const char *u = p.sample_types[vi].unit;
    pprofdec_select_unit(unit, sizeof unit, &t, t.nrows, u);
    pprofdec_format(buf, sizeof buf, t.total, u, unit);
    for (size_t i = 0; i < t.nrows && i < 16; i++) {
      pprofdec_format(buf, sizeof buf, t.rows[i].flat, u, "auto");
      pprofdec_format(buf, sizeof buf, t.rows[i].cum, u, unit);
    }
    pprofdec_top_free(&t);
  }
  pprofdec_free(&p);
  return 0;
}
