/*
 * A library whose unwind data (.eh_frame_hdr, .eh_frame) is the last
 * thing in its file (test/progs/imgtail.ld), so e2e/images_truncated.sh
 * can truncate a copy there and still dlopen it: the loader reads none of
 * those pages, while any plain read of them raises SIGBUS.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

static _Atomic uint64_t sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Burns the calling thread's CPU for about `seconds`. */
__attribute__((noinline)) void imgtail_burn(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end) {
    uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ull + (uint64_t)i;
    atomic_store_explicit(&sink, x, memory_order_relaxed);
  }
}
