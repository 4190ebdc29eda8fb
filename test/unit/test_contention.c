/*
 * Contention profiles: Go's block sampling maths (cprof__block_weigh), the
 * SetMutexProfileFraction / SetBlockProfileRate semantics of the API, and a
 * real two-thread contention recorded in both profiles.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "source/lock_interpose.h"
#include "profile/registry.h"
#include "testutil.h"

static void test_block_weigh(void) {
  int64_t c = 0, d = 0;
  /* Longer than the rate: always one event of its own length. */
  CHECK(cprof__block_weigh(5000, 1000, 12345, &c, &d));
  CHECK_EQ_INT(c, CPROF__CONTENTION_UNIT);
  CHECK_EQ_INT(d, 5000);
  /* Shorter: kept when rnd % rate <= d, then rate/d events of rate ns. */
  CHECK(cprof__block_weigh(250, 1000, 200, &c, &d));
  CHECK_EQ_INT(c, 4 * CPROF__CONTENTION_UNIT);
  CHECK_EQ_INT(d, 1000);
  CHECK(!cprof__block_weigh(250, 1000, 600, &c, &d));
  CHECK(!cprof__block_weigh(250, 0, 0, &c, &d));
  /* Unbiased: the expected delay equals the true delay. */
  int64_t total = 0;
  for (uint64_t r = 0; r < 100000; r++)
    if (cprof__block_weigh(100, 10000, r * 7919, &c, &d)) total += d;
  CHECK(total > 100 * 100000 * 9 / 10 && total < 100 * 100000 * 11 / 10);
}

static void test_api(void) {
  CHECK_EQ_INT(cprof_set_mutex_profile_fraction(-1), 0);
  CHECK(!cprof__mutex_profile_enabled());
  CHECK_EQ_INT(cprof_set_mutex_profile_fraction(5), 0);
  CHECK_EQ_INT(cprof_set_mutex_profile_fraction(-1), 5);
  CHECK(cprof__mutex_profile_enabled());
  CHECK_EQ_INT(cprof_set_mutex_profile_fraction(0), 5);
  CHECK(!cprof__mutex_profile_enabled());
  CHECK_EQ_INT(cprof_set_block_profile_rate(100), 0);
  CHECK_EQ_INT(cprof_block_profile_rate(), 100);
  CHECK(cprof__block_profile_enabled());
  CHECK_EQ_INT(cprof_set_block_profile_rate(-3), 0);
  CHECK(!cprof__block_profile_enabled());
  CHECK(cprof__profile_find("threads") == cprof__profile_find("goroutine"));
  CHECK(cprof__profile_find("mutex") != NULL);
  CHECK(cprof__profile_find("block") != NULL);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int holding;

static void *holder(void *arg) {
  pthread_mutex_lock(&mu);
  atomic_store(&holding, 1);
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  pthread_mutex_unlock(&mu);
  return arg;
}

static int64_t total_delay(const char *name) {
  cprof__records r = {0};
  int64_t sum = 0;
  CHECK_EQ_INT(cprof__profile_find(name)->collect(&r), 0);
  for (size_t i = 0; i < r.len; i++) sum += r.v[i].v[1];
  cprof__records_free(&r);
  return sum;
}

static void test_contended(void) {
  int64_t m0 = total_delay("mutex"), b0 = total_delay("block");
  cprof_set_mutex_profile_fraction(1);
  cprof_set_block_profile_rate(1);
  pthread_mutex_lock(&mu);
  pthread_t t;
  pthread_create(&t, NULL, holder, NULL);
  pthread_mutex_unlock(&mu);
  /* Waits until the holder has the lock, however late it is scheduled. */
  struct timespec ts = {0, 1000 * 1000};
  while (!atomic_load(&holding)) nanosleep(&ts, NULL);
  pthread_mutex_lock(&mu); /* waits up to 20 ms for the holder */
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);
  cprof_set_mutex_profile_fraction(0);
  cprof_set_block_profile_rate(0);
  int64_t dm = total_delay("mutex") - m0, db = total_delay("block") - b0;
  CHECK(dm > 5 * 1000 * 1000);
  CHECK(db > 5 * 1000 * 1000);
  fprintf(stderr, "mutex delay %lld ns, block delay %lld ns\n",
          (long long)dm, (long long)db);
}

int main(void) {
  RUN(test_block_weigh);
  RUN(test_api);
  RUN(test_contended);
  return TEST_RESULT();
}
