/*
 * The malloc family's libc semantics, checked case by case. Built twice:
 * linked with cprof (heap_semantics) and without it (plain_heap_semantics,
 * also run with libcprof.so preloaded). Each case prints one line of what
 * it observed, with no addresses, so test/e2e/heap_semantics.sh can diff
 * the runs: whatever the allocator underneath does, cprof must do the same.
 * Cases that the C standard or POSIX pin down are also checked here, and a
 * failure exits non-zero.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A failed realloc leaves its block valid; gcc cannot know it failed. */
#pragma GCC diagnostic ignored "-Wuse-after-free"

static int failures;

#define EXPECT(cond, what)                                    \
  do {                                                        \
    if (!(cond)) {                                            \
      printf("FAIL %s: %s (line %d)\n", what, #cond, __LINE__); \
      failures++;                                             \
    }                                                         \
  } while (0)

/* Calls that may not touch errno on success run with this in errno. */
#define CANARY 4242

static volatile size_t huge = SIZE_MAX;
static volatile size_t half = SIZE_MAX / 2 + 1;

static int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static void case_malloc(void) {
  errno = CANARY;
  char *p = malloc(100);
  EXPECT(p && errno == CANARY, "malloc(100)");
  memset(p, 0xab, 100);
  free(p);
  EXPECT(errno == CANARY, "free keeps errno");
  void *z = malloc(0);
  printf("malloc(0): null=%d errno=%d\n", z == NULL, errno);
  free(z);
  free(NULL);
  EXPECT(errno == CANARY, "free(NULL)");
  errno = 0;
  void *h = malloc(huge);
  printf("malloc(SIZE_MAX): null=%d errno=%d\n", h == NULL, errno);
  EXPECT(h == NULL && errno == ENOMEM, "malloc(SIZE_MAX)");
}

static void case_calloc(void) {
  /* Dirty some memory first so a non-zeroing calloc would show. */
  for (int i = 0; i < 64; i++) {
    char *d = malloc(4000);
    memset(d, 0x5a, 4000);
    free(d);
  }
  errno = CANARY;
  unsigned char *p = calloc(1000, 4);
  EXPECT(p && errno == CANARY, "calloc(1000, 4)");
  int zero = 1;
  for (int i = 0; p && i < 4000; i++) zero &= p[i] == 0;
  EXPECT(zero, "calloc zeroes");
  free(p);
  errno = 0;
  void *o = calloc(half, 2);
  printf("calloc overflow: null=%d errno=%d\n", o == NULL, errno);
  EXPECT(o == NULL && errno == ENOMEM, "calloc overflow");
  errno = 0;
  o = calloc(huge / 3, 4);
  EXPECT(o == NULL && errno == ENOMEM, "calloc overflow, odd factors");
  void *z = calloc(0, 10);
  printf("calloc(0, 10): null=%d\n", z == NULL);
  free(z);
}

static void case_realloc(void) {
  errno = CANARY;
  char *p = realloc(NULL, 16);
  EXPECT(p && errno == CANARY, "realloc(NULL, 16)");
  memcpy(p, "0123456789abcde", 16);
  p = realloc(p, 100000);
  EXPECT(p && memcmp(p, "0123456789abcde", 16) == 0, "realloc grows, keeps");
  EXPECT(errno == CANARY, "realloc keeps errno");
  p = realloc(p, 8);
  EXPECT(p && memcmp(p, "01234567", 8) == 0, "realloc shrinks, keeps");
  errno = 0;
  char *q = realloc(p, huge);
  printf("realloc(p, SIZE_MAX): null=%d errno=%d\n", q == NULL, errno);
  EXPECT(q == NULL && errno == ENOMEM && memcmp(p, "01234567", 8) == 0,
         "failed realloc leaves the block");
  errno = CANARY;
  q = realloc(p, 0);
  printf("realloc(p, 0): null=%d errno=%d\n", q == NULL, errno == CANARY ? 0 : errno);
  free(q);
  /* Many sizes through one block, crossing the mmap threshold. */
  char *r = NULL;
  for (size_t n = 1; n < ((size_t)1 << 22); n = n * 3 + 1) {
    char *nr = realloc(r, n);
    EXPECT(nr != NULL, "realloc ladder");
    if (!nr) break;
    nr[n - 1] = 1;
    r = nr;
  }
  free(r);
}

static void case_reallocarray(void) {
  errno = CANARY;
  int *p = reallocarray(NULL, 10, sizeof(int));
  EXPECT(p && errno == CANARY, "reallocarray(NULL, 10, 4)");
  for (int i = 0; i < 10; i++) p[i] = i;
  p = reallocarray(p, 1000, sizeof(int));
  EXPECT(p && p[9] == 9, "reallocarray grows, keeps");
  errno = 0;
  int *q = reallocarray(p, half, 2);
  printf("reallocarray overflow: null=%d errno=%d\n", q == NULL, errno);
  EXPECT(q == NULL && errno == ENOMEM && p[9] == 9, "reallocarray overflow");
  free(p);
}

static void case_posix_memalign(void) {
  void *p = (void *)1;
  errno = CANARY;
  int rc = posix_memalign(&p, 3, 16);
  printf("posix_memalign(3): rc=%d errno_kept=%d out_kept=%d\n", rc,
         errno == CANARY, p == (void *)1);
  EXPECT(rc == EINVAL && errno == CANARY, "posix_memalign(3)");
  rc = posix_memalign(&p, 4, 16);
  EXPECT(rc == EINVAL && errno == CANARY, "posix_memalign(4)");
  rc = posix_memalign(&p, 0, 16);
  EXPECT(rc == EINVAL && errno == CANARY, "posix_memalign(0)");
  rc = posix_memalign(&p, 64, 100);
  EXPECT(rc == 0 && aligned(p, 64) && errno == CANARY, "posix_memalign(64)");
  free(p);
  rc = posix_memalign(&p, 65536, 1000);
  EXPECT(rc == 0 && aligned(p, 65536), "posix_memalign(65536)");
  free(p);
  rc = posix_memalign(&p, 64, huge - 4096);
  printf("posix_memalign(64, huge): rc=%d\n", rc);
  EXPECT(rc == ENOMEM, "posix_memalign(huge)");
}

static void case_aligned(void) {
  errno = CANARY;
  void *p = aligned_alloc(64, 256);
  EXPECT(p && aligned(p, 64) && errno == CANARY, "aligned_alloc(64, 256)");
  free(p);
  errno = CANARY;
  p = aligned_alloc(3, 16);
  printf("aligned_alloc(3, 16): null=%d errno=%d\n", p == NULL,
         errno == CANARY ? 0 : errno);
  free(p);
  errno = CANARY;
  p = aligned_alloc(half + half / 2, 16);
  printf("aligned_alloc(huge align): null=%d errno=%d\n", p == NULL,
         errno == CANARY ? 0 : errno);
  free(p);
  errno = CANARY;
  p = memalign(4096, 100);
  EXPECT(p && aligned(p, 4096) && errno == CANARY, "memalign(4096)");
  free(p);
  errno = CANARY;
  p = memalign(half + 1, 16);
  printf("memalign(huge align): null=%d errno=%d\n", p == NULL,
         errno == CANARY ? 0 : errno);
  EXPECT(p == NULL && errno == EINVAL, "memalign(bad alignment)");
  free(p);
  errno = CANARY;
  p = memalign(48, 16);
  printf("memalign(48): null=%d errno=%d\n", p == NULL, errno == CANARY ? 0 : errno);
  free(p);
  long page = sysconf(_SC_PAGESIZE);
  errno = CANARY;
  p = valloc(100);
  EXPECT(p && aligned(p, (size_t)page), "valloc");
  printf("valloc: errno_kept=%d\n", errno == CANARY);
  free(p);
  p = pvalloc(100);
  EXPECT(p && aligned(p, (size_t)page) && malloc_usable_size(p) >= (size_t)page,
         "pvalloc rounds to a page");
  free(p);
}

static void case_usable_size(void) {
  EXPECT(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
  for (size_t n = 1; n < 100000; n = n * 2 + 3) {
    char *p = malloc(n);
    size_t u = malloc_usable_size(p);
    EXPECT(u >= n, "malloc_usable_size >= n");
    memset(p, 1, u);
    free(p);
  }
}

typedef struct handoff {
  void *blocks[1000];
} handoff;

static void *alloc_many(void *arg) {
  handoff *h = arg;
  for (int i = 0; i < 1000; i++) {
    h->blocks[i] = malloc((size_t)(i % 50) * 40 + 1);
    memset(h->blocks[i], 7, 1);
  }
  return NULL;
}

static void case_threads(void) {
  /* Blocks allocated on one thread and freed on another. */
  handoff *h = calloc(4, sizeof *h);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, alloc_many, &h[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 1000; j++) free(h[i].blocks[j]);
  free(h);
  printf("threads: ok\n");
}

static void case_fork(void) {
  char *p = malloc(1000);
  pid_t pid = fork();
  if (pid == 0) {
    char *q = malloc(5000);
    free(p);
    free(q);
    for (int i = 0; i < 10000; i++) free(malloc((size_t)i));
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child allocates");
  free(p);
  printf("fork: child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

int main(void) {
  case_malloc();
  case_calloc();
  case_realloc();
  case_reallocarray();
  case_posix_memalign();
  case_aligned();
  case_usable_size();
  case_threads();
  case_fork();
  printf("failures: %d\n", failures);
  return failures ? 1 : 0;
}
