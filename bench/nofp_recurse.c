/*
 * Frames without frame pointers, for bench_stack: built with
 * -fomit-frame-pointer (bench/CMakeLists.txt), as distributions build
 * their code, so only CFI rows can step through them.
 */
#include <stdint.h>

uintptr_t nofp_recurse(int depth, uintptr_t (*bottom)(void));

static volatile uintptr_t nofp_sink;

__attribute__((noinline)) uintptr_t nofp_recurse(int depth,
                                                 uintptr_t (*bottom)(void)) {
  volatile uintptr_t local[4] = {(uintptr_t)depth, 1, 2, 3};
  uintptr_t r = depth <= 1 ? bottom() : nofp_recurse(depth - 1, bottom);
  nofp_sink += local[0];
  return r + local[1];
}
