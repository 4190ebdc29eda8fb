/*
 * Fuzzes the dump specification parser (CPROF_DUMP): any string must be
 * either accepted with sane items or rejected with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sink/dumpspec.h"

/* The registry's profiles as the dump sink gives them to the parser (the
 * registry itself would pull the interposers into the fuzzer). */
static void heap_rate(void) {}
static const cprof__dump_profile known[] = {
    {"allocs", "allocs", 2, "rate", 0, 1LL << 40, heap_rate},
    {"block", "block", 2, "rate", 0, 1LL << 50, NULL},
    {"cpu", "cpu", 0, "hz", 1, 10000, NULL},
    {"goroutine", "goroutine", 2, NULL, 0, 0, NULL},
    {"threads", "goroutine", 2, NULL, 0, 0, NULL},
    {"heap", "heap", 2, "rate", 0, 1LL << 40, heap_rate},
    {"mutex", "mutex", 2, "rate", 0, 1000000000LL, NULL},
    {"threadcreate", "threadcreate", 2, NULL, 0, 0, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  cprof__dump_spec spec;
  char err[160];
  err[0] = '\0';
  if (cprof__dump_parse_with(known, sizeof known / sizeof known[0], s, &spec,
                             err, sizeof err) == 0) {
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
