/*
 * The library constructor: everything cprof must have in place before the
 * application's main runs (the stack table, the main thread's stack bounds,
 * the pthread_create interposer). It runs in both the linked and the
 * preloaded library and never fails the host: whatever cannot be set up is
 * left disabled.
 */
#include "stack.h"
#include "stacktab.h"
#include "threads.h"

__attribute__((constructor)) static void cprof__init(void) {
  cprof__stacktab_init();
  cprof__stack_register_thread();
  cprof__threads_init();
}
