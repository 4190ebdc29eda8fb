/*
 * Fuzzes the integer parser behind every numeric CPROF_* variable: a value
 * is accepted only inside its range, and a rejection always explains
 * itself; and the spelling check every CPROF_* name in the environment
 * goes through: any bytes, any length, a known setting or none.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  static const long long ranges[][2] = {
      {0, 1LL << 40}, {1, 10000}, {-5, 5}, {LLONG_MIN, LLONG_MAX}};
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
    long long v = 0;
    char err[96] = "";
    if (cprof__parse_int(s, ranges[i][0], ranges[i][1], &v, err, sizeof err) ==
        0) {
      if (v < ranges[i][0] || v > ranges[i][1]) abort();
      if (strtoll(s, NULL, 10) != v) abort();
    } else if (err[0] == '\0') {
      abort();
    }
  }
  const char *near = cprof__setting_closest((const char *)data, size);
  if (near && !cprof__setting_known(near)) abort();
  free(s);
  return 0;
}
