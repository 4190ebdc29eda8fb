/*
 * The allocator underneath cprof: the next malloc family after cprof's own
 * interposers (libc's, jemalloc's, a sanitizer's), found once with
 * dlsym(RTLD_NEXT) (or glibc's __libc_ names in a static link), and the
 * bootstrap arena that serves dlsym's own requests while it is being found.
 *
 * The heap interposers (source/heap_interpose.c) chain to these, and
 * cprof's own allocations (base/mem.c) call them directly, so that memory
 * cprof takes for itself never passes through an interposer.
 *
 * cprof__alloc.malloc and .free start out pointing at bootstrap functions
 * (never null): the first call resolves, and until the allocator is found
 * malloc carves from the arena and free ignores what it is given (only
 * arena blocks or null can exist then). The other slots are null until
 * resolved; cprof__alloc_get() resolves on first use. Arena blocks start on
 * a page boundary with their size in the 8 bytes before them; they are
 * never reused or freed.
 *
 * May be called from any context the application allocates in
 * (constructors, thread teardown, a fork child); never from a signal
 * handler. Changes no errno on success.
 */
#ifndef CPROF_REAL_ALLOC_H
#define CPROF_REAL_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

typedef void *(*cprof__malloc_fn)(size_t);
typedef void (*cprof__free_fn)(void *);
typedef void *(*cprof__calloc_fn)(size_t, size_t);
typedef void *(*cprof__realloc_fn)(void *, size_t);
typedef int (*cprof__posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*cprof__memalign_fn)(size_t, size_t);
typedef size_t (*cprof__usable_size_fn)(void *);

typedef struct cprof__alloc_fns {
  _Atomic(cprof__malloc_fn) malloc;
  _Atomic(cprof__free_fn) free;
  _Atomic(cprof__calloc_fn) calloc;
  _Atomic(cprof__realloc_fn) realloc;
  _Atomic(cprof__posix_memalign_fn) posix_memalign;
  _Atomic(cprof__memalign_fn) aligned_alloc;
  _Atomic(cprof__memalign_fn) memalign;
  _Atomic(cprof__malloc_fn) valloc;
  _Atomic(cprof__malloc_fn) pvalloc;
  _Atomic(cprof__usable_size_fn) usable_size;
} cprof__alloc_fns;

CPROF__HIDDEN extern _Alignas(64) cprof__alloc_fns cprof__alloc;

/* The bootstrap functions malloc and free start as. */
CPROF__HIDDEN void *cprof__alloc_bootstrap_malloc(size_t n);
CPROF__HIDDEN void cprof__alloc_bootstrap_free(void *p);

/* Finds the allocator underneath. The first caller does the work; calls
 * made meanwhile (dlsym's own, or another thread's) return at once and
 * see the slots as they are. free is stored before malloc, so a block from
 * the real malloc implies the real free is known. */
CPROF__HIDDEN void cprof__alloc_resolve(void);

/* A fork child whose parent was resolving lets the next call start over. */
CPROF__HIDDEN void cprof__alloc_atfork_child(void);

#define CPROF__ALLOC_LOAD(slot) \
  atomic_load_explicit(&cprof__alloc.slot, memory_order_relaxed)

/* The function in slot, resolving first if it is still null; null only
 * while the allocator is being found or when it has no such function. */
#define CPROF__ALLOC_GET(slot)                                       \
  __extension__({                                                    \
    __typeof__(CPROF__ALLOC_LOAD(slot)) f_ = CPROF__ALLOC_LOAD(slot); \
    if (CPROF__UNLIKELY(!f_)) {                                      \
      cprof__alloc_resolve();                                        \
      f_ = CPROF__ALLOC_LOAD(slot);                                  \
    }                                                                \
    f_;                                                              \
  })

/* The bootstrap arena. */
#define CPROF__ARENA_SIZE ((size_t)1024 * 1024)
CPROF__HIDDEN extern unsigned char cprof__arena[CPROF__ARENA_SIZE];

static inline __attribute__((always_inline)) int cprof__in_arena(
    const void *p) {
  return (uintptr_t)p - (uintptr_t)cprof__arena < CPROF__ARENA_SIZE;
}

/* The size an arena block was asked with. */
CPROF__HIDDEN size_t cprof__arena_size(const void *p);
/* n bytes aligned to align (at least a page), zeroed; NULL and ENOMEM
 * when the arena is exhausted. */
CPROF__HIDDEN void *cprof__arena_alloc(size_t align, size_t n);

#endif
