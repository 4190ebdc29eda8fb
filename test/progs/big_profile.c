/*
 * Writes a synthetic CPU profile for the viewer's load test: 50,000
 * samples over 5,000 distinct stacks, 8 to 31 frames deep, through 500
 * functions, with one function, hot_leaf, at the leaf of every fifth
 * stack (so it is the hottest by flat value). Deterministic: the same
 * bytes on every run. It uses the library's internal encoder (pprof.h)
 * and must stay a plain writer with no other dependency.
 *
 *   big_profile OUTPUT [SAMPLES STACKS]
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "encode/pprof.h"

#define NFUNCS 500

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "usage: %s OUTPUT [SAMPLES STACKS]\n", argv[0]);
    return 2;
  }
  long nsamples = argc == 4 ? atol(argv[2]) : 50000;
  long nstacks = argc == 4 ? atol(argv[3]) : 5000;
  if (nsamples <= 0 || nstacks <= 0) return 2;
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  cprof_sink sink = cprof_sink_fd(fd);
  cprof__pprof *p = cprof__pprof_new(&sink, true);
  if (!p) return 1;
  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_sample_type(p, "cpu", "nanoseconds");
  cprof__pprof_period(p, "cpu", "nanoseconds", 10000000);
  cprof__pprof_time(p, 1700000000000000000, nsamples * 10000000);
  cprof__pprof_comment(p, "synthetic profile for the viewer's load test");
  struct cprof__pprof_mapping exe = {.id = 1,
                                     .memory_start = 0x400000,
                                     .memory_limit = 0x800000,
                                     .filename = "/usr/bin/big_profile",
                                     .has_functions = true,
                                     .has_filenames = true,
                                     .has_line_numbers = true};
  cprof__pprof_add_mapping(p, &exe);
  /* Function and location i + 1 for i in [0, NFUNCS): 0 is main, the last
   * is hot_leaf. */
  for (int i = 0; i < NFUNCS; i++) {
    char name[64], file[64];
    if (i == 0)
      snprintf(name, sizeof name, "main");
    else if (i == NFUNCS - 1)
      snprintf(name, sizeof name, "hot_leaf");
    else
      snprintf(name, sizeof name, "synthetic_fn_%03d", i);
    snprintf(file, sizeof file, "synthetic/file%02d.c", i % 40);
    cprof__pprof_function(p, (uint64_t)i + 1, name, name, file, 10 * i);
    cprof__pprof_line line = {(uint64_t)i + 1, 10 * i + 3, 0};
    cprof__pprof_location(p, (uint64_t)i + 1, 1, 0x400000 + 64 * (uint64_t)i,
                          &line, 1, false);
  }
  uint64_t stack[32];
  for (long s = 0; s < nsamples; s++) {
    long k = s % nstacks;
    int depth = 8 + (int)(k % 24);
    /* Frames near the root depend on k's high bits only, so stacks share
     * prefixes and the tree branches gradually. Built root first, then
     * reversed to the encoder's leaf-first order. */
    uint64_t root_first[32];
    root_first[0] = 1;
    for (int d = 1; d < depth; d++) {
      long key = d < 12 ? k >> (12 - d) : k;
      root_first[d] = 2 + mix((uint64_t)key * 131 + (uint64_t)d) % (NFUNCS - 2);
    }
    /* Two frames spell k out, so every stack is distinct. */
    root_first[depth - 3] = 2 + (uint64_t)(k % (NFUNCS - 2));
    root_first[depth - 2] = 2 + (uint64_t)(k / (NFUNCS - 2) % (NFUNCS - 2));
    if (k % 5 == 0) root_first[depth - 1] = NFUNCS;
    for (int d = 0; d < depth; d++) stack[d] = root_first[depth - 1 - d];
    int64_t v[2] = {1, 10000000};
    cprof__pprof_sample(p, stack, (size_t)depth, v, 2, NULL, 0);
  }
  int err = cprof__pprof_finish(p);
  if (close(fd) != 0 || err) {
    fprintf(stderr, "%s: write failed\n", argv[1]);
    return 1;
  }
  return 0;
}
