/*
 * The allocator underneath cprof (real_alloc.h): the lookup and the
 * bootstrap arena. Runs in whatever context the application first
 * allocates from, uninstrumented (a sanitizer's runtime allocates through
 * cprof's interposers while it is still initialising); never in a signal
 * handler. Calls only dlsym and its own code.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "base/real_alloc.h"

#define NO_SAN __attribute__((no_sanitize("address", "thread", "undefined")))
#define PAGE ((size_t)4096)

_Alignas(64) cprof__alloc_fns cprof__alloc = {
    .malloc = cprof__alloc_bootstrap_malloc,
    .free = cprof__alloc_bootstrap_free,
};

/* In .bss: only the pages used are touched. */
_Alignas(4096) unsigned char cprof__arena[CPROF__ARENA_SIZE];
static _Atomic size_t arena_used;

enum { RESOLVE_IDLE, RESOLVE_RUNNING, RESOLVE_DONE };
static _Atomic int resolve_state;

NO_SAN size_t cprof__arena_size(const void *p) {
  size_t n;
  memcpy(&n, (const unsigned char *)p - sizeof n, sizeof n);
  return n;
}

NO_SAN void *cprof__arena_alloc(size_t align, size_t n) {
  if (align < PAGE) align = PAGE;
  size_t cur = atomic_load_explicit(&arena_used, memory_order_relaxed);
  for (;;) {
    if (align > CPROF__ARENA_SIZE || n > CPROF__ARENA_SIZE) break;
    size_t start = (cur + 16 + align - 1) & ~(align - 1);
    size_t end = start + ((n + 15) & ~(size_t)15);
    if (end > CPROF__ARENA_SIZE) break;
    if (atomic_compare_exchange_weak_explicit(&arena_used, &cur, end,
                                              memory_order_relaxed,
                                              memory_order_relaxed)) {
      memcpy(cprof__arena + start - sizeof n, &n, sizeof n);
      return cprof__arena + start; /* already zero: never reused */
    }
  }
  errno = ENOMEM;
  return NULL;
}

NO_SAN static void *next_symbol(const char *name, const char *libc_name) {
  void *f = dlsym(RTLD_NEXT, name);
  /* A program that cprof was linked into statically has no next object;
   * glibc still exports its allocator under __libc_ names. */
  if (!f && libc_name) f = dlsym(RTLD_DEFAULT, libc_name);
  return f;
}

#define STORE(slot, type, name, libc_name) \
  atomic_store(&cprof__alloc.slot, (type)next_symbol(name, libc_name))

NO_SAN __attribute__((noinline, cold)) void cprof__alloc_resolve(void) {
  int idle = RESOLVE_IDLE;
  if (!atomic_compare_exchange_strong(&resolve_state, &idle, RESOLVE_RUNNING))
    return;
  int saved = errno;
  /* malloc and free first: another slot being set implies they are. */
  cprof__malloc_fn m = (cprof__malloc_fn)next_symbol("malloc", "__libc_malloc");
  cprof__free_fn f = (cprof__free_fn)next_symbol("free", "__libc_free");
  if (!m || !f) {
    /* No allocator to call through to: stay on the arena. */
    atomic_store(&resolve_state, RESOLVE_DONE);
    errno = saved;
    return;
  }
  atomic_store(&cprof__alloc.free, f);
  atomic_store(&cprof__alloc.malloc, m);
  STORE(calloc, cprof__calloc_fn, "calloc", "__libc_calloc");
  STORE(realloc, cprof__realloc_fn, "realloc", "__libc_realloc");
  STORE(posix_memalign, cprof__posix_memalign_fn, "posix_memalign", NULL);
  STORE(aligned_alloc, cprof__memalign_fn, "aligned_alloc", NULL);
  STORE(memalign, cprof__memalign_fn, "memalign", "__libc_memalign");
  STORE(valloc, cprof__malloc_fn, "valloc", "__libc_valloc");
  STORE(pvalloc, cprof__malloc_fn, "pvalloc", "__libc_pvalloc");
  STORE(usable_size, cprof__usable_size_fn, "malloc_usable_size", NULL);
  atomic_store(&resolve_state, RESOLVE_DONE);
  errno = saved;
}

void cprof__alloc_atfork_child(void) {
  int running = RESOLVE_RUNNING;
  atomic_compare_exchange_strong(&resolve_state, &running, RESOLVE_IDLE);
}

NO_SAN void *cprof__alloc_bootstrap_malloc(size_t n) {
  cprof__alloc_resolve();
  cprof__malloc_fn f = CPROF__ALLOC_LOAD(malloc);
  return f != cprof__alloc_bootstrap_malloc ? f(n) : cprof__arena_alloc(16, n);
}

NO_SAN void cprof__alloc_bootstrap_free(void *p) {
  /* Only null or an arena block can reach here: nothing else was handed
   * out before the allocator was found. */
  (void)p;
}
