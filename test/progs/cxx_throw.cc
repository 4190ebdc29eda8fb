// C++ exceptions thrown and caught through several frames while the CPU
// profiler samples at 1000 Hz: the unwinder and the sampler must not
// disturb each other. Exits 0 when every exception arrived intact.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cprof.h"

static thread_local volatile unsigned long sink;  // per thread: no race

__attribute__((noinline)) static void level3(int i) {
  for (int k = 0; k < 200; k++) sink = sink * 31 + static_cast<unsigned>(k);
  if (i % 2 == 0) throw std::runtime_error("even " + std::to_string(i));
}

__attribute__((noinline)) static void level2(int i) { level3(i); }
__attribute__((noinline)) static void level1(int i) { level2(i); }

int main() {
  if (cprof_cpu_start(1000) != 0) return 1;
  int caught = 0, wrong = 0;
  for (int i = 0; i < 200000; i++) {
    try {
      level1(i);
    } catch (const std::runtime_error &e) {
      caught++;
      if (e.what() != "even " + std::to_string(i)) wrong++;
    }
  }
  cprof_buf b = {};
  cprof_sink s = cprof_sink_buf(&b);
  int err = cprof_cpu_stop(&s);
  cprof_buf_free(&b);
  std::printf("cxx_throw: %d exceptions caught, %d wrong, profile %s\n",
              caught, wrong, cprof_strerror(err));
  return caught == 100000 && wrong == 0 && err == 0 ? 0 : 1;
}
