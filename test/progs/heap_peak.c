/*
 * The peak heap profile: the live heap rises to 500 MB (peak_site, in
 * 256 KiB blocks that are never touched, so they cost no memory), falls
 * to 50 MB and ends at 80 MB (end_site adds 30 MB):
 *   heap_peak OUTDIR
 * writes OUTDIR/heap.pb.gz, OUTDIR/heap_peak.pb.gz and, after
 * cprof_heap_peak_reset(), OUTDIR/heap_peak_reset.pb.gz. The peak is held
 * for 300 ms, several of the tracker's 50 ms checks. Then it allocates
 * nothing for a second, and then 20 MB: OUTDIR/wakes.txt has how often
 * the tracker thread (cprof-heappeak) went to sleep in either (its
 * voluntary context switches), and OUTDIR/heap_peak_burst.pb.gz the peak
 * after the 20 MB.
 *   heap_peak OUTDIR profilez|write
 * instead configures a dump of the heap profile alone (to stderr), which
 * enables profilez, and writes OUTDIR/profilez.txt (or, asking through
 * cprof_profile_write_file, OUTDIR/write.txt): whether the tracker ran
 * before heap_peak was first asked for and after.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <time.h>

#include "cprof.h"

#define BLOCK (256 * 1024)
#define MB (1024 * 1024)

static void *peak_blocks[500 * MB / BLOCK];
static void *end_blocks[30 * MB / BLOCK];

__attribute__((noinline)) static void *peak_site(void) { return malloc(BLOCK); }
__attribute__((noinline)) static void *end_site(void) { return malloc(BLOCK); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int write(const char *dir, const char *name, const char *file) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.pb.gz", dir, file);
  int err = cprof_profile_write_file(name, 0, path);
  if (err) fprintf(stderr, "%s: %s\n", name, cprof_strerror(err));
  return err;
}

/* The tracker thread's voluntary context switches, or -1. */
static long tracker_switches(void) {
  DIR *d = opendir("/proc/self/task");
  long n = -1;
  for (struct dirent *e; d && n < 0 && (e = readdir(d));) {
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    bool ours = f && fgets(line, sizeof line, f) &&
                strcmp(line, "cprof-heappeak\n") == 0;
    if (f) fclose(f);
    if (!ours) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    if (!(f = fopen(path, "r"))) continue;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1) break;
    fclose(f);
  }
  if (d) closedir(d);
  return n;
}

/* A dump of heap alone starts no tracker; profilez's first request for
 * heap_peak does, and so does cprof_profile_write's (by_write): the result
 * goes to DIR/profilez.txt or DIR/write.txt. */
static int ask_mode(const char *dir, bool by_write) {
  char why[256];
  if (cprof_dump_configure("heap", why, sizeof why) != 0) {
    fprintf(stderr, "dump: %s\n", why);
    return 1;
  }
  long before = tracker_switches();
  char path[4096];
  snprintf(path, sizeof path, "%s/heap_peak.txt", dir);
  cprof_buf b = {0};
  int err = by_write ? cprof_profile_write_file("heap_peak", 1, path)
                     : cprof_profilez("heap_peak", 1, 0, &b);
  cprof_buf_free(&b);
  /* The thread names itself as it starts. */
  long after = -1;
  for (int i = 0; i < 100 && (after = tracker_switches()) < 0; i++)
    sleep_ms(10);
  snprintf(path, sizeof path, "%s/%s.txt", dir, by_write ? "write" : "profilez");
  FILE *w = fopen(path, "w");
  if (!w || err) return 1;
  fprintf(w, "before %s\nafter %s\n", before < 0 ? "none" : "running",
          after < 0 ? "none" : "running");
  return fclose(w) != 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[2], "profilez") == 0)
    return ask_mode(argv[1], false);
  if (argc == 3 && strcmp(argv[2], "write") == 0)
    return ask_mode(argv[1], true);
  if (argc != 2) return 2;
  cprof_heap_set_rate(128 * 1024); /* a few percent of sampling error */
  cprof_enable(); /* the peak is kept from here */
  size_t n = sizeof peak_blocks / sizeof *peak_blocks;
  for (size_t i = 0; i < n; i++)
    if (!(peak_blocks[i] = peak_site())) return 1;
  sleep_ms(300);
  for (size_t i = n / 10; i < n; i++) free(peak_blocks[i]); /* 50 MB left */
  sleep_ms(100);
  for (size_t i = 0; i < sizeof end_blocks / sizeof *end_blocks; i++)
    if (!(end_blocks[i] = end_site())) return 1;
  sleep_ms(100);
  if (write(argv[1], "heap", "heap") || write(argv[1], "heap_peak", "heap_peak"))
    return 1;
  cprof_heap_peak_reset();
  if (write(argv[1], "heap_peak", "heap_peak_reset")) return 1;
  /* Idle: the tracker has no sample to look at. */
  sleep_ms(200);
  long before = tracker_switches();
  sleep_ms(1000);
  long idle = tracker_switches();
  /* 20 MB: samples wake it. */
  static void *burst[20 * MB / BLOCK];
  for (size_t i = 0; i < sizeof burst / sizeof *burst; i++)
    if (!(burst[i] = end_site())) return 1;
  sleep_ms(300);
  long burst_done = tracker_switches();
  char path[4096];
  snprintf(path, sizeof path, "%s/wakes.txt", argv[1]);
  FILE *w = fopen(path, "w");
  if (!w || before < 0) return 1;
  fprintf(w, "idle %ld\nburst %ld\n", idle - before, burst_done - idle);
  fclose(w);
  if (write(argv[1], "heap_peak", "heap_peak_burst")) return 1;
  for (size_t i = 0; i < sizeof burst / sizeof *burst; i++) free(burst[i]);
  for (size_t i = 0; i < n / 10; i++) free(peak_blocks[i]);
  for (size_t i = 0; i < sizeof end_blocks / sizeof *end_blocks; i++)
    free(end_blocks[i]);
  return 0;
}
