/*
 * A loop on clock_gettime, whose time goes into the vDSO:
 *   vdso_loop SECONDS IMAGE > cpu.pb.gz
 * writes the vDSO's ELF image (the [vdso] mapping, from
 * getauxval(AT_SYSINFO_EHDR)) to the file IMAGE, for the test to read its
 * symbols with the usual tools, then runs a CPU profile at 1000 Hz over
 * SECONDS of clock_gettime(CLOCK_MONOTONIC) calls and writes it to stdout.
 * Exits 3, saying so, when the kernel maps no vDSO (vdso=0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "cprof.h"

/* The size of the mapping that starts at base, 0 if none does. */
static size_t mapping_size(unsigned long base) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  size_t size = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long s, e;
    if (sscanf(line, "%llx-%llx", &s, &e) == 2 && s == base)
      size = (size_t)(e - s);
  }
  if (f) fclose(f);
  return size;
}

__attribute__((noinline)) static long spin(double seconds) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long calls = 0;
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
    calls++;
  } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 <
           seconds);
  return calls;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: vdso_loop SECONDS IMAGE > cpu.pb.gz\n");
    return 2;
  }
  unsigned long base = getauxval(AT_SYSINFO_EHDR);
  size_t size = base ? mapping_size(base) : 0;
  if (!base || !size) {
    fprintf(stderr, "vdso_loop: no vDSO mapped (AT_SYSINFO_EHDR %#lx)\n", base);
    return 3;
  }
  FILE *img = fopen(argv[2], "wb");
  if (!img || fwrite((const void *)base, 1, size, img) != size || fclose(img) != 0) {
    perror("vdso_loop: writing the image");
    return 1;
  }
  int err = cprof_cpu_start(1000);
  if (err) {
    fprintf(stderr, "vdso_loop: cprof_cpu_start: %s\n", cprof_strerror(err));
    return 1;
  }
  long calls = spin(atof(argv[1]));
  cprof_sink out = cprof_sink_fd(STDOUT_FILENO);
  err = cprof_cpu_stop(&out);
  if (err) {
    fprintf(stderr, "vdso_loop: cprof_cpu_stop: %s\n", cprof_strerror(err));
    return 1;
  }
  fprintf(stderr, "vdso_loop: %ld calls, image of %zu bytes at %#lx\n", calls, size, base);
  return 0;
}
