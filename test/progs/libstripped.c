/* A library whose hot code is in functions no dynamic symbol names: a
 * hidden one and a static one, reached from the one exported function;
 * the exported one and the hidden one also allocate. The stripped-library
 * test (test/e2e/symbolize_stripped.sh) strips a copy (strip --strip-all),
 * so that only .dynsym and .eh_frame are left, and checks that the two are
 * named by object and offset, each on its own. */
#include <stdint.h>
#include <stdlib.h>

static volatile uint64_t stripped_sink;

__attribute__((visibility("hidden"), noinline)) uint64_t stripped_hidden(
    uint64_t x, long n) {
  volatile uint64_t *cell = malloc(sizeof *cell);
  if (!cell) return x;
  for (long i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  *cell = x;
  x = *cell;
  free((void *)cell);
  return x;
}

__attribute__((noinline)) static uint64_t stripped_static(uint64_t x, long n) {
  for (long i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

/* Runs both for n rounds each; the result keeps the calls from being tail
 * calls. */
__attribute__((visibility("default"), noinline)) uint64_t stripped_work(
    long n) {
  char *scratch = malloc(256);
  uint64_t a = stripped_hidden(stripped_sink + 1, n);
  uint64_t b = stripped_static(a | 1, n);
  if (scratch) scratch[0] = (char)b;
  stripped_sink = a ^ b ^ (uint64_t)(scratch ? scratch[0] : 0);
  free(scratch);
  return stripped_sink + 1;
}
