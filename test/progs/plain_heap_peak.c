/*
 * An unmodified program whose heap peaks and falls, for dumps of the peak
 * heap: 500 MB in 256 KiB blocks that are never touched, so they cost no
 * memory (peak_site), held for 300 ms, then freed but for 50 MB; then
 * 30 MB more (end_site), held to the end. While the peak is held it
 * prints the names of its threads (/proc/self/task/N/comm), one a line,
 * so that a test sees which of cprof's threads run.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

static void print_threads(void) {
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[64];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(name, sizeof name, f)) fputs(name, stdout);
    if (f) fclose(f);
  }
  if (d) closedir(d);
  fflush(stdout);
}

int main(void) {
  size_t n = sizeof peak_blocks / sizeof *peak_blocks;
  for (size_t i = 0; i < n; i++)
    if (!(peak_blocks[i] = peak_site())) return 1;
  print_threads();
  sleep_ms(300);
  for (size_t i = n / 10; i < n; i++) free(peak_blocks[i]);
  for (size_t i = 0; i < sizeof end_blocks / sizeof *end_blocks; i++)
    if (!(end_blocks[i] = end_site())) return 1;
  sleep_ms(100);
  return 0;
}
