/*
 * The library constructor: everything cprof must have in place before the
 * application's main runs (the stack table, the main thread's stack bounds,
 * the pthread_create interposer). It runs in both the linked and the
 * preloaded library and never fails the host: whatever cannot be set up is
 * left disabled.
 *
 * A static link only pulls in archive members that resolve a symbol, and
 * nothing calls a constructor; mem.c, which every module uses, refers to
 * cprof__init_anchor so this file always comes along.
 */
#include "contention.h"
#include "dump.h"
#include "heap.h"
#include "http.h"
#include "push.h"
#include "stack.h"
#include "stacktab.h"
#include "threads.h"

const int cprof__init_anchor = 1;

__attribute__((constructor)) static void cprof__init(void) {
  cprof__stacktab_init();
  cprof__stack_register_thread();
  cprof__stack_init();
  cprof__threads_init();
  cprof__heap_init();
  cprof__contention_env_init();
  /* Last: dumps start profiles the other modules provide. */
  cprof__dump_env_init();
  cprof__http_env_init();
  cprof__push_env_init();
}
