/*
 * A program that asks the cprof in its process for its heap sampling rate
 * (cprof_heap_set_rate(-1)) and prints "rate N" ("rate none" when there
 * is no cprof). With "ask FILE" it then asks for its heap profile, as a
 * program's own admin channel would (cprof_profilez), prints the rate
 * again, keeps 100 MB of 100 KB blocks from kept_site, and writes the
 * heap profile's text (debug=1) to FILE. "write FILE" asks the first time
 * with cprof_profile_write_file instead (into FILE, overwritten after);
 * "setrate FILE" sets a rate of 65536 first, then does what "ask" does.
 *
 * Built unmodified (plain_heap_rate: the functions are looked up with
 * dlsym, to be found only when cprof is preloaded) and linked with cprof
 * (linked_heap_rate: direct calls).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof.h"

typedef long (*set_rate_fn)(long);
typedef int (*profilez_fn)(const char *, int, int, cprof_buf *);
typedef void (*buf_free_fn)(cprof_buf *);
typedef int (*write_file_fn)(const char *, int, const char *);

#ifdef LINKED_HEAP_RATE
static set_rate_fn set_rate = cprof_heap_set_rate;
static profilez_fn profilez = cprof_profilez;
static buf_free_fn buf_free = cprof_buf_free;
static write_file_fn write_file = cprof_profile_write_file;
static void look_up(void) {}
#else
static set_rate_fn set_rate;
static profilez_fn profilez;
static buf_free_fn buf_free;
static write_file_fn write_file;
static void look_up(void) {
  set_rate = (set_rate_fn)dlsym(RTLD_DEFAULT, "cprof_heap_set_rate");
  profilez = (profilez_fn)dlsym(RTLD_DEFAULT, "cprof_profilez");
  buf_free = (buf_free_fn)dlsym(RTLD_DEFAULT, "cprof_buf_free");
  write_file = (write_file_fn)dlsym(RTLD_DEFAULT, "cprof_profile_write_file");
}
#endif

#define BLOCK (100 * 1024)
#define KEPT 1000
static void *kept[KEPT];

__attribute__((noinline)) static void *kept_site(void) {
  void *p = malloc(BLOCK);
  if (p) memset(p, 1, 64);
  return p;
}

static void print_rate(void) {
  if (set_rate)
    printf("rate %ld\n", set_rate(-1));
  else
    printf("rate none\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  look_up();
  /* Some allocations before the question, as any program makes. */
  for (int i = 0; i < 200; i++) free(malloc(BLOCK));
  print_rate();
  if (argc < 3) return 0;
  bool by_write = strcmp(argv[1], "write") == 0;
  bool set_first = strcmp(argv[1], "setrate") == 0;
  if (!by_write && !set_first && strcmp(argv[1], "ask") != 0) return 0;
  if (!profilez || !buf_free || !write_file) return 2;
  if (set_first) set_rate(65536);
  cprof_buf buf = {0};
  int err = by_write ? write_file("heap", 0, argv[2])
                     : profilez("heap", 0, 0, &buf);
  buf_free(&buf);
  if (err) {
    fprintf(stderr, "profilez: %d\n", err);
    return 3;
  }
  print_rate();
  for (int i = 0; i < KEPT; i++)
    if (!(kept[i] = kept_site())) return 4;
  memset(&buf, 0, sizeof buf);
  if (profilez("heap", 1, 0, &buf) != 0) return 5;
  FILE *f = fopen(argv[2], "w");
  if (!f || fwrite(buf.data, 1, buf.len, f) != buf.len || fclose(f) != 0)
    return 6;
  buf_free(&buf);
  for (int i = 0; i < KEPT; i++) free(kept[i]);
  return 0;
}
