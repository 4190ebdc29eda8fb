/*
 * The stack table: interned stacks come back intact, identical stacks share
 * an id, different ones do not, a full table answers with the overflow id,
 * and concurrent interning from threads and a SIGPROF handler never corrupts
 * an entry nor gives one stack two ids. A fresh table's new stacks fault
 * each page in once.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture/stack.h"
#include "capture/stacktab.h"
#include "testutil.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

static int same(cprof__stack_id id, const uintptr_t *pcs, size_t n) {
  const uintptr_t *got = NULL;
  size_t m = cprof__stacktab_get(id, &got);
  return m == n && got && memcmp(got, pcs, n * sizeof(uintptr_t)) == 0;
}

static void test_round_trip(void) {
  uintptr_t a[] = {0x401000, 0x402000, 0x403000};
  uintptr_t b[] = {0x401000, 0x402000, 0x403001};
  uintptr_t c[] = {0x401000, 0x402000};
  uintptr_t deep[CPROF__STACK_BUF];
  for (size_t i = 0; i < CPROF__STACK_BUF; i++) deep[i] = 0x500000 + i * 16;
  deep[CPROF__STACK_BUF - 1] = CPROF__PC_TRUNCATED;

  size_t before = cprof__stacktab_size();
  errno = 31337;
  cprof__stack_id ia = cprof__stacktab_intern(a, 3);
  CHECK_EQ_INT(errno, 31337);
  cprof__stack_id ib = cprof__stacktab_intern(b, 3);
  cprof__stack_id ic = cprof__stacktab_intern(c, 2);
  cprof__stack_id id = cprof__stacktab_intern(deep, CPROF__STACK_BUF);
  CHECK(ia > CPROF__STACK_OVERFLOW && ib > CPROF__STACK_OVERFLOW);
  CHECK(ic > CPROF__STACK_OVERFLOW && id > CPROF__STACK_OVERFLOW);
  CHECK(ia != ib && ia != ic && ib != ic && id != ia);
  CHECK(same(ia, a, 3) && same(ib, b, 3) && same(ic, c, 2));
  CHECK(same(id, deep, CPROF__STACK_BUF));
  CHECK_EQ_INT(cprof__stacktab_intern(a, 3), ia);
  CHECK_EQ_INT(cprof__stacktab_intern(b, 3), ib);
  CHECK_EQ_INT(cprof__stacktab_intern(deep, CPROF__STACK_BUF), id);
  CHECK_EQ_INT(cprof__stacktab_size(), before + 4);

  const uintptr_t *got = NULL;
  CHECK_EQ_INT(cprof__stacktab_get(CPROF__STACK_OVERFLOW, &got), 1);
  CHECK(got && got[0] == CPROF__PC_OVERFLOW);
  CHECK_EQ_INT(cprof__stacktab_get(CPROF__STACK_NONE, &got), 0);
  CHECK_EQ_INT(cprof__stacktab_get(0xfffffff0u, &got), 0);
  CHECK_EQ_INT(cprof__stacktab_get(id + 1000, &got), 0); /* never filled */
  CHECK_EQ_INT(cprof__stacktab_overflows(), 0);
}

/* Runs in a child, which gets its own small table. */
static int overflow_child(void) {
  int bad = 0;
  if (cprof__stacktab_init_sized(16, 1000) != 0) return 10;
  if (cprof__stacktab_init() != 0) return 11; /* keeps the small one */
  /* 16 slots, 12 usable. */
  cprof__stack_id ids[12];
  for (uintptr_t i = 0; i < 12; i++) {
    uintptr_t pcs[2] = {0x1000 + i, 0x2000};
    ids[i] = cprof__stacktab_intern(pcs, 2);
    if (ids[i] <= CPROF__STACK_OVERFLOW) bad |= 1;
  }
  uintptr_t more[2] = {0x9000, 0x2000};
  if (cprof__stacktab_intern(more, 2) != CPROF__STACK_OVERFLOW) bad |= 2;
  if (cprof__stacktab_overflows() != 1) bad |= 4;
  /* Stacks already in still resolve. */
  for (uintptr_t i = 0; i < 12; i++) {
    uintptr_t pcs[2] = {0x1000 + i, 0x2000};
    if (cprof__stacktab_intern(pcs, 2) != ids[i]) bad |= 8;
    if (!same(ids[i], pcs, 2)) bad |= 16;
  }
  if (cprof__stacktab_size() != 12) bad |= 32;
  return bad;
}

static int pool_child(void) {
  int bad = 0;
  if (cprof__stacktab_init_sized(1024, 300) != 0) return 10;
  uintptr_t pcs[100];
  for (size_t i = 0; i < 100; i++) pcs[i] = 0x7000 + i;
  for (uintptr_t k = 0; k < 3; k++) {
    pcs[0] = k + 0x100000;
    cprof__stack_id id = cprof__stacktab_intern(pcs, 100);
    if (id <= CPROF__STACK_OVERFLOW || !same(id, pcs, 100)) bad |= 1;
  }
  pcs[0] = 0x200000;
  if (cprof__stacktab_intern(pcs, 100) != CPROF__STACK_OVERFLOW) bad |= 2;
  /* A short stack still fits nowhere: the pool is exactly used up. */
  if (cprof__stacktab_intern(pcs, 1) != CPROF__STACK_OVERFLOW) bad |= 4;
  if (cprof__stacktab_overflows() != 2) bad |= 8;
  return bad;
}

/* A pool of three chunks (16 Ki frames each, the last one partly used):
 * stacks of 100 frames never straddle a chunk's end, so 163 fit in each of
 * the first two and 72 in the last, and every one reads back whole. */
static int chunks_child(void) {
  int bad = 0;
  if (cprof__stacktab_init_sized(4096, 40000) != 0) return 10;
  uintptr_t pcs[100];
  for (size_t i = 0; i < 100; i++) pcs[i] = 0x7000 + i;
  cprof__stack_id ids[400];
  size_t n = 0;
  for (; n < 400; n++) {
    pcs[0] = n + 0x100000;
    pcs[99] = n + 0x200000;
    ids[n] = cprof__stacktab_intern(pcs, 100);
    if (ids[n] == CPROF__STACK_OVERFLOW) break;
  }
  if (n != 163 * 2 + 72) bad |= 1;
  for (size_t k = 0; k < n; k++) {
    pcs[0] = k + 0x100000;
    pcs[99] = k + 0x200000;
    if (!same(ids[k], pcs, 100)) bad |= 2;
    if (cprof__stacktab_intern(pcs, 100) != ids[k]) bad |= 4;
  }
  /* The pool's tail still takes a short stack. */
  uintptr_t one[1] = {0x300000};
  if (cprof__stacktab_intern(one, 1) <= CPROF__STACK_OVERFLOW) bad |= 8;
  return bad;
}

static int not_initialised_child(void) {
  uintptr_t pcs[1] = {0x1000};
  return cprof__stacktab_intern(pcs, 1) == CPROF__STACK_OVERFLOW ? 0 : 1;
}

static void run_child(int (*fn)(void), const char *what) {
  pid_t pid = fork();
  if (pid == 0) {
    /* The library's constructor made the default table at start-up. */
    cprof__stacktab_reset_for_tests();
    _exit(fn());
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fprintf(stderr, "%s: child status %#x\n", what, status);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Each child drops the table the constructor made and starts from
 * nothing, since a table, once made, stays. */
static void test_overflow(void) {
  run_child(not_initialised_child, "not_initialised_child");
  run_child(overflow_child, "overflow_child");
  run_child(pool_child, "pool_child");
  run_child(chunks_child, "chunks_child");
}

/* Concurrent interning from threads and a signal handler. */

#define NSTACKS 2000
#define NTHREADS 4
#define ROUNDS 20

static uintptr_t stacks[NSTACKS][CPROF__STACK_BUF];
static size_t depths[NSTACKS];
static atomic_int conc_bad;
static atomic_int sig_count;
static atomic_int sig_bad;
static _Atomic cprof__stack_id first_id[NSTACKS];
static atomic_int two_ids;

/* Notes stack s's id; counts an id that differs from the first seen. */
static void same_id(size_t s, cprof__stack_id id) {
  cprof__stack_id want = 0;
  if (!atomic_compare_exchange_strong(&first_id[s], &want, id) && want != id)
    atomic_fetch_add(&two_ids, 1);
}

static void make_stacks(void) {
  for (size_t s = 0; s < NSTACKS; s++) {
    depths[s] = 1 + rnd() % CPROF__STACK_BUF;
    for (size_t i = 0; i < depths[s]; i++)
      stacks[s][i] = 0x400000 + (rnd() % 64) * 16; /* few pcs: collisions */
    stacks[s][0] = 0x100000 + s; /* but every stack distinct */
  }
}

/* Interns every stack once, in an order that depends on the seed: threads
 * walking the same order in lockstep would mostly race on fresh stacks. */
static void intern_all(uint64_t seed, atomic_int *bad) {
  static const size_t strides[] = {7919, 7927, 7933, 7937, 7949, 7951, 7963};
  size_t stride = strides[seed % CPROF__ARRAY_LEN(strides)];
  for (size_t k = 0; k < NSTACKS; k++) {
    size_t s = (size_t)((seed + k * stride) % NSTACKS);
    cprof__stack_id id = cprof__stacktab_intern(stacks[s], depths[s]);
    if (id <= CPROF__STACK_OVERFLOW || !same(id, stacks[s], depths[s]))
      atomic_fetch_add(bad, 1);
    same_id(s, id);
  }
}

static void on_prof(int sig) {
  (void)sig;
  int saved = errno;
  int c = atomic_fetch_add(&sig_count, 1);
  size_t s = (size_t)c * 31 % NSTACKS;
  cprof__stack_id id = cprof__stacktab_intern(stacks[s], depths[s]);
  if (id <= CPROF__STACK_OVERFLOW || !same(id, stacks[s], depths[s]))
    atomic_fetch_add(&sig_bad, 1);
  same_id(s, id);
  errno = saved;
}

static void *worker(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) intern_all(seed * 1000003 + (uint64_t)r, &conc_bad);
  return NULL;
}

static void test_concurrent(void) {
  size_t before = cprof__stacktab_size();
  make_stacks();
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_prof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, &old);
  struct itimerval it = {{0, 200}, {0, 200}};
  setitimer(ITIMER_PROF, &it, NULL);

  pthread_t th[NTHREADS];
  for (uintptr_t i = 0; i < NTHREADS; i++)
    CHECK(pthread_create(&th[i], NULL, worker, (void *)(i + 1)) == 0);
  /* The main thread interns the same stacks until enough signals landed;
   * sched_yield lets sanitizers deliver the signals they defer. */
  int64_t deadline = cprof__mono_ns() + 20 * (int64_t)1000000000;
  for (uint64_t r = 0; atomic_load(&sig_count) < 200 || r < ROUNDS; r++) {
    intern_all(r, &conc_bad);
    sched_yield();
    if (cprof__mono_ns() > deadline) break;
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);

  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  sigaction(SIGPROF, &old, NULL);

  fprintf(stderr, "  %d signals interned, table holds %zu stacks\n",
          atomic_load(&sig_count), cprof__stacktab_size());
  CHECK(atomic_load(&sig_count) > 0);
  CHECK_EQ_INT(atomic_load(&conc_bad), 0);
  CHECK_EQ_INT(atomic_load(&sig_bad), 0);
  /* Racing inserts of one stack give it one id: every intern of a stack,
   * in any thread or handler, got the same one. (The process's own heap
   * samples may add a stack or two.) */
  CHECK_EQ_INT(atomic_load(&two_ids), 0);
  CHECK(cprof__stacktab_size() - before >= NSTACKS);
  CHECK(cprof__stacktab_size() - before < NSTACKS + 16);
  CHECK_EQ_INT(cprof__stacktab_overflows(), 0);
  /* After the dust settles, every stack resolves. */
  atomic_int bad = 0;
  intern_all(1, &bad);
  CHECK_EQ_INT(atomic_load(&bad), 0);
}

/* A thousand stacks of four frames in a table of 65,536 slots fault in
 * each of the index's 129 pages at most once (a load before the store
 * that claims an entry faulted twice: 270 faults in all), six pages of
 * records and eight of frames: 143 here. */
static void test_fresh_pages(void) {
  cprof__stacktab_reset_for_tests();
  CHECK_EQ_INT(cprof__stacktab_init_sized(1 << 16, 1 << 16), 0);
  uintptr_t pcs[4];
  long before = testutil_minor_faults();
  for (int k = 0; k < 1000; k++) {
    for (int j = 0; j < 4; j++) pcs[j] = (uintptr_t)(rnd() >> 16) | 1;
    CHECK(cprof__stacktab_intern(pcs, 4) > CPROF__STACK_OVERFLOW);
  }
  CHECK_FAULTS_SINCE(before, 128 + 6 + 8 + 16);
  cprof__stacktab_reset_for_tests();
}

int main(void) {
  RUN(test_overflow);
  RUN(test_fresh_pages);
  CHECK_EQ_INT(cprof__stacktab_init(), 0);
  CHECK_EQ_INT(cprof__stacktab_init(), 0);
  RUN(test_round_trip);
  RUN(test_concurrent);
  return TEST_RESULT();
}
