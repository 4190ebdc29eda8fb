/*
 * The frame-pointer walker: real stacks come back in order, garbage never
 * faults (with and without cached bounds), a SIGPROF walk of a deep stack is
 * truncated with the mark, errno survives, and the page probe tells readable
 * memory from unreadable.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include "capture/saferead.h"
#include "capture/stack.h"
#include "testutil.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

/* A function's code is assumed to fit in this many bytes. */
#define FN_SPAN 1024

static volatile int sink_;

static int pc_in(uintptr_t pc, void (*fn)(void)) {
  uintptr_t f = (uintptr_t)fn;
  return pc > f && pc < f + FN_SPAN;
}

/* (a) Walking our own stack. */

static uintptr_t here_pcs[CPROF__STACK_BUF];
static size_t here_n;

NOINLINE static void nest3(size_t skip) {
  here_n = cprof__stack_walk_here(here_pcs, CPROF__STACK_BUF, skip);
  sink_++;
}
NOINLINE static void nest2(size_t skip) {
  nest3(skip);
  sink_++;
}
NOINLINE static void nest1(size_t skip) {
  nest2(skip);
  sink_++;
}

static void check_nested(size_t skip) {
  nest1(skip);
  void (*fns[])(void) = {(void (*)(void))nest3, (void (*)(void))nest2,
                         (void (*)(void))nest1};
  CHECK(here_n >= 3 - skip + 1);
  for (size_t i = skip; i < 3 && i - skip < here_n; i++) {
    if (!pc_in(here_pcs[i - skip], fns[i]))
      fprintf(stderr, "frame %zu: pc %#lx not in fn %zu at %p\n", i - skip,
              (unsigned long)here_pcs[i - skip], i, (void *)fns[i]);
    CHECK(pc_in(here_pcs[i - skip], fns[i]));
  }
}

NOINLINE static void test_walk_here(void) {
  check_nested(0);
  /* The caller of nest1 is check_nested. */
  CHECK(here_n >= 4 && pc_in(here_pcs[3], (void (*)(void))check_nested));
  check_nested(1);
  check_nested(2);
  /* Too small a buffer: the innermost frames and the mark. */
  uintptr_t pcs[3];
  size_t n = cprof__stack_walk_here(pcs, 3, 0);
  CHECK_EQ_INT(n, 3);
  CHECK(pc_in(pcs[0], (void (*)(void))test_walk_here));
  CHECK(pcs[2] == CPROF__PC_TRUNCATED);
  CHECK_EQ_INT(cprof__stack_walk_here(pcs, 0, 0), 0);
}

static void *walk_here_thread(void *arg) {
  (void)arg;
  check_nested(0); /* no bounds: every page is probed */
  cprof__stack_register_thread();
  check_nested(0);
  cprof__stack_unregister_thread();
  return NULL;
}

static void test_walk_here_threads(void) {
  pthread_t th;
  CHECK(pthread_create(&th, NULL, walk_here_thread, NULL) == 0);
  pthread_join(th, NULL);
  /* The main thread without bounds. */
  cprof__stack_unregister_thread();
  check_nested(0);
  cprof__stack_register_thread();
}

/* (b) Garbage frame chains. */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

/* Memory that is not there: one unmapped page, one PROT_NONE page, and a
 * readable page followed by a PROT_NONE one (a record straddling them has a
 * readable first word and an unreadable second). An unmapped page may be
 * mapped again by a later mmap (a thread stack, a sanitizer's allocator), so
 * tests that need it to stay unmapped take a fresh one; the garbage walks
 * only lose a case if it is reused. */
static uintptr_t none_page, edge_page;
static size_t page_size;

static uintptr_t fresh_unmapped_page(void) {
  char *p = mmap(NULL, page_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  munmap(p, page_size);
  return (uintptr_t)p;
}

static uintptr_t unmapped_page;

static void setup_bad_pages(void) {
  page_size = (size_t)sysconf(_SC_PAGESIZE);
  unmapped_page = fresh_unmapped_page();

  char *p = mmap(NULL, page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  CHECK(p != MAP_FAILED);
  none_page = (uintptr_t)p;

  p = mmap(NULL, 2 * page_size, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  CHECK(mprotect(p + page_size, page_size, PROT_NONE) == 0);
  edge_page = (uintptr_t)p;
  uintptr_t *last = (uintptr_t *)(p + page_size - sizeof(uintptr_t));
  *last = (uintptr_t)p; /* a "saved fp" whose return address is unreadable */
}

/* A plausible-or-not word for a fake frame record in buf[0..n). */
static uintptr_t garbage_word(uintptr_t *buf, size_t n, size_t at) {
  uintptr_t base = (uintptr_t)buf;
  uint64_t pg = page_size;
  switch (rnd() % 16) {
    case 0: return 0;
    case 1: return rnd();
    case 2: return unmapped_page + (rnd() % pg & ~7ull);
    case 3: return none_page + (rnd() % pg & ~7ull);
    case 4: return edge_page + pg - sizeof(uintptr_t);
    case 5: return base + at * sizeof(uintptr_t); /* a loop onto itself */
    case 6: return base + (rnd() % n) * sizeof(uintptr_t) + 1 + rnd() % 7;
    case 7: return base + (rnd() % n) * sizeof(uintptr_t); /* may decrease */
    case 8: return base + at * sizeof(uintptr_t) + ((uintptr_t)1 << 24);
    case 9: return base - (rnd() % 4096); /* below the buffer */
    case 10: return (uintptr_t)(rnd() % 4096); /* a "return" in page 0 */
    case 11: return (uintptr_t)&rng_state;     /* a readable data address */
    default:
      /* A well-formed step up the buffer, so chains get long. */
      return base + (at + 2 + rnd() % 6) * sizeof(uintptr_t);
  }
}

static int sane(const uintptr_t *pcs, size_t n, size_t max, uintptr_t pc) {
  if (n == 0 || n > max) return 0;
  if (pcs[0] != pc && !(max == 1 && pcs[0] == CPROF__PC_TRUNCATED)) return 0;
  for (size_t i = 1; i < n; i++) {
    if (i == n - 1 && n == max && pcs[i] == CPROF__PC_TRUNCATED) continue;
    if (pcs[i] < 4095) return 0;
  }
  return 1;
}

#define GARBAGE_WORDS 512

/* Runs trials random fake stacks in buf; returns the number of walks that
 * produced more than one frame, so the test can tell it did walk. */
static size_t garbage_trials(uintptr_t *buf, size_t trials) {
  size_t deep = 0;
  uintptr_t pcs[CPROF__STACK_BUF];
  for (size_t t = 0; t < trials; t++) {
    for (size_t i = 0; i < GARBAGE_WORDS; i++)
      buf[i] = garbage_word(buf, GARBAGE_WORDS, i);
    uintptr_t fp = garbage_word(buf, GARBAGE_WORDS, 0);
    uintptr_t sp = (uintptr_t)buf;
    switch (rnd() % 4) {
      case 0: sp = (uintptr_t)__builtin_frame_address(0); break;
      case 1: sp = rnd(); break;
      default: break;
    }
    size_t max = 1 + rnd() % CPROF__STACK_BUF;
    uintptr_t pc = rnd();
    size_t n = cprof__stack_walk_from(pc, fp, sp, pcs, max);
    CHECK(sane(pcs, n, max, pc));
    if (n > 1) deep++;
  }
  return deep;
}

static size_t garbage_all(size_t trials) {
  uintptr_t on_stack[GARBAGE_WORDS];
  uintptr_t *on_heap = calloc(GARBAGE_WORDS, sizeof(uintptr_t));
  CHECK(on_heap != NULL);
  size_t deep = garbage_trials(on_stack, trials);
  deep += garbage_trials(on_heap, trials);
  /* Pointers straight at the bad pages. */
  uintptr_t pcs[CPROF__STACK_BUF];
  uintptr_t bad[] = {0,
                     8,
                     fresh_unmapped_page(),
                     none_page,
                     edge_page + page_size - 8,
                     UINTPTR_MAX & ~(uintptr_t)7,
                     UINTPTR_MAX - 15};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(bad); i++) {
    size_t n = cprof__stack_walk_from(0x1234, bad[i], bad[i] ? bad[i] - 8 : 0,
                                      pcs, CPROF__STACK_BUF);
    CHECK_EQ_INT(n, 1);
    n = cprof__stack_walk_from(0x1234, bad[i], (uintptr_t)on_stack, pcs,
                               CPROF__STACK_BUF);
    CHECK_EQ_INT(n, 1);
  }
  free(on_heap);
  return deep;
}

static void *garbage_thread(void *arg) {
  size_t *deep = arg;
  *deep = garbage_all(2000);
  return NULL;
}

static void test_garbage(void) {
  setup_bad_pages();
  /* Frame-pointer validation first, alone: the fake chains below hold
   * return addresses in no loaded object, which the CFI walk refuses. */
  cprof__stack_set_mode(CPROF__UNWIND_FP);
  /* The main thread has bounds; a new thread has none. */
  size_t deep = garbage_all(3000);
  CHECK(deep > 100);
  size_t deep_thread = 0;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, garbage_thread, &deep_thread) == 0);
  pthread_join(th, NULL);
  CHECK(deep_thread > 100);

  /* A well-formed fake chain on the heap walks to its end, probing. */
  uintptr_t *chain = calloc(64, sizeof(uintptr_t));
  for (size_t i = 0; i + 4 <= 64; i += 4) {
    chain[i] = (uintptr_t)&chain[i + 4];
    chain[i + 1] = 0x400000 + i;
  }
  chain[61] = 0; /* the last record's return address ends the walk */
  uintptr_t pcs[CPROF__STACK_BUF];
  size_t n = cprof__stack_walk_from(0x1000, (uintptr_t)chain,
                                    (uintptr_t)chain, pcs, CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 16);
  CHECK(pcs[0] == 0x1000 && pcs[1] == 0x400000 - 1 && pcs[15] == 0x400000 + 55);
  /* A loop onto itself stops after one frame. */
  chain[0] = (uintptr_t)chain;
  n = cprof__stack_walk_from(0x1000, (uintptr_t)chain, (uintptr_t)chain, pcs,
                             CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 2);
  /* A chain that goes down stops. */
  chain[0] = (uintptr_t)&chain[4];
  chain[4] = (uintptr_t)&chain[2];
  n = cprof__stack_walk_from(0x1000, (uintptr_t)chain, (uintptr_t)chain, pcs,
                             CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 3);
  /* A huge step stops. */
  chain[4] = (uintptr_t)chain + ((uintptr_t)1 << 21);
  n = cprof__stack_walk_from(0x1000, (uintptr_t)chain, (uintptr_t)chain, pcs,
                             CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 3);
  /* A misaligned link stops. */
  chain[4] = (uintptr_t)&chain[8] + 4;
  n = cprof__stack_walk_from(0x1000, (uintptr_t)chain, (uintptr_t)chain, pcs,
                             CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 3);
  /* A record in the last word of a mapping: first word readable, second
   * not. */
  n = cprof__stack_walk_from(0x1000,
                             edge_page + page_size - 8,
                             edge_page, pcs, CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 1);

  /* With unwind tables, the same garbage never faults either, and a return
   * address outside every loaded object ends the walk before it is kept:
   * the well-formed fake chain gives its first frame only. */
  cprof__stack_set_mode(CPROF__UNWIND_AUTO);
  cprof__stack_refresh();
  garbage_all(1000);
  chain[0] = (uintptr_t)&chain[4];
  chain[4] = (uintptr_t)&chain[8];
  n = cprof__stack_walk_from(0x1000, (uintptr_t)chain, (uintptr_t)chain, pcs,
                             CPROF__STACK_BUF);
  CHECK_EQ_INT(n, 1);
  free(chain);
}

/* (c) SIGPROF on a deep stack. */

static uintptr_t sig_pcs[CPROF__STACK_BUF];
static volatile sig_atomic_t sig_n;
static volatile sig_atomic_t at_bottom;
static volatile sig_atomic_t sig_errno_ok = 1;

static void on_prof(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)si;
  if (!at_bottom || sig_n) return;
  int saved = errno;
  errno = 4242;
  size_t n = cprof__stack_walk_ucontext(uc, sig_pcs, CPROF__STACK_BUF);
  if (errno != 4242) sig_errno_ok = 0;
  sig_n = (sig_atomic_t)n;
  errno = saved;
}

NOINLINE static int recurse(int depth) {
  if (depth == 0) {
    at_bottom = 1;
    /* The loop body touches no memory, so no sanitizer runtime (built
     * without frame pointers) runs where the signal lands; the short sleep
     * lets ThreadSanitizer, which defers signals to its interceptors,
     * deliver SIGPROF. */
    while (!sig_n) {
      for (int i = 0; i < 1000000; i++) __asm__ volatile("" ::: "memory");
      usleep(1);
    }
    at_bottom = 0;
    return 0;
  }
  int r = recurse(depth - 1);
  sink_++;
  return r + 1;
}

static void test_sigprof_deep(void) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, &old);
  struct itimerval it = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_PROF, &it, NULL);

  CHECK_EQ_INT(recurse(200), 200);

  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  sigaction(SIGPROF, &old, NULL);

  size_t n = (size_t)sig_n;
  CHECK_EQ_INT(n, CPROF__STACK_BUF);
  CHECK(sig_pcs[CPROF__STACK_BUF - 1] == CPROF__PC_TRUNCATED);
  /* Frame 0 is the interrupted pc, in the bottom frame's spin loop or in
   * usleep; the rest are recursion call sites, after at most a few frames
   * of usleep's own (ThreadSanitizer delivers the signal in its usleep
   * interceptor, whose CPU time is what the timer counted). */
  CHECK(sig_pcs[0] >= 4096);
  size_t first = 1;
  while (first < 5 && first + 1 < n &&
         !pc_in(sig_pcs[first], (void (*)(void))recurse))
    first++;
  CHECK(first < 5);
  for (size_t i = first; i + 1 < n; i++)
    CHECK(pc_in(sig_pcs[i], (void (*)(void))recurse));
  CHECK(sig_errno_ok);
}

/* (d) errno survives; (e) the probe. */

static void test_errno(void) {
  uintptr_t pcs[CPROF__STACK_BUF];
  errno = 777;
  cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
  CHECK_EQ_INT(errno, 777);
  /* Unknown bounds: probes that fail set errno inside. */
  cprof__stack_unregister_thread();
  errno = 778;
  uintptr_t gone = fresh_unmapped_page();
  CHECK_EQ_INT(cprof__stack_walk_from(1, gone, gone, pcs, CPROF__STACK_BUF), 1);
  CHECK_EQ_INT(errno, 778);
  cprof__stack_walk_here(pcs, CPROF__STACK_BUF, 0);
  CHECK_EQ_INT(errno, 778);
  cprof__stack_register_thread();
  errno = 779;
  CHECK(!cprof__stack_readable(0));
  CHECK_EQ_INT(errno, 779);
  CHECK(cprof__stack_readable((uintptr_t)pcs));
  CHECK_EQ_INT(errno, 779);
}

static void test_readable(void) {
  int local = 0;
  int *heap = malloc(64);
  CHECK(cprof__stack_readable((uintptr_t)&local));
  CHECK(cprof__stack_readable((uintptr_t)heap));
  CHECK(cprof__stack_readable((uintptr_t)&rng_state));
  CHECK(cprof__stack_readable((uintptr_t)test_readable));
  CHECK(!cprof__stack_readable(0));
  CHECK(!cprof__stack_readable(8));
  CHECK(!cprof__stack_readable(4096)); /* below mmap_min_addr */
  CHECK(!cprof__stack_readable(none_page));
  CHECK(!cprof__stack_readable(none_page + page_size - 16));
  CHECK(!cprof__stack_readable(UINTPTR_MAX - 4095));
  uintptr_t gone = fresh_unmapped_page();
  CHECK(!cprof__stack_readable(gone));
  /* The last 16 bytes before a PROT_NONE page are readable; 8 bytes later
   * the range straddles into it. */
  CHECK(cprof__stack_readable(edge_page + page_size - 16));
  CHECK(!cprof__stack_readable(edge_page + page_size - 8));
  CHECK(!cprof__stack_readable(edge_page + page_size));
  free(heap);
}

int main(void) {
  cprof__stack_register_thread();
  RUN(test_walk_here);
  RUN(test_walk_here_threads);
  RUN(test_garbage);
  RUN(test_sigprof_deep);
  RUN(test_errno);
  RUN(test_readable);
  return TEST_RESULT();
}
