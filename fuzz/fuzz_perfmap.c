/*
 * libFuzzer target for the /tmp/perf-PID.map reader: the input, from a
 * heap copy of exactly its size, fed as appended text in two parts, then
 * looked up at addresses the input names and around them. It checks the
 * reader's promises: it consumes whole lines only, every name it returns
 * is a string of at most CPROF__PERFMAP_NAME_MAX bytes without control
 * bytes, and the entry it returns covers the address.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void look(uintptr_t pc) {
  uintptr_t start = 0;
  const char *name = cprof__perfmap_lookup(pc, &start);
  if (!name) return;
  size_t n = strlen(name);
  if (n == 0 || n > CPROF__PERFMAP_NAME_MAX || start > pc) abort();
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  cprof__perfmap_reset();
  size_t half = size / 2, done = 0;
  size_t used = cprof__perfmap_feed(text, half);
  if (used == (size_t)-1) goto out;
  if (used > half || (used && text[used - 1] != '\n')) abort();
  done = used;
  used = cprof__perfmap_feed(text + done, size - done);
  if (used == (size_t)-1) goto out;
  if (used > size - done || (used && text[done + used - 1] != '\n')) abort();
  /* Addresses from the input's first hex words, and their neighbours. */
  for (size_t i = 0; i + 1 < size && i < 4096; i++) {
    if (i > 0 && text[i - 1] != '\n') continue;
    uintptr_t v = 0;
    for (size_t j = i; j < size && j < i + 16; j++) {
      char c = text[j];
      int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : -1;
      if (d < 0) break;
      v = v << 4 | (uintptr_t)d;
    }
    look(v);
    look(v + 1);
    look(v - 1);
    look(v + 0x100);
  }
out:
  cprof__perfmap_reset();
  free(text);
  return 0;
}
