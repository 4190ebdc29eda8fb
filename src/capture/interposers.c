/*
 * The interposer address list (interposers.h). Calls nothing; normal
 * context.
 */
#include <stdatomic.h>

#include "capture/interposers.h"

/*
 * cprof's interposers (the source/ interposers) as calls reach
 * them: a program's call to malloc goes to the first malloc of the global
 * scope, cprof's when cprof is loaded (linked or preloaded) before libc, and
 * &malloc taken in those files resolves the same way. These are the
 * functions the first frame of a stack taken by an interposer calls, unless
 * the function it called left by a tail call. The modules register them
 * when they start, so that this one names none of them: a reference from
 * here would pull the interposers into every static link of the encoders
 * (the fuzzers', where the sanitizer's allocator must stay in charge).
 */
#define MAX_INTERPOSERS 64
static _Atomic uintptr_t interposers[MAX_INTERPOSERS];
static _Atomic size_t ninterposers;

void cprof__interposers_register(const uintptr_t *addrs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t at = atomic_fetch_add(&ninterposers, 1);
    if (at >= MAX_INTERPOSERS) return;
    atomic_store(&interposers[at], addrs[i]);
  }
}

bool cprof__is_interposer(uint64_t addr) {
  size_t n = atomic_load(&ninterposers);
  if (n > MAX_INTERPOSERS) n = MAX_INTERPOSERS;
  for (size_t i = 0; i < n; i++)
    if (atomic_load(&interposers[i]) == (uintptr_t)addr) return true;
  return false;
}

static _Atomic uintptr_t entry_start, entry_spawn;

void cprof__thread_entry_register(uintptr_t start, uintptr_t spawn) {
  atomic_store(&entry_start, start);
  atomic_store(&entry_spawn, spawn);
}

uintptr_t cprof__thread_entry_start(void) { return atomic_load(&entry_start); }

uintptr_t cprof__thread_entry_spawn(void) { return atomic_load(&entry_spawn); }
