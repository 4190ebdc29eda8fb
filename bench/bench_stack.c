/*
 * The cost of what a sample does in its signal handler: walking a ~40-frame
 * stack, walking and interning it (the table already holds it, the common
 * case), and adding to an aggregation table; then a walk through 30
 * frames built without frame pointers, by CFI rows (the default) and by
 * frame pointers alone (CPROF_UNWIND=fp), which cannot get through them,
 * and by CFI again with the caches swept between walks.
 * Printed in nanoseconds per operation, next to an empty loop as the
 * baseline.
 */
#include <stdio.h>
#include <stdlib.h>

#include "capture/agg.h"
#include "capture/sample.h"
#include "capture/stack.h"
#include "capture/stacktab.h"

#define DEPTH 40
#define ITERS 1000000

static volatile uintptr_t sink_;

typedef enum { JOB_WALK, JOB_INTERN } job;

static double per_op(int64_t start, long n) {
  return (double)(cprof__mono_ns() - start) / (double)n;
}

/* At the bottom of the recursion; the walk sees DEPTH frames of recurse
 * plus this one, main and what lies below. */
__attribute__((noinline)) static void bottom(job j) {
  uintptr_t pcs[CPROF__STACK_BUF];
  size_t n = cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
  int64_t t0 = cprof__mono_ns();
  for (long i = 0; i < ITERS; i++) sink_ += i;
  double base = per_op(t0, ITERS);

  t0 = cprof__mono_ns();
  if (j == JOB_WALK) {
    for (long i = 0; i < ITERS; i++)
      sink_ += cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
    printf("walk %zu frames: %.1f ns (empty loop %.1f ns)\n", n,
           per_op(t0, ITERS), base);
  } else {
    cprof__stacktab_intern(pcs, n);
    for (long i = 0; i < ITERS; i++) {
      size_t m = cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
      sink_ += cprof__stacktab_intern(pcs, m);
    }
    printf("walk + intern %zu frames (hit): %.1f ns\n", n, per_op(t0, ITERS));
    /* The same through the one sample entry point every source calls
     * (the thread's labels looked for too). */
    const cprof__sample_at here = {.from = CPROF__SAMPLE_HERE};
    t0 = cprof__mono_ns();
    for (long i = 0; i < ITERS; i++)
      sink_ += cprof__sample_stack(&here, CPROF__SAMPLE_LABELS);
    printf("sample entry point, %zu frames (hit): %.1f ns\n", n,
           per_op(t0, ITERS));
    t0 = cprof__mono_ns();
    for (long i = 0; i < ITERS; i++) sink_ += cprof__stacktab_intern(pcs, n);
    printf("intern %zu frames (hit): %.1f ns\n", n, per_op(t0, ITERS));
  }
}

__attribute__((noinline)) static void recurse(int depth, job j) {
  if (depth <= 1)
    bottom(j);
  else
    recurse(depth - 1, j);
  sink_++;
}

static void bench_agg(void) {
  cprof__agg *a = cprof__agg_new(2, 4096);
  int64_t v[2] = {1, 1000};
  for (uint32_t k = 0; k < 1000; k++) cprof__agg_add(a, 2 + k, 0, v);
  int64_t t0 = cprof__mono_ns();
  for (long i = 0; i < ITERS; i++)
    cprof__agg_add(a, 2 + (uint32_t)(i % 1000), 0, v);
  printf("agg add (existing key, 2 values): %.1f ns\n", per_op(t0, ITERS));
  cprof__agg_free(a);
}

uintptr_t nofp_recurse(int depth, uintptr_t (*bottom)(void));

/* A sample in a program that works between samples finds the walker's
 * memory cold: the same walk with 64 MiB written between walks, with each
 * thread's last walk remembered (the default) and with the rule cache
 * alone, alternating. Only the walks are timed. */
#define SWEEP_BYTES ((size_t)64 << 20)
#define SWEPT_WALKS 100
#define SWEPT_ROUNDS 5

static void swept_walks(uintptr_t *pcs) {
  char *buf = malloc(SWEEP_BYTES);
  if (!buf) return;
  int64_t ns[2] = {0, 0};
  size_t n = 0;
  for (int r = 0; r < SWEPT_ROUNDS; r++)
    for (int k = 0; k < 2; k++) {
      int on = (r + k) % 2;
      cprof__stack_memo_set_for_tests(on);
      n = cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
      for (int i = 0; i < SWEPT_WALKS; i++) {
        for (size_t b = 0; b < SWEEP_BYTES; b += 64) buf[b] = (char)(b + i);
        int64_t t0 = cprof__mono_ns();
        n = cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
        ns[on] += cprof__mono_ns() - t0;
      }
    }
  cprof__stack_memo_set_for_tests(true);
  free(buf);
  double walks = SWEPT_WALKS * SWEPT_ROUNDS;
  printf("walk through 30 frames without frame pointers, caches swept "
         "between walks (%zu frames): last walk remembered %.1f ns, rule "
         "cache alone %.1f ns, ratio %.2f\n",
         n, (double)ns[1] / walks, (double)ns[0] / walks,
         ns[0] ? (double)ns[1] / (double)ns[0] : 0.0);
}

/* Below 30 frames without frame pointers: times the walk in each mode. */
static uintptr_t nofp_bottom(void) {
  static const struct {
    int mode;
    const char *name;
  } modes[] = {{CPROF__UNWIND_AUTO, "cfi (auto)"}, {CPROF__UNWIND_FP, "fp"}};
  uintptr_t pcs[CPROF__STACK_BUF];
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    cprof__stack_set_mode(modes[m].mode);
    size_t n = cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
    int64_t t0 = cprof__mono_ns();
    for (long i = 0; i < ITERS; i++)
      sink_ += cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
    printf("walk through 30 frames without frame pointers, %s: %zu frames, "
           "%.1f ns\n",
           modes[m].name, n, per_op(t0, ITERS));
  }
  cprof__stack_set_mode(CPROF__UNWIND_AUTO);
  swept_walks(pcs);
  return 0;
}

int main(void) {
  cprof__stack_register_thread();
  if (cprof__stacktab_init() != 0) return 1;
  cprof__stack_refresh();
  sink_ += nofp_recurse(30, nofp_bottom);
  recurse(DEPTH - 2, JOB_WALK);
  recurse(DEPTH - 2, JOB_INTERN);
  bench_agg();
  /* Without cached bounds every new page costs a probe. */
  cprof__stack_unregister_thread();
  uintptr_t pcs[CPROF__STACK_BUF];
  int64_t t0 = cprof__mono_ns();
  for (long i = 0; i < ITERS / 10; i++)
    sink_ += cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
  printf("walk, no cached bounds (shallow): %.1f ns\n", per_op(t0, ITERS / 10));
  return 0;
}
