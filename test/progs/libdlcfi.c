/*
 * A plugin built as distributions build code (-O2, no frame pointers; see
 * test/CMakeLists.txt), loaded and unloaded in a loop by dlcycle while it is
 * profiled: its frames can only be walked by its CFI rows, which must come
 * and go with it.
 */
#include <stdint.h>
#include <stdlib.h>

static volatile uint64_t dlcfi_sink;

__attribute__((noinline)) static uint64_t dlcfi_inner(uint64_t n) {
  uint64_t x = n;
  for (uint64_t i = 0; i < n; i++) x = x * 2862933555777941757ull + 3;
  char *p = malloc(64 + (n & 255));
  if (p) {
    p[0] = (char)x;
    x += (unsigned char)p[0];
    free(p);
  }
  return x;
}

__attribute__((noinline)) static uint64_t dlcfi_middle(uint64_t n) {
  uint64_t r = dlcfi_inner(n) + dlcfi_inner(n / 2);
  dlcfi_sink += r;
  return r;
}

__attribute__((visibility("default"), noinline)) uint64_t dlcfi_work(
    uint64_t n) {
  uint64_t r = 0;
  for (int i = 0; i < 4; i++) r += dlcfi_middle(n + (uint64_t)i);
  dlcfi_sink += r;
  return r;
}
