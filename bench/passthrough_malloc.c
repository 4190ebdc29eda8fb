/*
 * The floor for any malloc interposer: malloc and free that do nothing but
 * call glibc's allocator. bench_heap_overhead preloads it next to cprof, so
 * the cost of interposing at all (one more call and indirect jump per
 * operation) is measured in the same run as cprof's.
 */
#include <stddef.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);

__attribute__((visibility("default"))) void *malloc(size_t n) {
  return __libc_malloc(n);
}

__attribute__((visibility("default"))) void free(void *p) { __libc_free(p); }
