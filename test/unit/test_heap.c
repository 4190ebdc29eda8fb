/*
 * The heap sampler: the sampling maths on their own (intervals average the
 * rate, the first draw is a real draw, unsampling is unbiased, ln/exp and
 * the size classes), then the interposed allocator with every allocation
 * sampled (records appear at the allocating site, frees and reallocs
 * subtract, the profiler's own allocations are not sampled, concurrent
 * threads balance out).
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profile/heap.h"
#include "source/heap_live.h"
#include "source/heap_sampler.h"
#include "base/mem.h"
#include "base/own_heap.h"
#include "capture/stacktab.h"
#include "encode/symbolize.h"
#include "testutil.h"

/* One allocation through a sampler: the common path, then the slow one. */
static bool tick(cprof__heap_sampler *s, uint64_t rate, size_t n) {
  if (n < s->countdown) {
    s->countdown -= n;
    return false;
  }
  return cprof__heap_sampler_expired(s, rate, n);
}

static void test_ln_exp(void) {
  static const double xs[] = {1e-300, 1e-9, 0.001, 0.5, 0.70710678, 1,
                              1.4142135, 2, 10, 123456.789, 1e300};
  static const double lns[] = {-690.7755278982137, -20.72326583694641,
                               -6.907755278982137, -0.6931471805599453,
                               -0.3465735919580042, 0, 0.3465735461755332,
                               0.6931471805599453, 2.302585092994046,
                               11.723646487185881, 690.7755278982137};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(xs); i++) {
    double got = cprof__heap_ln(xs[i]), want = lns[i];
    double err = got - want;
    if (err < 0) err = -err;
    CHECK(err <= 1e-12 * (want < 0 ? -want : want) + 1e-15);
    double back = cprof__heap_exp(got);
    double rel = (back - xs[i]) / xs[i];
    if (rel < 0) rel = -rel;
    CHECK(rel < 1e-11);
  }
  CHECK(cprof__heap_exp(0) == 1);
  CHECK(cprof__heap_exp(-800) == 0);
}

static void test_intervals(void) {
  /* Exponential with mean rate: mean and standard deviation both ~rate. */
  const uint64_t rate = 524288;
  const int n = 1000000;
  uint64_t rng = 12345;
  double sum = 0, sum2 = 0;
  uint64_t min = UINT64_MAX;
  for (int i = 0; i < n; i++) {
    uint64_t x = cprof__heap_draw_interval(&rng, rate);
    sum += (double)x;
    sum2 += (double)x * (double)x;
    if (x < min) min = x;
  }
  double mean = sum / n, sd = 0;
  double var = sum2 / n - mean * mean;
  for (sd = mean; sd * sd > var * 1.0000001 || sd * sd < var * 0.9999999;)
    sd = (sd + var / sd) / 2;
  fprintf(stderr, "  intervals: mean %.0f (rate %llu), sd %.0f, min %llu\n",
          mean, (unsigned long long)rate, sd, (unsigned long long)min);
  /* The standard error of the mean is rate / 1000: allow 5 of them. */
  CHECK(mean > rate * 0.995 && mean < rate * 1.005);
  CHECK(sd > rate * 0.99 && sd < rate * 1.01);
  CHECK(min >= 1);
}

static void test_first_draw(void) {
  /* A fresh sampler draws before deciding: a thread's first small
   * allocation is almost never sampled (p = 64 / 524288 each). */
  int sampled = 0;
  for (int i = 0; i < 1000; i++) {
    cprof__heap_sampler s = {0, 0};
    sampled += tick(&s, 524288, 64);
    CHECK(s.rng != 0);
    CHECK(s.countdown > 0);
  }
  CHECK(sampled < 5);
  /* rate 1 samples everything, zero-size included; rate 0 nothing. */
  cprof__heap_sampler s = {0, 0};
  int all = 0, none = 0;
  for (int i = 0; i < 1000; i++) all += tick(&s, 1, (size_t)i % 3);
  cprof__heap_sampler t = {0, 0};
  for (int i = 0; i < 100000; i++) none += tick(&t, 0, 1000);
  CHECK_EQ_INT(all, 1000);
  CHECK_EQ_INT(none, 0);
}

/* Allocates total bytes in objects of size through a sampler many times
 * over and checks the unsampled estimate: its mean against the truth, its
 * spread against the binomial expectation. */
static void check_unbiased(size_t size, size_t total, int trials) {
  const uint64_t rate = 524288;
  uint64_t nobj = total / size;
  double sum = 0, sum2 = 0;
  cprof__heap_sampler s = {0, 0};
  for (int t = 0; t < trials; t++) {
    int64_t count = 0, bytes = 0, c, b;
    for (uint64_t i = 0; i < nobj; i++)
      if (tick(&s, rate, size)) {
        count++;
        bytes += (int64_t)size;
      }
    cprof__heap_unsample(count, bytes, (int64_t)rate, &c, &b);
    sum += (double)b;
    sum2 += (double)b * (double)b;
  }
  double truth = (double)(nobj * size), mean = sum / trials;
  double p = 1 - cprof__heap_exp(-(double)size / (double)rate);
  double sd_one = (double)size * cprof__heap_exp(
                                      0.5 * cprof__heap_ln((double)nobj * (1 - p) / p));
  double se = sd_one / cprof__heap_exp(0.5 * cprof__heap_ln(trials));
  double var = sum2 / trials - mean * mean;
  double sd = var > 0 ? cprof__heap_exp(0.5 * cprof__heap_ln(var)) : 0;
  fprintf(stderr,
          "  size %zu: mean %.4g vs truth %.4g (%+.2f%%, %.1f standard "
          "errors); sd %.3g vs expected %.3g\n",
          size, mean, truth, (mean / truth - 1) * 100,
          (mean - truth) / se, sd, sd_one);
  CHECK(mean > truth - 5 * se && mean < truth + 5 * se);
  CHECK(sd > sd_one * 0.8 && sd < sd_one * 1.2);
}

static void test_unbiased(void) {
  check_unbiased(100, (size_t)20 << 20, 400);
  check_unbiased(4096, (size_t)80 << 20, 200);
  check_unbiased((size_t)1 << 20, (size_t)1 << 30, 400);
}

static void test_unsample(void) {
  int64_t c, b;
  cprof__heap_unsample(3, 300, 1, &c, &b);
  CHECK_EQ_INT(c, 3);
  CHECK_EQ_INT(b, 300);
  cprof__heap_unsample(0, 300, 524288, &c, &b);
  CHECK_EQ_INT(c, 0);
  CHECK_EQ_INT(b, 0);
  /* One sample of 512 KiB at 512 KiB: scale 1 / (1 - 1/e). */
  cprof__heap_unsample(1, 524288, 524288, &c, &b);
  CHECK_EQ_INT(c, 1);
  CHECK(b > 829410 && b < 829413);
  /* A delta: negative pairs scale the same way. */
  int64_t nc, nb;
  cprof__heap_unsample(-1, -524288, 524288, &nc, &nb);
  CHECK_EQ_INT(nb, -b);
  /* A tiny object: scale ~ rate / size. */
  cprof__heap_unsample(1, 16, 524288, &c, &b);
  CHECK(c > 32767 && c < 32770);
}

static void test_size_class(void) {
  CHECK_EQ_INT(cprof__heap_size_class(0), 0);
  CHECK_EQ_INT(cprof__heap_size_class(1), 8);
  CHECK_EQ_INT(cprof__heap_size_class(9), 16);
  CHECK_EQ_INT(cprof__heap_size_class(17), 20);
  CHECK_EQ_INT(cprof__heap_size_class(100), 112);
  CHECK_EQ_INT(cprof__heap_size_class(4096), 4096);
  CHECK_EQ_INT(cprof__heap_size_class(4097), 5120);
  CHECK_EQ_INT(cprof__heap_size_class(SIZE_MAX), UINT32_MAX);
}

/* Integration: totals of the records whose stack holds a pc inside fn. */
typedef struct site {
  int64_t v[4];
} site;

static site totals_at(uintptr_t lo, uintptr_t hi) {
  cprof__records recs = {0};
  site s = {{0, 0, 0, 0}};
  const cprof__profile_def *def = &cprof__heap_profile;
  CHECK_EQ_INT(def->collect(&recs), 0);
  for (size_t i = 0; i < recs.len; i++) {
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(recs.v[i].sid, &pcs);
    bool in = false;
    for (size_t k = 0; k < n; k++) in |= pcs[k] >= lo && pcs[k] < hi;
    if (in)
      for (int k = 0; k < 4; k++) s.v[k] += recs.v[i].v[k];
  }
  cprof__records_free(&recs);
  return s;
}

static void *volatile keep[200];

__attribute__((noinline)) static void alloc_site(size_t n) {
  for (int i = 0; i < 100; i++) keep[i] = malloc(n);
  __asm__ volatile("");
}

__attribute__((noinline)) static void end_of_alloc_site(void) {
  __asm__ volatile("");
}

static void test_records(void) {
  long prev = cprof_heap_set_rate(1);
  CHECK_EQ_INT(cprof_heap_set_rate(-1), 1);
  uintptr_t lo = (uintptr_t)alloc_site, hi = (uintptr_t)end_of_alloc_site;
  if (hi < lo) hi = lo + 256;
  site before = totals_at(lo, hi);
  alloc_site(300);
  site after = totals_at(lo, hi);
  CHECK_EQ_INT(after.v[0] - before.v[0], 100);
  CHECK_EQ_INT(after.v[1] - before.v[1], 30000);
  CHECK_EQ_INT(after.v[2] - before.v[2], 100);
  CHECK_EQ_INT(after.v[3] - before.v[3], 30000);
  /* realloc moves the record: old freed, new sampled (outside the site). */
  for (int i = 0; i < 50; i++) keep[i] = realloc(keep[i], 5000);
  for (int i = 50; i < 100; i++) free(keep[i]);
  site freed = totals_at(lo, hi);
  CHECK_EQ_INT(freed.v[0] - before.v[0], 100);
  CHECK_EQ_INT(freed.v[2] - before.v[2], 0);
  CHECK_EQ_INT(freed.v[3] - before.v[3], 0);
  for (int i = 0; i < 50; i++) free(keep[i]);

  /* The profiler's own allocations are not sampled. */
  uint64_t live = cprof__heap_live_sampled();
  void *mine = cprof__malloc(1000);
  CHECK_EQ_INT(cprof__heap_live_sampled(), live);
  cprof__free(mine);
  cprof_heap_set_rate(prev);
}

/* Profiler code parks the countdown: its allocations neither sample nor
 * charge it, and a reseed made inside profiler code (the rate set by
 * cprof's own start-up) takes effect on leaving it. */
static void test_park(void) {
  long prev = cprof_heap_set_rate(CPROF__HEAP_DEFAULT_RATE);
  void *volatile first = malloc(16); /* this thread has drawn */
  free(first);
  uint64_t before = cprof__heap_thread_countdown();
  CHECK(before > 0);
  void *mine = cprof__malloc(100);
  cprof__free(mine);
  CHECK_EQ_INT(cprof__heap_thread_countdown(), before);
  cprof__guard_enter();
  CHECK_EQ_INT(cprof__heap_thread_countdown(), 0);
  cprof__guard_enter(); /* nested */
  cprof_heap_set_rate(CPROF__HEAP_DEFAULT_RATE);
  cprof__guard_exit();
  CHECK_EQ_INT(cprof__heap_thread_countdown(), 0);
  cprof__guard_exit();
  uint64_t redrawn = cprof__heap_thread_countdown();
  CHECK(redrawn > 0 && redrawn != before);
  /* Unguarded allocations charge it by their size. */
  void *volatile p = malloc(64); /* volatile: kept, not optimised out */
  CHECK_EQ_INT(cprof__heap_thread_countdown(), redrawn - 64);
  free(p);
  /* calloc charges the product, and an overflowing one nothing. */
  void *volatile c = calloc(3, 40);
  CHECK(c != NULL);
  CHECK_EQ_INT(cprof__heap_thread_countdown(), redrawn - 64 - 120);
  free(c);
#if CPROF__OWN_ENABLED /* the sanitizers' calloc aborts on an overflow */
  size_t volatile huge = SIZE_MAX / 2 + 2;
  c = calloc(huge, 2);
  CHECK(c == NULL && errno == ENOMEM);
  CHECK_EQ_INT(cprof__heap_thread_countdown(), redrawn - 64 - 120);
#endif
  /* A guarded thread's calloc is cprof's own and charges nothing. */
  cprof__guard_enter();
  c = calloc(5, 8);
  CHECK(c != NULL && (!CPROF__OWN_ENABLED || cprof__own_block(c)));
  free(c);
  cprof__guard_exit();
  uint64_t left = redrawn - 64 - 120;
  CHECK_EQ_INT(cprof__heap_thread_countdown(), left);
  /* realloc charges the new size, by its common path (a block of the
   * allocator's) and by the slow one (NULL, malloc's meaning). */
  void *volatile r = realloc(NULL, 48);
  CHECK(r != NULL);
  CHECK_EQ_INT(cprof__heap_thread_countdown(), left - 48);
  r = realloc(r, 300);
  CHECK(r != NULL && ((uintptr_t)r & 4095) != 0);
  CHECK_EQ_INT(cprof__heap_thread_countdown(), left - 48 - 300);
  /* A guarded thread's realloc charges nothing and keeps the block the
   * allocator's. */
  cprof__guard_enter();
  r = realloc(r, 20);
  CHECK(r != NULL && (!CPROF__OWN_ENABLED || !cprof__own_block(r)));
  cprof__guard_exit();
  CHECK_EQ_INT(cprof__heap_thread_countdown(), left - 48 - 300);
  free(r);
  cprof_heap_set_rate(prev);
}

static void *churn_thread(void *arg) {
  (void)arg;
  void *v[64] = {0};
  for (int i = 0; i < 20000; i++) {
    int k = i % 64;
    free(v[k]);
    v[k] = malloc((size_t)(i % 200) + 1);
  }
  for (int k = 0; k < 64; k++) free(v[k]);
  return NULL;
}

static void test_threads(void) {
  long prev = cprof_heap_set_rate(1);
  uint64_t live = cprof__heap_live_sampled();
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn_thread, NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  /* Every sampled object was freed: the live set is back where it was
   * (give or take the thread stacks' own bookkeeping, freed at join). */
  uint64_t now = cprof__heap_live_sampled();
  CHECK(now <= live + 8);
  cprof_heap_set_rate(prev);
}

/* Fills n bytes of p with a pattern that depends on seed. */
static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + seed);
}

static int intact(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 31 + seed)) return 0;
  return 1;
}

static _Atomic int placement_failures;

#define PLACE_CHECK(cond)                                                \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "placement: %s failed (line %d)\n", #cond, __LINE__); \
      atomic_fetch_add(&placement_failures, 1);                          \
    }                                                                    \
  } while (0)

/* Every allocator entry point, on sizes on both sides of a page, with
 * contents, zeroing, alignment and usable sizes checked through reallocs
 * that move blocks into, out of and between placements. */
static void *placement_thread(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 20000, 70000};
  enum { N = 64 };
  unsigned char *v[N] = {0};
  size_t len[N] = {0};
  for (int round = 0; round < 60; round++) {
    for (int k = 0; k < N; k++) {
      size_t n = sizes[(size_t)(round + k) % CPROF__ARRAY_LEN(sizes)];
      unsigned s = seed + (unsigned)(round * N + k);
      unsigned char *p = NULL;
      switch ((round + k) % 7) {
      case 0:
        p = malloc(n);
        break;
      case 1:
        p = calloc(1, n);
        if (p)
          for (size_t i = 0; i < n; i++) PLACE_CHECK(p[i] == 0);
        break;
      case 2:
        p = aligned_alloc(64, (n + 63) & ~(size_t)63);
        PLACE_CHECK(((uintptr_t)p & 63) == 0);
        break;
      case 3: {
        void *q = NULL;
        PLACE_CHECK(posix_memalign(&q, 256, n) == 0);
        p = q;
        PLACE_CHECK(((uintptr_t)p & 255) == 0);
        break;
      }
      case 4:
        p = memalign(32, n);
        PLACE_CHECK(((uintptr_t)p & 31) == 0);
        break;
      case 5:
        p = valloc(n);
        PLACE_CHECK(((uintptr_t)p & 4095) == 0);
        break;
      default:
        /* A block grown from another size keeps what it held. */
        p = malloc(len[k] ? len[k] : 8);
        if (p) {
          fill(p, len[k] ? len[k] : 8, s);
          size_t was = len[k] ? len[k] : 8;
          p = realloc(p, n);
          PLACE_CHECK(p && intact(p, was < n ? was : n, s));
        }
        break;
      }
      PLACE_CHECK(p != NULL);
      if (!p) continue;
      PLACE_CHECK(malloc_usable_size(p) >= n);
      fill(p, n, s);
      /* Resize what was there before, then free it. */
      if (v[k]) {
        unsigned old = seed + (unsigned)((round - 1) * N + k);
        PLACE_CHECK(intact(v[k], len[k], old));
        size_t m = len[k] / 2 + 1;
        unsigned char *r = realloc(v[k], m);
        PLACE_CHECK(r && intact(r, m < len[k] ? m : len[k], old));
        PLACE_CHECK(malloc_usable_size(r) >= m);
        free(r);
      }
      v[k] = p;
      len[k] = n;
    }
  }
  for (int k = 0; k < N; k++) free(v[k]);
  return NULL;
}

/* Samples page-sized blocks and frees them, on a thread of its own. */
static void *sample_and_exit(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) {
    void *volatile p = malloc(4096); /* volatile: not optimised out */
    free(p);
  }
  return NULL;
}

/* A thread keeps the region page it freed last for its next sample and
 * hands it back when it exits: threads that come and go do not strand
 * pages. */
static void test_region_thread_exit(void) {
  long prev = cprof_heap_set_rate(CPROF__HEAP_ALIGN_MIN_RATE);
  uint64_t before = cprof__heap_region_pages();
  for (int i = 0; i < 60; i++) {
    pthread_t t;
    pthread_create(&t, NULL, sample_and_exit, NULL);
    pthread_join(t, NULL);
  }
  uint64_t after = cprof__heap_region_pages();
#ifndef __SANITIZE_THREAD__
  CHECK(after > 0); /* the threads did sample into the region */
#endif
  CHECK(after - before < 20);
  cprof_heap_set_rate(prev);
}

static void test_placement(void) {
  long prev = cprof_heap_set_rate(CPROF__HEAP_ALIGN_MIN_RATE);
  uint64_t live = cprof__heap_live_sampled();
  uint64_t unaligned = cprof__heap_unaligned_live();
  /* A block of a MiB is all but certainly sampled (1 - e^-16) at this
   * rate, and a sampled one starts on a page boundary. */
  void *big = malloc((size_t)1 << 20);
  CHECK(((uintptr_t)big & 4095) == 0);
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  CHECK(cprof__heap_live_sampled() > live);
  void *bigger = realloc(big, (size_t)3 << 20);
  CHECK(bigger != NULL);
  free(bigger);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, placement_thread, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK_EQ_INT(atomic_load(&placement_failures), 0);
  /* Blocks sampled at rate 1 stay where the allocator put them; the rate
   * then goes back up while they live, and they are still found when
   * freed. */
  cprof_heap_set_rate(1);
  void *low[8];
  for (int i = 0; i < 8; i++) low[i] = malloc(24);
  CHECK(cprof__heap_unaligned_live() >= unaligned + 8 - 1);
  cprof_heap_set_rate(CPROF__HEAP_ALIGN_MIN_RATE);
  for (int i = 0; i < 8; i++) free(low[i]);
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  /* Every block was freed: the live set is back where it was (give or
   * take the thread stacks' own bookkeeping, freed at join). */
  CHECK(cprof__heap_live_sampled() <= live + 8);
  cprof_heap_set_rate(prev);
}

/* Blocks off a page boundary, while they are few, are known by their
 * slots: each is found when freed, a pointer none holds is not taken for
 * one, and past the slots the rest are counted as spilled and found
 * through the filter. */
static void test_unaligned_slots(void) {
  long prev = cprof_heap_set_rate(1);
  uint64_t unaligned = cprof__heap_unaligned_live();
  uint64_t spilled = atomic_load(&cprof__heap_hot.unaligned_spilled);
  enum { N = CPROF__HEAP_UNALIGNED_SLOTS + 3 };
  void *b[N];
  /* Sampled at rate 1, every block stays where the allocator put it. */
  for (int i = 0; i < N; i++) b[i] = malloc(40 + (size_t)i);
  cprof_heap_set_rate(CPROF__HEAP_ALIGN_MIN_RATE);
  uint64_t mine = cprof__heap_unaligned_live() - unaligned;
  CHECK(mine >= N - 1); /* one may be on a page boundary by chance */
  CHECK(atomic_load(&cprof__heap_hot.unaligned_spilled) >= spilled + 1);
  for (int i = 0; i < N; i++)
    if ((uintptr_t)b[i] & 4095) CHECK(cprof__heap_unaligned_may_be(b[i]));
  /* Freed in an order that empties the slots before the spilled ones. */
  for (int i = 0; i < N; i++) free(b[i]);
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  CHECK_EQ_INT(atomic_load(&cprof__heap_hot.unaligned_spilled), spilled);
  /* A few, none spilled: each found by its slot, others not taken. */
  if (spilled == 0) {
    cprof_heap_set_rate(1);
    void *few[2] = {malloc(48), malloc(56)};
    cprof_heap_set_rate(CPROF__HEAP_ALIGN_MIN_RATE);
    CHECK_EQ_INT(atomic_load(&cprof__heap_hot.unaligned_spilled), 0);
    /* Written, so that gcc does not take the checks (which look at the
     * address only) for reads of uninitialised bytes. */
    char *other = malloc(72);
    if (other) memset(other, 0, 72);
    if ((uintptr_t)other & 4095) {
      CHECK(!cprof__heap_unaligned_may_be(other));
      CHECK(!cprof__heap_free_checks(other));
    }
    for (int i = 0; i < 2; i++)
      if ((uintptr_t)few[i] & 4095) {
        CHECK(cprof__heap_free_checks(few[i]));
        unsigned h = cprof__heap_unaligned_hash(few[i]);
        CHECK(atomic_load(&cprof__heap_hot.unaligned_held[h]) >= 1);
        /* An address of the same hash that no slot holds (only its
         * value is used) is not taken for one. */
        uintptr_t near = (uintptr_t)few[i] ^ 0x200;
        CHECK_EQ_INT(cprof__heap_unaligned_hash((void *)near), h);
        if (near != (uintptr_t)few[1 - i])
          CHECK(!cprof__heap_unaligned_may_be((void *)near));
      }
    free(other);
    free(few[1]);
    free(few[0]);
    CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  }
  for (int i = 0; i < CPROF__HEAP_UNALIGNED_SLOTS && unaligned == 0; i++)
    CHECK_EQ_INT(atomic_load(&cprof__heap_unaligned.at[i]), 0);
  for (int i = 0; i < CPROF__HEAP_UNALIGNED_HASHES && unaligned == 0; i++)
    CHECK_EQ_INT(atomic_load(&cprof__heap_hot.unaligned_held[i]), 0);
  cprof_heap_set_rate(prev);
}

/* Sets the calling thread's countdown, by a store the compiler keeps:
 * gcc takes realloc for a builtin that reads no global, and would drop a
 * plain store made just before one and overwritten just after. */
static void set_countdown(uint64_t v) {
  *(volatile uint64_t *)&cprof__heap_tls.countdown = v;
}

/* A sampled realloc result of up to 16 MiB is moved to a page boundary,
 * and a tracked block that realloc leaves off one moves back to one: down
 * to the allocator's own pointer, untracked, when it is small, or to the
 * block's first page boundary, tracked. Neither keeps free() on its
 * slower path. A larger sampled result stays where realloc put it, and so
 * does one whose copy the budget cannot pay. The countdown is set by
 * hand, so that exactly the reallocs meant to be sampled are, and the
 * budget too. */
static void test_realloc_placed(void) {
  long prev = cprof_heap_set_rate(CPROF__HEAP_ALIGN_MIN_RATE);
  void *volatile warm = malloc(16); /* this thread has drawn */
  free(warm);
  uint64_t unaligned = cprof__heap_unaligned_live();
  const uint64_t never = UINT64_MAX / 2;
  const int64_t share = CPROF__HEAP_ALIGN_MIN_RATE / CPROF__HEAP_COPY_SHARE;
  int64_t budget = atomic_exchange(&cprof__heap_copy_budget, 4 << 20);
  set_countdown(never);
  /* A copy is paid from the budget, and a sample earns its share: a
   * small result is copied to a page of the region, unless the allocator
   * put it on a page boundary already. */
  unsigned char *small = malloc(100);
  set_countdown(1);
  small = small ? realloc(small, 3000) : NULL;
  set_countdown(never);
  size_t page;
  CHECK(small != NULL);
  CHECK_EQ_INT(atomic_load(&cprof__heap_copy_budget),
               (4 << 20) + share -
                   (cprof__heap_region_page_of(small, &page) ? 3000 : 0));
  free(small);
  unsigned char *p = malloc(100);
  CHECK(p != NULL);
  if (!p) return;
  fill(p, 100, 7);
  set_countdown(1);
  unsigned char *q = realloc(p, 20000);
  CHECK(q != NULL && ((uintptr_t)q & 4095) == 0);
  CHECK(cprof__heap_live_find(q, false).found);
  CHECK(intact(q, 100, 7));
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  fill(q, 20000, 8);
  set_countdown(never);
  /* After q, so that it cannot grow in place and moves. */
  void *volatile blocker = malloc(30000);
  unsigned char *r = realloc(q, 30000);
  CHECK(r != NULL && intact(r, 20000, 8));
  if (((uintptr_t)r & 4095) != 0) CHECK(!cprof__heap_free_checks(r));
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  fill(r, 30000, 9);
  set_countdown(1);
  unsigned char *big = realloc(r, 100000);
  CHECK(big != NULL && ((uintptr_t)big & 4095) == 0);
  CHECK(big != NULL && intact(big, 30000, 9));
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  fill(big, 100000, 10);
  /* Grown until glibc moves it (to another offset in its page: it copies
   * it there), with a block after it each time so that it cannot grow in
   * place: cprof moves it back to a page boundary. */
  set_countdown(never);
  void *after[6] = {0};
  unsigned char *bigger = big;
  size_t len = 100000;
  bool moved = false;
  for (int i = 0; i < 6 && bigger && !moved; i++) {
    after[i] = malloc(64);
    unsigned char *was = bigger;
    bigger = realloc(bigger, len * 2);
    CHECK(bigger != NULL && ((uintptr_t)bigger & 4095) == 0);
    CHECK(bigger != NULL && intact(bigger, 100000, 10));
    moved = bigger != was;
    len *= 2;
  }
  CHECK(moved);
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  free(bigger);
  for (int i = 0; i < 6; i++) free(after[i]);
  /* Past 16 MiB a sampled result is not copied. */
  unsigned char *s = malloc(100);
  set_countdown(1);
  unsigned char *huge = s ? realloc(s, (size_t)17 << 20) : NULL;
  set_countdown(never);
  CHECK(huge != NULL);
#if CPROF__OWN_ENABLED /* glibc underneath, not a sanitizer's allocator */
  /* Not moved: glibc's mapping puts it 16 bytes past a page boundary. */
  CHECK(huge != NULL && ((uintptr_t)huge & 4095) != 0);
#endif
  if (huge && ((uintptr_t)huge & 4095) != 0) {
    CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned + 1);
    CHECK(cprof__heap_free_checks(huge));
  }
  free(huge);
  /* With nothing in the budget a sampled result stays where it is. */
  atomic_store(&cprof__heap_copy_budget, 0);
  unsigned char *t = malloc(100);
  set_countdown(1);
  unsigned char *u = t ? realloc(t, 20000) : NULL;
  set_countdown(never);
  CHECK(u != NULL);
  CHECK_EQ_INT(atomic_load(&cprof__heap_copy_budget), share);
  if (u && ((uintptr_t)u & 4095) != 0) {
    CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned + 1);
    CHECK(cprof__heap_free_checks(u));
  }
  free(u);
  free(blocker);
  CHECK_EQ_INT(cprof__heap_unaligned_live(), unaligned);
  atomic_store(&cprof__heap_copy_budget, budget);
  cprof_heap_set_rate(prev); /* draws the countdown again */
}

#if CPROF__OWN_ENABLED
/* In a fork child: a block of 48 bytes that is none of avoid's; then,
 * with the range filled, a freed block of an ancestor's (want) comes
 * back.
 * Returns 0, or the failed step. */
static int own_child(void *const *avoid, size_t navoid, void *want,
                     void **out) {
  void *q = cprof__own_malloc(48);
  if (!q || !cprof__own_small(q)) return 10;
  for (size_t i = 0; i < navoid; i++)
    if (q == avoid[i]) return 11; /* a page shared with the parent */
  cprof__own_free(q);
  if (cprof__own_malloc(48) != q) return 12; /* its own list first */
  *out = q;
  if (!want) return 0;
  /* Fill the rest of the range, then the inherited list serves. */
  for (int i = 0; i < 1024; i++) {
    void *big = cprof__own_malloc(60 * 1024);
    if (!big) return 13;
    if (!cprof__own_small(big)) {
      cprof__own_free(big);
      break;
    }
  }
  /* What the range has left for small blocks goes first. */
  for (int i = 0; i < 4096; i++) {
    void *x = cprof__own_malloc(48);
    if (x == want) return 0;
    if (!x || !cprof__own_small(x)) return 14;
  }
  return 16;
}

/* Large blocks of the own heap are known by their address: each live one,
 * and no other page-aligned address (about one in 11 of those shares a
 * summary bit with one of 40 live blocks: cprof__own_large's first test),
 * nor a block once freed through the exported free(). */
static void test_own_large(void) {
  enum { N = 40 };
  void *b[N];
  cprof__own_stats before, during, after;
  cprof__own_stats_get(&before);
  for (int i = 0; i < N; i++) {
    b[i] = cprof__own_malloc(100 * 1024 + (size_t)i * 4096);
    CHECK(b[i] != NULL && ((uintptr_t)b[i] & 4095) == 0);
  }
  cprof__own_stats_get(&during);
  CHECK_EQ_INT(during.large_blocks - before.large_blocks, N);
  for (int i = 0; i < N; i++) CHECK(cprof__own_large(b[i]));
  CHECK(!cprof__own_large((char *)b[0] + 16));
  /* The pages inside the blocks (over a thousand): none is a block's
   * start. */
  int wrong = 0;
  for (int i = 0; i < N; i++)
    for (size_t k = 1; k < 25 + (size_t)i; k++)
      wrong += cprof__own_large((char *)b[i] + k * 4096);
  CHECK_EQ_INT(wrong, 0);
  /* Freed through the exported free(), as any thread's would be. */
  for (int i = 0; i < N; i++) free(b[i]);
  cprof__own_stats_get(&after);
  CHECK_EQ_INT(after.large_blocks, before.large_blocks);
  for (int i = 0; i < N; i++) CHECK(!cprof__own_large(b[i]));
}

/* The grandchild's second inherited block: its parent's list went first. */
static int own_then(void *want) {
  return cprof__own_malloc(48) == want ? 0 : 15;
}

/* A fork child allocates cprof's own memory from the range's fresh end,
 * not from its parent's freed blocks, which it reuses only once the range
 * is full; a grandchild likewise, past both lists it inherits. */
static void test_own_fork(void) {
  void *p = cprof__own_malloc(48);
  CHECK(p != NULL && cprof__own_small(p));
  cprof__own_free(p);
  pid_t pid = fork();
  if (pid == 0) {
    void *q = NULL;
    int rc = own_child(&p, 1, NULL, &q);
    if (rc) _exit(rc);
    cprof__own_free(q);
    pid_t g = fork();
    if (g == 0) {
      void *seen[2] = {p, q}, *r = NULL;
      int step = own_child(seen, 2, q, &r);
      _exit(step ? step : own_then(p));
    }
    int st = 0;
    waitpid(g, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) + 20 * (WEXITSTATUS(st) != 0) : 30);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    fprintf(stderr, "own_fork: child step %d\n", WEXITSTATUS(status));
  CHECK_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}
#endif

int main(void) {
  RUN(test_ln_exp);
  RUN(test_intervals);
  RUN(test_first_draw);
  RUN(test_unbiased);
  RUN(test_unsample);
  RUN(test_size_class);
  RUN(test_records);
  RUN(test_park);
  /* Before test_threads: under TSan its stacks fill the record table. */
  RUN(test_placement);
  RUN(test_unaligned_slots);
  RUN(test_realloc_placed);
#if CPROF__OWN_ENABLED
  RUN(test_own_large);
  RUN(test_own_fork);
#endif
  RUN(test_region_thread_exit);
  RUN(test_threads);
  return TEST_RESULT();
}
