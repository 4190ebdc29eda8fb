/*
 * An operator new and delete of some other library, over malloc and free,
 * as programs and frameworks define their own: preloaded after cprof by
 * test/e2e/heap_allocators.sh, it is the next definition cprof's operator
 * new finds, and one that comes back into cprof's malloc, so cprof must
 * hold the countdown across it (its HELD mode) and count each allocation
 * once. Only the plain and array forms; the others stay libstdc++'s.
 */
#include <stdlib.h>

void *_Znwm(size_t n);
void *_Znam(size_t n);
void _ZdlPv(void *p);
void _ZdaPv(void *p);
void _ZdlPvm(void *p, size_t n);
void _ZdaPvm(void *p, size_t n);

void *_Znwm(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}

void *_Znam(size_t n) { return _Znwm(n); }
void _ZdlPv(void *p) { free(p); }
void _ZdaPv(void *p) { free(p); }
void _ZdlPvm(void *p, size_t n) {
  (void)n;
  free(p);
}
void _ZdaPvm(void *p, size_t n) {
  (void)n;
  free(p);
}
