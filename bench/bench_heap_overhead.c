/*
 * Heap sampling overhead: the whole-process CPU time (user + system, from
 * wait4) and peak RSS of test/progs/plain_heap_churn, run alternately
 * without cprof, with an interposer that only calls through (the floor for
 * any malloc interposer) and with libcprof.so preloaded at the default
 * rate; the same with 1 GiB held live; test/progs/plain_realloc_grow
 * (buffers grown by realloc) without and with cprof; then jemalloc with
 * prof:true (lg_prof_sample:19, the same 512 KiB mean) against plain
 * jemalloc, when libjemalloc.so.2 is installed. Prints the median of each
 * and the ratios; last, the start-up cost alone.
 *   bench_heap_overhead [RUNS] [ITERATIONS_PER_THREAD]
 * The paths come from this binary's location in the build tree.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RUNS 64
#define JEMALLOC "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

typedef struct result {
  double cpu;     /* seconds */
  long rss_kib;
} result;

static char churn[PATH_MAX], grow[PATH_MAX], libcprof[PATH_MAX],
    passthrough[PATH_MAX];
static const char *prog = churn; /* the program run() runs */
static const char *iterations = "20000000";
static const char *hold_mib; /* live heap held while churning, or NULL */

static int run(const char *preload, const char *malloc_conf, result *out) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (preload) setenv("LD_PRELOAD", preload, 1);
    else unsetenv("LD_PRELOAD");
    if (malloc_conf) setenv("MALLOC_CONF", malloc_conf, 1);
    else unsetenv("MALLOC_CONF");
    execl(prog, prog, iterations, hold_mib, (char *)NULL);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return -1;
  out->cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
             (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  out->rss_kib = ru.ru_maxrss;
  return 0;
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void medians(const result *r, int n, double *cpu, double *rss) {
  double c[MAX_RUNS], m[MAX_RUNS];
  for (int i = 0; i < n; i++) {
    c[i] = r[i].cpu;
    m[i] = (double)r[i].rss_kib;
  }
  qsort(c, (size_t)n, sizeof *c, by_double);
  qsort(m, (size_t)n, sizeof *m, by_double);
  *cpu = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
  *rss = n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2;
}

typedef struct config {
  const char *name, *preload, *malloc_conf;
} config;

/* The median of the per-round ratios of configuration k to the first:
 * each round runs every configuration back to back, so a ratio within a
 * round cancels the machine's slower drifts, which move whole rounds. */
static double paired_ratio(result r[][MAX_RUNS], int k, int runs) {
  double q[MAX_RUNS];
  for (int i = 0; i < runs; i++) q[i] = r[k][i].cpu / r[0][i].cpu;
  qsort(q, (size_t)runs, sizeof *q, by_double);
  return runs % 2 ? q[runs / 2] : (q[runs / 2 - 1] + q[runs / 2]) / 2;
}

/* Runs the configurations in turn, runs times over; prints each median,
 * its ratio to the first's, and the median of the per-round ratios. */
static int compare(const config *c, int n, int runs) {
  static result r[4][MAX_RUNS];
  for (int i = 0; i < runs; i++) {
    for (int k = 0; k < n; k++) {
      if (run(c[k].preload, c[k].malloc_conf, &r[k][i])) {
        fprintf(stderr, "bench_heap_overhead: a run of %s failed\n", prog);
        return -1;
      }
    }
  }
  double cpu0 = 0, rss0 = 0;
  for (int k = 0; k < n; k++) {
    double cpu, rss;
    medians(r[k], runs, &cpu, &rss);
    if (k == 0) {
      cpu0 = cpu;
      rss0 = rss;
      printf("%-26s cpu %.4f s  maxrss %.1f MiB\n", c[k].name, cpu, rss / 1024);
    } else {
      printf("%-26s cpu %.4f s  maxrss %.1f MiB  cpu ratio %.3f (paired %.3f)  "
             "rss %+.1f MiB\n",
             c[k].name, cpu, rss / 1024, cpu / cpu0, paired_ratio(r, k, runs),
             (rss - rss0) / 1024);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 9;
  if (runs < 1 || runs > MAX_RUNS) runs = 9;
  if (argc > 2) iterations = argv[2];
  char self[PATH_MAX - 64];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  *slash = 0; /* BUILD/bench */
  slash = strrchr(self, '/');
  *slash = 0; /* BUILD */
  snprintf(churn, sizeof churn, "%s/test/progs/plain_heap_churn", self);
  snprintf(grow, sizeof grow, "%s/test/progs/plain_realloc_grow", self);
  snprintf(libcprof, sizeof libcprof, "%s/libcprof.so", self);
  snprintf(passthrough, sizeof passthrough, "%s/bench/libpassthrough_malloc.so",
           self);
  if (access(churn, X_OK) || access(grow, X_OK) || access(libcprof, R_OK) ||
      access(passthrough, R_OK)) {
    fprintf(stderr, "bench_heap_overhead: %s, %s, %s or %s is missing\n",
            churn, grow, libcprof, passthrough);
    return 1;
  }
  printf("malloc/free churn, 2 threads x %s iterations, %d alternating runs, "
         "medians\n", iterations, runs);
  const config glibc[] = {
      {"glibc", NULL, NULL},
      {"glibc + empty interposer", passthrough, NULL},
      {"glibc + cprof", libcprof, NULL},
  };
  if (compare(glibc, 3, runs)) return 1;
  /* A large live heap: about 2,000 sampled objects stay live (1 GiB at
   * 512 KiB), so free's filter is no longer nearly empty. */
  /* Faulting in the held gigabyte costs seconds of system time here, so
   * the churn runs longer and fewer times. */
  const char *work = iterations;
  iterations = "60000000";
  hold_mib = "1024";
  int hold_runs = runs / 3 < 3 ? 3 : runs / 3;
  printf("\nthe same, %s iterations, with 1 GiB held live in 256-byte "
         "blocks, %d runs\n", iterations, hold_runs);
  if (compare(glibc, 3, hold_runs)) return 1;
  hold_mib = NULL;
  /* Buffers grown by realloc past the rate: nearly every such realloc is
   * sampled, and glibc grows them without a copy (mremap), so a copy of
   * cprof's for each sampled one would show here. */
  prog = grow;
  iterations = "20000";
  printf("\nrealloc growth, 2 threads x %s buffers grown from 64 B to 1 MiB "
         "by doubling, %d alternating runs, medians\n", iterations, runs);
  const config grown[] = {{"glibc", NULL, NULL},
                          {"glibc + cprof", libcprof, NULL}};
  if (compare(grown, 2, runs)) return 1;
  prog = churn;
  iterations = work;
  if (access(JEMALLOC, R_OK) == 0) {
    const config je[] = {
        {"jemalloc", JEMALLOC, NULL},
        {"jemalloc prof:true", JEMALLOC, "prof:true,lg_prof_sample:19"},
    };
    if (compare(je, 2, runs)) return 1;
  } else {
    printf("jemalloc: %s not installed (apt-get install libjemalloc2)\n",
           JEMALLOC);
  }
  /* Start-up alone: the same program with nothing to do. */
  iterations = "0";
  printf("\nstart-up (the churn program with 0 iterations), %d alternating runs, "
         "medians\n", 3 * runs);
  const config start[] = {{"glibc", NULL, NULL}, {"glibc + cprof", libcprof, NULL}};
  int rc = compare(start, 2, 3 * runs > MAX_RUNS ? MAX_RUNS : 3 * runs);
  iterations = work;
  return rc ? 1 : 0;
}
