/*
 * Heap samples through a plugin loaded after the unwind tables were
 * built: every allocation is sampled, a few before the plugin is loaded
 * (the first builds the tables), none while it loads, then the plugin
 * (libdlcfi.so, built without frame pointers, walkable only by its CFI
 * rows) allocates. Fewer samples follow than the heap sampler takes
 * between two routine refreshes, so the plugin's tables come only from the
 * refresh a walk asks for when it meets code the tables do not know.
 * Writes the allocs profile to stdout.
 *   heap_dlopen LIBRARY
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cprof.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  cprof_heap_set_rate(1);
  /* The countdown drawn at the default rate runs out here. */
  for (int i = 0; i < 5; i++) {
    char *volatile p = malloc(i == 0 ? (size_t)4 << 20 : 64);
    if (p) p[0] = (char)i;
    free(p);
  }
  cprof_heap_set_rate(0);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  uint64_t (*work)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "dlcfi_work");
  if (!work) return 1;
  cprof_heap_set_rate(1);
  uint64_t r = work(8) + work(9);
  cprof_heap_set_rate(0);
  cprof_sink out = cprof_sink_fd(STDOUT_FILENO);
  int err = cprof_profile_write("allocs", 0, &out);
  fprintf(stderr, "done (%llu)\n", (unsigned long long)r);
  dlclose(h);
  return err != 0;
}
