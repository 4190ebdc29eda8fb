/*
 * Holds known live sets and writes heap profiles:
 *   heap_live OUT_PREFIX
 * hold_pages() keeps 80 MiB in 4 KiB objects, hold_records() 20 MiB in
 * 100-byte objects, and churn() allocates and frees 64 MiB in 1 KiB
 * objects (allocated, never live). Writes OUT_PREFIX.heap.pb.gz,
 * OUT_PREFIX.allocs.pb.gz, OUT_PREFIX.heap.txt and OUT_PREFIX.allocs.txt
 * and prints the truth as "truth FUNCTION BYTES" lines (each function's
 * bytes include the array of pointers it allocates to hold its objects). Built twice: linked
 * with cprof, and as plain_heap_live for LD_PRELOAD, which finds the writer
 * with dlsym.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof.h"

#define PAGES_BYTES ((size_t)80 << 20)
#define PAGE_OBJ 4096
#define RECORDS_BYTES ((size_t)20 << 20)
#define RECORD_OBJ 100
#define CHURN_BYTES ((size_t)64 << 20)
#define CHURN_OBJ 1024

static volatile size_t page_obj = PAGE_OBJ, record_obj = RECORD_OBJ;

__attribute__((noinline)) static void **hold_pages(size_t *n) {
  *n = PAGES_BYTES / PAGE_OBJ;
  void **v = calloc(*n, sizeof *v);
  for (size_t i = 0; i < *n; i++) {
    v[i] = malloc(page_obj);
    memset(v[i], 1, 8);
  }
  return v;
}

__attribute__((noinline)) static void **hold_records(size_t *n) {
  *n = RECORDS_BYTES / RECORD_OBJ;
  void **v = calloc(*n, sizeof *v);
  for (size_t i = 0; i < *n; i++) {
    v[i] = malloc(record_obj);
    memset(v[i], 2, 8);
  }
  return v;
}

__attribute__((noinline)) static void churn(void) {
  for (size_t i = 0; i < CHURN_BYTES / CHURN_OBJ; i++) {
    char *volatile p = malloc(CHURN_OBJ);
    p[0] = 1;
    free(p);
  }
}

typedef int (*write_file_fn)(const char *, int, const char *);

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT_PREFIX\n", argv[0]);
    return 2;
  }
#ifdef HEAP_LIVE_PLAIN
  write_file_fn write_file =
      (write_file_fn)dlsym(RTLD_DEFAULT, "cprof_profile_write_file");
  if (!write_file) {
    fprintf(stderr, "heap_live: cprof is not loaded\n");
    return 1;
  }
#else
  write_file_fn write_file = cprof_profile_write_file;
#endif
  size_t npages, nrecords;
  void **pages = hold_pages(&npages);
  void **records = hold_records(&nrecords);
  churn();

  static const struct {
    const char *name, *suffix;
    int debug;
  } outs[] = {{"heap", "heap.pb.gz", 0},
              {"allocs", "allocs.pb.gz", 0},
              {"heap", "heap.txt", 1},
              {"allocs", "allocs.txt", 1}};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", argv[1], outs[i].suffix);
    int err = write_file(outs[i].name, outs[i].debug, path);
    if (err) {
      fprintf(stderr, "heap_live: writing %s: error %d\n", path, err);
      return 1;
    }
  }
  printf("truth hold_pages %zu\n", npages * (PAGE_OBJ + sizeof(void *)));
  printf("truth hold_records %zu\n", nrecords * (RECORD_OBJ + sizeof(void *)));
  printf("truth churn_alloc %zu\n", CHURN_BYTES);
  for (size_t i = 0; i < npages; i++) free(pages[i]);
  for (size_t i = 0; i < nrecords; i++) free(records[i]);
  free(pages);
  free(records);
  return 0;
}
