/*
 * What cprof takes of a process's address space, for test/e2e/reserve.sh.
 * Built twice: linked with cprof, and as plain_reserve, without it, to be
 * run with it preloaded or not, which finds the writer with dlsym:
 *   plain_reserve vmsize           prints "vmsize KIB" (VmSize at start)
 *   plain_reserve alloc            mallocs 1 MiB blocks until one fails,
 *                                  prints "allocated MIB"
 *   plain_reserve recurse KIB      recurses through KIB of stack, prints
 *                                  "recursed KIB"
 *   plain_reserve live N SIZE OUT  holds N blocks of SIZE bytes, writes the
 *                                  heap profile to OUT (debug=0 when OUT
 *                                  ends in .pb.gz, else debug=1) through
 *                                  cprof_profile_write_file (found with
 *                                  dlsym), prints "held N"
 *   plain_reserve fill SIZE OUT    mallocs blocks of SIZE bytes (at least
 *                                  16) until one fails, frees the last
 *                                  eighth of them, writes the profile as
 *                                  live does, prints "held N"
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof.h"

static long vmsize_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) kib = strtol(line + 7, NULL, 10);
  if (f) fclose(f);
  return kib;
}

#define BLOCK ((size_t)1 << 20)
#define MAX_BLOCKS 16384

static int alloc_all(void) {
  static void *blocks[MAX_BLOCKS];
  size_t n = 0;
  while (n < MAX_BLOCKS && (blocks[n] = malloc(BLOCK)) != NULL) n++;
  printf("allocated %zu\n", n);
  while (n) free(blocks[--n]);
  return 0;
}

/* Each level holds 1 KiB of stack, written so that it is really used. */
__attribute__((noinline)) static long recurse(long kib) {
  volatile char frame[1024];
  memset((char *)frame, (int)kib, sizeof frame);
  if (kib <= 1) return frame[0];
  return recurse(kib - 1) + frame[100];
}

typedef int (*write_file_fn)(const char *, int, const char *);

static write_file_fn find_writer(void) {
#ifdef RESERVE_PLAIN
  write_file_fn write_file =
      (write_file_fn)dlsym(RTLD_DEFAULT, "cprof_profile_write_file");
  if (!write_file) fprintf(stderr, "plain_reserve: cprof is not loaded\n");
  return write_file;
#else
  return cprof_profile_write_file;
#endif
}

static int write_heap(write_file_fn write_file, const char *out) {
  size_t len = strlen(out);
  int debug = len > 6 && strcmp(out + len - 6, ".pb.gz") == 0 ? 0 : 1;
  int err = write_file("heap", debug, out);
  if (err) fprintf(stderr, "plain_reserve: writing the profile: %d\n", err);
  return err;
}

__attribute__((noinline)) static int fill(long size, const char *out) {
  write_file_fn write_file = find_writer();
  if (!write_file || size < 16) return 1;
  /* The blocks are a list through their first word. */
  void *head = NULL;
  long n = 0;
  for (void *p; (p = malloc((size_t)size)) != NULL; n++) {
    *(void **)p = head;
    head = p;
  }
  for (long i = 0; i < n / 8; i++) {
    void *next = *(void **)head;
    free(head);
    head = next;
  }
  n -= n / 8;
  if (write_heap(write_file, out)) return 1;
  printf("held %ld\n", n);
  while (head) {
    void *next = *(void **)head;
    free(head);
    head = next;
  }
  return 0;
}

static int hold_live(long n, long size, const char *out) {
  write_file_fn write_file = find_writer();
  if (!write_file) return 1;
  void **v = calloc((size_t)n, sizeof *v);
  if (!v) return 1;
  for (long i = 0; i < n; i++) {
    v[i] = malloc((size_t)size);
    if (!v[i]) {
      fprintf(stderr, "plain_reserve: malloc failed at %ld\n", i);
      return 1;
    }
    memset(v[i], 1, 8);
  }
  if (write_heap(write_file, out)) return 1;
  printf("held %ld\n", n);
  for (long i = 0; i < n; i++) free(v[i]);
  free(v);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "vmsize") == 0) {
    printf("vmsize %ld\n", vmsize_kib());
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "alloc") == 0) return alloc_all();
  if (argc == 3 && strcmp(argv[1], "recurse") == 0) {
    long kib = atol(argv[2]);
    long r = recurse(kib);
    printf("recursed %ld\n", kib + (r & 0));
    return 0;
  }
  if (argc == 4 && strcmp(argv[1], "fill") == 0)
    return fill(atol(argv[2]), argv[3]);
  if (argc == 5 && strcmp(argv[1], "live") == 0)
    return hold_live(atol(argv[2]), atol(argv[3]), argv[4]);
  fprintf(stderr, "usage: %s vmsize | alloc | recurse KIB | live N SIZE OUT | "
          "fill SIZE OUT\n",
          argv[0]);
  return 2;
}
