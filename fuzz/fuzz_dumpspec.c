/*
 * Fuzzes the dump specification parser (CPROF_DUMP): any string must be
 * either accepted with sane items or rejected with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sink/dumpspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  cprof__dump_spec spec;
  char err[160];
  err[0] = '\0';
  if (cprof__dump_parse(s, &spec, err, sizeof err) == 0) {
    if (spec.n == 0 || spec.n > CPROF__DUMP_MAX_ITEMS) abort();
    for (size_t i = 0; i < spec.n; i++)
      if (!spec.items[i].name || spec.items[i].debug < 0 ||
          spec.items[i].debug > 2)
        abort();
  } else if (err[0] == '\0') {
    abort();
  }
  free(s);
  return 0;
}
