/*
 * A C program as distributions build them: -O2, no frame-pointer flags.
 * Its hot code is a qsort comparator (reached through libc, which has no
 * frame pointers either), and its allocations go through strdup, so a
 * frame-pointer walk loses both the comparator's caller and strdup's.
 * Runs for about the CPU seconds given (default 1.5), or, given -n N, for
 * exactly N rounds of work (for benchmarks); prints the checksum so that
 * nothing is optimised away.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct record {
  uint64_t key[8];
  char *name;
} record;

static volatile uint64_t mix_rounds = 24;

/* The comparator does real work per call, so that most CPU time is in it,
 * under qsort, under sort_records. */
__attribute__((noinline)) static int compare_records(const void *a,
                                                     const void *b) {
  const record *x = a, *y = b;
  uint64_t hx = 0, hy = 0;
  for (uint64_t r = 0; r < mix_rounds; r++)
    for (int i = 0; i < 8; i++) {
      hx = (hx ^ x->key[i]) * 0x100000001b3ull + r;
      hy = (hy ^ y->key[i]) * 0x100000001b3ull + r;
    }
  return (hx > hy) - (hx < hy);
}

/* Returns a value computed after the sort, so that the call to qsort is
 * not a tail call and sort_records keeps a frame of its own. */
__attribute__((noinline)) static uint64_t sort_records(record *v, size_t n) {
  qsort(v, n, sizeof *v, compare_records);
  return v[0].key[1];
}

/* Every name is a strdup of a formatted buffer: the heap profile must
 * charge these bytes to make_names, not to strdup. */
__attribute__((noinline)) static void make_names(record *v, size_t n,
                                                 unsigned round) {
  char buf[96];
  for (size_t i = 0; i < n; i++) {
    snprintf(buf, sizeof buf, "record-%u-%zu-%064llx", round, i,
             (unsigned long long)v[i].key[0]);
    free(v[i].name);
    v[i].name = strdup(buf);
  }
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.5;
  long fixed_rounds = -1;
  if (argc > 2 && strcmp(argv[1], "-n") == 0) fixed_rounds = atol(argv[2]);
  enum { N = 4000 };
  record *v = calloc(N, sizeof *v);
  if (!v) return 1;
  uint64_t x = 88172645463325252ull, sum = 0;
  unsigned round = 0;
  double t0 = cpu_seconds();
  while (fixed_rounds >= 0 ? (long)round < fixed_rounds
                           : cpu_seconds() - t0 < seconds) {
    for (size_t i = 0; i < N; i++)
      for (int k = 0; k < 8; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i].key[k] = x;
      }
    make_names(v, N, round++);
    sum += sort_records(v, N) + (unsigned char)v[N - 1].name[7];
  }
  printf("%llu %u\n", (unsigned long long)sum, round);
  for (size_t i = 0; i < N; i++) free(v[i].name);
  free(v);
  return 0;
}
