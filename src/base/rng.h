/*
 * The one pseudo-random generator and the one word hash, for every module
 * that samples (heap countdowns, block weighing, timer phases) or hashes a
 * pointer into a table. Header-only and inlined, uninstrumented, with no
 * state of their own: callers keep theirs (a thread-local word), so these
 * run in any context, signal handlers and the allocator's first calls
 * included. Not for anything that needs unpredictability.
 */
#ifndef CPROF_RNG_H
#define CPROF_RNG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/internal.h"
#include "base/sys.h"

#define CPROF__RNG_ATTR                                        \
  __attribute__((always_inline, unused,                        \
                 no_sanitize("address", "thread", "undefined")))

#define CPROF__GOLDEN 0x9e3779b97f4a7c15ull

/* splitmix64's finaliser: a well-mixed 64-bit value from any input. */
CPROF__RNG_ATTR static inline uint64_t cprof__mix64(uint64_t x) {
  x += CPROF__GOLDEN;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The top bits of a multiplicative hash of a word, as a table index of
 * 1 << bits slots (bits 1..63). */
CPROF__RNG_ATTR static inline size_t cprof__hash_word(uint64_t x,
                                                      unsigned bits) {
  return (size_t)((x * CPROF__GOLDEN) >> (64 - bits));
}

/* A fresh nonzero seed: the clock, a process-wide counter and salt (an
 * address, a tid) mixed. */
CPROF__RNG_ATTR static inline uint64_t cprof__rng_seed(uint64_t salt) {
  static _Atomic uint64_t counter;
  uint64_t n = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
  /* The system call itself, not a library's wrapper: this runs on a
   * thread's first allocation, which can come before a sanitizer runtime
   * has set up the thread's stack (a fork child's new thread on a stack
   * the parent's threads left marked), where a checked wrapper would
   * report the stack buffer as overflowed. Once per thread. */
  struct timespec ts = {0, 0};
  cprof__sys4(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0L, 0L);
  uint64_t s = cprof__mix64(
      ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
      cprof__mix64(n) ^ salt);
  return s ? s : 1;
}

/* xorshift64*: the next value of the generator whose state is *s
 * (nonzero). A few instructions, plenty for drawing sample intervals. */
CPROF__RNG_ATTR static inline uint64_t cprof__rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dull;
}

#endif
