/*
 * Aggregation tables: adds sum per (stack, tag), concurrent adds lose
 * nothing, a full table counts drops instead of growing, and clear zeroes
 * the counters but keeps the keys. A table's new keys land on few pages.
 */
#include <pthread.h>

#include "capture/agg.h"
#include "testutil.h"

typedef struct {
  size_t nkeys;
  int64_t sum[CPROF__AGG_MAX_VALUES];
  int64_t v_of_7_3[CPROF__AGG_MAX_VALUES]; /* the counters of (7, 3) */
  int seen_7_3;
  int bad_key;
} totals;

static void collect(cprof__stack_id sid, uint32_t tag, const int64_t *vals,
                    void *ctx) {
  totals *t = ctx;
  t->nkeys++;
  if (sid == 0) t->bad_key = 1;
  for (size_t j = 0; j < CPROF__AGG_MAX_VALUES; j++) {
    if (j < 2) t->sum[j] += vals[j];
  }
  if (sid == 7 && tag == 3) {
    t->seen_7_3++;
    t->v_of_7_3[0] = vals[0];
    t->v_of_7_3[1] = vals[1];
  }
}

static totals collect_all(cprof__agg *a) {
  totals t;
  memset(&t, 0, sizeof(t));
  cprof__agg_foreach(a, collect, &t);
  return t;
}

static void test_add_foreach(void) {
  cprof__agg *a = cprof__agg_new(2, 100);
  CHECK(a != NULL);
  CHECK_EQ_INT(cprof__agg_nvalues(a), 2);
  int64_t one[2] = {1, 10};
  int64_t two[2] = {2, 20};
  CHECK(cprof__agg_add(a, 7, 3, one));
  CHECK(cprof__agg_add(a, 7, 3, two));
  CHECK(cprof__agg_add(a, 7, 4, one)); /* another tag */
  CHECK(cprof__agg_add(a, 8, 3, one)); /* another stack */
  CHECK(cprof__agg_add(a, 0xffffffffu, 0xffffffffu, one));
  CHECK(!cprof__agg_add(a, CPROF__STACK_NONE, 0, one));
  CHECK_EQ_INT(cprof__agg_drops(a), 1);

  totals t = collect_all(a);
  CHECK_EQ_INT(t.nkeys, 4);
  CHECK_EQ_INT(t.seen_7_3, 1);
  CHECK_EQ_INT(t.v_of_7_3[0], 3);
  CHECK_EQ_INT(t.v_of_7_3[1], 30);
  CHECK_EQ_INT(t.sum[0], 6);
  CHECK_EQ_INT(t.sum[1], 60);
  CHECK(!t.bad_key);

  cprof__agg_clear(a);
  t = collect_all(a);
  CHECK_EQ_INT(t.nkeys, 4);
  CHECK_EQ_INT(t.sum[0], 0);
  CHECK_EQ_INT(t.sum[1], 0);
  CHECK(cprof__agg_add(a, 7, 3, one));
  t = collect_all(a);
  CHECK_EQ_INT(t.v_of_7_3[1], 10);
  cprof__agg_free(a);

  CHECK(cprof__agg_new(0, 10) == NULL);
  CHECK(cprof__agg_new(CPROF__AGG_MAX_VALUES + 1, 10) == NULL);
  CHECK(cprof__agg_new(1, 0) == NULL);
  cprof__agg_free(NULL);
}

static void test_full(void) {
  cprof__agg *a = cprof__agg_new(1, 10);
  int64_t one[1] = {1};
  for (uint32_t k = 0; k < 10; k++) CHECK(cprof__agg_add(a, 2 + k, k, one));
  CHECK_EQ_INT(cprof__agg_drops(a), 0);
  for (uint32_t k = 0; k < 5; k++) CHECK(!cprof__agg_add(a, 100 + k, 0, one));
  CHECK_EQ_INT(cprof__agg_drops(a), 5);
  /* Keys already in still count. */
  for (uint32_t k = 0; k < 10; k++) CHECK(cprof__agg_add(a, 2 + k, k, one));
  CHECK_EQ_INT(cprof__agg_drops(a), 5);
  totals t = collect_all(a);
  CHECK_EQ_INT(t.nkeys, 10);
  CHECK_EQ_INT(t.sum[0], 20);
  cprof__agg_free(a);
}

#define NTHREADS 4
#define NKEYS 500
#define ROUNDS 200

static cprof__agg *shared;

static void *adder(void *arg) {
  uint32_t tag = (uint32_t)(uintptr_t)arg % 2;
  for (int r = 0; r < ROUNDS; r++)
    for (uint32_t k = 0; k < NKEYS; k++) {
      int64_t v[3] = {1, (int64_t)k, -1};
      cprof__agg_add(shared, 2 + k * 3, tag, v);
    }
  return NULL;
}

static void test_concurrent(void) {
  shared = cprof__agg_new(3, 2 * NKEYS);
  pthread_t th[NTHREADS];
  for (uintptr_t i = 0; i < NTHREADS; i++)
    CHECK(pthread_create(&th[i], NULL, adder, (void *)i) == 0);
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  totals t = collect_all(shared);
  CHECK_EQ_INT(t.nkeys, 2 * NKEYS);
  CHECK_EQ_INT(t.sum[0], (int64_t)NTHREADS * ROUNDS * NKEYS);
  CHECK_EQ_INT(t.sum[1],
               (int64_t)NTHREADS * ROUNDS * (NKEYS * (NKEYS - 1) / 2));
  CHECK_EQ_INT(cprof__agg_drops(shared), 0);
  cprof__agg_free(shared);
}

/* The records are handed out in order, and a page of the index is first
 * touched by a write: a thousand keys in a table sized for 32,768 fault in
 * the index's 64 pages at most and a few pages of records, where keys and
 * counters in slots scattered by hash, each page read before it was
 * written, took 508 faults. */
static void test_dense(void) {
  cprof__agg *a = cprof__agg_new(2, 32768);
  CHECK(a != NULL);
  int64_t v[2] = {1, 2};
  long before = testutil_minor_faults();
  for (uint32_t k = 0; k < 1000; k++) CHECK(cprof__agg_add(a, 2 + k, k % 3, v));
  CHECK_FAULTS_SINCE(before, 64 + 2 + 4 + 16);
  totals t = collect_all(a);
  CHECK_EQ_INT(t.nkeys, 1000);
  CHECK_EQ_INT(t.sum[1], 2000);
  cprof__agg_free(a);
}

int main(void) {
  RUN(test_add_foreach);
  RUN(test_dense);
  RUN(test_full);
  RUN(test_concurrent);
  return TEST_RESULT();
}
