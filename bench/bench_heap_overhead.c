/*
 * Heap sampling overhead: the whole-process CPU time (user + system, from
 * wait4) and peak RSS of test/progs/plain_heap_churn, run alternately
 * without cprof and with libcprof.so preloaded at the default rate; then
 * the same for jemalloc with prof:true (lg_prof_sample:19, the same 512 KiB
 * mean) against plain jemalloc, when libjemalloc.so.2 is installed. Prints
 * the median of each and the ratios.
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

static char churn[PATH_MAX], libcprof[PATH_MAX];
static const char *iterations = "20000000";

static int run(const char *preload, const char *malloc_conf, result *out) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (preload) setenv("LD_PRELOAD", preload, 1);
    else unsetenv("LD_PRELOAD");
    if (malloc_conf) setenv("MALLOC_CONF", malloc_conf, 1);
    else unsetenv("MALLOC_CONF");
    execl(churn, churn, iterations, (char *)NULL);
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

/* Runs a and b alternately; prints both medians and b / a. */
static int compare(const char *name_a, const char *pre_a, const char *conf_a,
                   const char *name_b, const char *pre_b, const char *conf_b,
                   int runs) {
  result a[MAX_RUNS], b[MAX_RUNS];
  for (int i = 0; i < runs; i++) {
    if (run(pre_a, conf_a, &a[i]) || run(pre_b, conf_b, &b[i])) {
      fprintf(stderr, "bench_heap_overhead: a run of %s failed\n", churn);
      return -1;
    }
  }
  double ca, ra, cb, rb;
  medians(a, runs, &ca, &ra);
  medians(b, runs, &cb, &rb);
  printf("%-22s cpu %.3f s  maxrss %.1f MiB\n", name_a, ca, ra / 1024);
  printf("%-22s cpu %.3f s  maxrss %.1f MiB\n", name_b, cb, rb / 1024);
  printf("%-22s cpu ratio %.3f  rss ratio %.3f  (+%.1f MiB)\n", "  => ratio", cb / ca,
         rb / ra, (rb - ra) / 1024);
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
  snprintf(libcprof, sizeof libcprof, "%s/libcprof.so", self);
  if (access(churn, X_OK) || access(libcprof, R_OK)) {
    fprintf(stderr, "bench_heap_overhead: %s or %s is missing\n", churn, libcprof);
    return 1;
  }
  printf("malloc/free churn, 2 threads x %s iterations, %d alternating runs, "
         "medians\n", iterations, runs);
  if (compare("glibc", NULL, NULL, "glibc + cprof", libcprof, NULL, runs))
    return 1;
  if (access(JEMALLOC, R_OK) == 0) {
    if (compare("jemalloc", JEMALLOC, NULL, "jemalloc prof:true", JEMALLOC,
                "prof:true,lg_prof_sample:19", runs))
      return 1;
  } else {
    printf("jemalloc: %s not installed (apt-get install libjemalloc2)\n",
           JEMALLOC);
  }
  return 0;
}
