/*
 * Fuzzes the PEM block scanner behind `cprof extract` with arbitrary logs:
 * it must never read out of bounds, and every block it reports must be
 * well formed.
 */
#include <stdint.h>
#include <stdlib.h>

#include "pem.h"

static void on_block(const pem_block *b, void *ctx) {
  (void)ctx;
  if (b->len == 0 || !b->data || b->line == 0) abort();
}

static void on_error(size_t line, const char *label, const char *why,
                     void *ctx) {
  (void)ctx;
  if (line == 0 || !label || !why) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pem_callbacks cb = {on_block, on_error, NULL};
  pem_scan((const char *)data, size, &cb);
  return 0;
}
