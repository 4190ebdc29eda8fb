/*
 * The peak heap profile: the live heap rises to 500 MB (peak_site, in
 * 256 KiB blocks that are never touched, so they cost no memory), falls
 * to 50 MB and ends at 80 MB (end_site adds 30 MB):
 *   heap_peak OUTDIR
 * writes OUTDIR/heap.pb.gz, OUTDIR/heap_peak.pb.gz and, after
 * cprof_heap_peak_reset(), OUTDIR/heap_peak_reset.pb.gz. The peak is held
 * for 300 ms, several of the tracker's 50 ms checks.
 */
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv) {
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
  for (size_t i = 0; i < n / 10; i++) free(peak_blocks[i]);
  for (size_t i = 0; i < sizeof end_blocks / sizeof *end_blocks; i++)
    free(end_blocks[i]);
  return 0;
}
