/*
 * libFuzzer target for the /proc/PID/maps parser: the whole input as maps
 * text, and as a single line, from a heap copy of exactly its size so ASan
 * sees any read past the end. It checks the parser's promises: success
 * leaves start <= end and a path that lies inside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode/maps.h"

typedef struct span {
  const char *begin, *end;
} span;

static int check_entry(const cprof__map_entry *e, void *ctx) {
  const span *s = ctx;
  if (e->start > e->end) abort();
  if (e->path < s->begin || e->path > s->end ||
      e->path_len > (size_t)(s->end - e->path))
    abort();
  /* Touch every byte of the path. */
  volatile unsigned sum = 0;
  for (size_t i = 0; i < e->path_len; i++) sum += (unsigned char)e->path[i];
  (void)sum;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  span s = {text, text + size};

  int rc = cprof__maps_parse(text, size, check_entry, &s);
  if (rc != 0 && rc != CPROF_EINVAL) abort();

  cprof__map_entry e;
  rc = cprof__maps_parse_line(text, size, &e);
  if (rc == 0) {
    check_entry(&e, &s);
    if (memchr(text, '\n', size) && !e.path_len) abort();
  } else if (rc != CPROF_EINVAL) {
    abort();
  }
  free(text);
  return 0;
}
