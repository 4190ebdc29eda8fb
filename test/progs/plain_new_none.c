/*
 * cprof's operator new where there is no C++ runtime to call on, for
 * test/e2e/heap_allocators.sh: a C program, run with cprof preloaded, that
 * finds cprof's operator new and delete with dlsym, as a C++ library
 * carrying its own runtime (loaded with RTLD_LOCAL) would reach them.
 *   plain_new_none ok     new 100000 bytes in alloc_through_new (kept
 *                         live), new and delete another block, a nothrow
 *                         new that cannot succeed; prints "ok"
 *   plain_new_none fail   a throwing new that cannot succeed
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void (*del_fn)(void *);

static void *volatile kept;

__attribute__((noinline)) static void *alloc_through_new(new_fn nw, size_t n) {
  void *p = nw(n);
  if (p) memset(p, 1, n);
  return p;
}

int main(int argc, char **argv) {
  new_fn nw = (new_fn)dlsym(RTLD_DEFAULT, "_Znwm");
  new_nt_fn nwnt = (new_nt_fn)dlsym(RTLD_DEFAULT, "_ZnwmRKSt9nothrow_t");
  del_fn dl = (del_fn)dlsym(RTLD_DEFAULT, "_ZdlPv");
  if (!nw || !nwnt || !dl) {
    fprintf(stderr, "no operator new or delete (is cprof preloaded?)\n");
    return 2;
  }
  if (argc > 1 && strcmp(argv[1], "fail") == 0) {
    nw((size_t)1 << 62);
    printf("returned\n");
    return 0;
  }
  kept = alloc_through_new(nw, 100000);
  void *p = nw(64);
  if (!kept || !p) return 1;
  dl(p);
  static const char nothrow = 0;
  if (nwnt((size_t)1 << 62, &nothrow) != NULL) return 1;
  printf("ok\n");
  return 0;
}
