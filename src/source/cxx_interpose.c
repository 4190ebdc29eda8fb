/*
 * C++'s allocation functions: every operator new and new[] (plain,
 * nothrow, align_val_t, align_val_t + nothrow) and operator delete and
 * delete[] (plain, sized, nothrow, aligned, sized + aligned, aligned +
 * nothrow) of the Itanium ABI, interposed like the malloc family so that
 * the heap sampler (heap_sampler.h) sees C++ allocations whichever library
 * provides them. jemalloc and tcmalloc export operator new and delete of
 * their own that never reach malloc; libstdc++'s do.
 *
 * Each function calls the next definition (dlsym(RTLD_NEXT), found on its
 * first call: libstdc++'s, or an allocator's), in one of the ways the
 * comment on `mode` below gives, so that each allocation is charged to the
 * thread's countdown once, as malloc charges it, and sampled at most once:
 * libstdc++'s operator new calls malloc, and so does jemalloc's aligned
 * one, both back into cprof. A sampled allocation is placed by heap_live.c
 * and recorded by heap_sampler.c, from a function in cprof_alloc_text, so
 * its stack starts at the caller of operator new. operator delete hands
 * heap_live.c the blocks cprof placed and passes every other pointer on.
 *
 * Where no next definition exists (a C++ library loaded with RTLD_LOCAL
 * that carries its own runtime), the functions behave as libstdc++'s:
 * malloc or aligned_alloc underneath and free for delete. Without a C++
 * runtime there is no std::bad_alloc to throw, so a throwing new that
 * fails then ends the program, as an uncaught std::bad_alloc would.
 *
 * Built with -fexceptions: an operator new underneath may throw through
 * these functions, and the held countdown is restored on the way out.
 * Like malloc, everything here runs uninstrumented, in every context the
 * application allocates from; nothing here may allocate through the
 * application's path or change errno but as the function underneath does.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "capture/interposers.h"
#include "source/heap_sampler.h"
#include "base/mem.h"

#define NO_SAN __attribute__((no_sanitize("address", "thread", "undefined")))
#define PAGE ((size_t)4096)

/* The functions by their mangled names, in one table; the slot of each is
 * its index. */
enum {
  NW, NA, NW_NT, NA_NT, NW_AL, NA_AL, NW_AL_NT, NA_AL_NT,
  DL, DA, DL_SZ, DA_SZ, DL_NT, DA_NT, DL_AL, DA_AL, DL_SZ_AL, DA_SZ_AL,
  DL_AL_NT, DA_AL_NT, NSLOTS
};

static const char *const names[NSLOTS] = {
    [NW] = "_Znwm",
    [NA] = "_Znam",
    [NW_NT] = "_ZnwmRKSt9nothrow_t",
    [NA_NT] = "_ZnamRKSt9nothrow_t",
    [NW_AL] = "_ZnwmSt11align_val_t",
    [NA_AL] = "_ZnamSt11align_val_t",
    [NW_AL_NT] = "_ZnwmSt11align_val_tRKSt9nothrow_t",
    [NA_AL_NT] = "_ZnamSt11align_val_tRKSt9nothrow_t",
    [DL] = "_ZdlPv",
    [DA] = "_ZdaPv",
    [DL_SZ] = "_ZdlPvm",
    [DA_SZ] = "_ZdaPvm",
    [DL_NT] = "_ZdlPvRKSt9nothrow_t",
    [DA_NT] = "_ZdaPvRKSt9nothrow_t",
    [DL_AL] = "_ZdlPvSt11align_val_t",
    [DA_AL] = "_ZdaPvSt11align_val_t",
    [DL_SZ_AL] = "_ZdlPvmSt11align_val_t",
    [DA_SZ_AL] = "_ZdaPvmSt11align_val_t",
    [DL_AL_NT] = "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    [DA_AL_NT] = "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

/*
 * How each function goes to the next definition, decided on its first
 * call:
 *   LIBC    the next is libstdc++'s or libc++'s, whose operator new is malloc
 *           (aligned_alloc when aligned) retried through the new-handler,
 *           and whose delete is free: cprof calls its own malloc and free,
 *           which sample and recognise, and the next definition only when
 *           malloc fails (it runs the new-handler and throws);
 *   NONE    no next definition: the same, ending the program (or returning
 *           NULL) when malloc fails;
 *   DIRECT  the next never comes back into cprof (an allocator's own new:
 *           tcmalloc's, jemalloc's plain and array ones): the countdown is
 *           charged here and the next tail-called, or the block sampled;
 *           a delete that is not LIBC or NONE is DIRECT;
 *   HELD    the next comes back into cprof (jemalloc's aligned new calls
 *           the exported aligned_alloc, cprof's; another library's operator
 *           new over malloc): as DIRECT, with the countdown held across the
 *           call, so that the allocation is counted once.
 * Which of DIRECT and HELD is found by a probe: one small allocation
 * through the next definition with the countdown held, which moves the
 * countdown only if it came back into cprof's allocator.
 */
enum { UNKNOWN, LIBC, NONE, DIRECT, HELD, PROBE /* found, not probed yet */ };
static _Atomic(void *) next_fn[NSLOTS];
static _Atomic int mode[NSLOTS];

NO_SAN static inline void *next_of(int slot) {
  return atomic_load_explicit(&next_fn[slot], memory_order_relaxed);
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);
typedef void (*del_fn)(void *);
typedef void (*del_sz_fn)(void *, size_t);
typedef void (*del_nt_fn)(void *, const void *);
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_al_nt_fn)(void *, size_t, const void *);

/* What an allocation asks for: the arguments every operator new variant
 * takes, and whether it may throw. */
typedef struct request {
  int slot;
  size_t n;
  size_t align;        /* 0: the default alignment */
  const void *nothrow; /* the std::nothrow_t argument; NULL: may throw */
} request;

NO_SAN static void *call_new(void *f, const request *r) {
  switch (r->slot) {
  case NW:
  case NA:
    return ((new_fn)f)(r->n);
  case NW_NT:
  case NA_NT:
    return ((new_nt_fn)f)(r->n, r->nothrow);
  case NW_AL:
  case NA_AL:
    return ((new_al_fn)f)(r->n, r->align);
  default:
    return ((new_al_nt_fn)f)(r->n, r->align, r->nothrow);
  }
}

NO_SAN static void unhold(const uint64_t *countdown) {
  cprof__heap_unhold(*countdown);
}

/* The next operator new with the countdown held, restored however the
 * call ends (an exception included). */
NO_SAN static void *call_new_held(void *f, const request *r) {
  __attribute__((cleanup(unhold), unused)) uint64_t countdown = cprof__heap_hold();
  return call_new(f, r);
}

void _ZdlPv(void *p);
void _ZdaPv(void *p);
void _ZdlPvSt11align_val_t(void *p, size_t align);
void _ZdaPvSt11align_val_t(void *p, size_t align);

/* The block a probe allocated goes back through cprof's own delete of the
 * same family. */
NO_SAN static void probe_free(int slot, void *p) {
  if (!p) return;
  if (slot == NW || slot == NW_NT)
    _ZdlPv(p);
  else if (slot == NA || slot == NA_NT)
    _ZdaPv(p);
  else if (slot == NW_AL || slot == NW_AL_NT)
    _ZdlPvSt11align_val_t(p, 64);
  else
    _ZdaPvSt11align_val_t(p, 64);
}

static const char nothrow_arg; /* std::nothrow_t is empty */

/* Whether the next operator new in f comes back into cprof: HELD or
 * DIRECT. Only in a thread that may sample (the probe reads the charge). */
NO_SAN static int probe(int slot, void *f) {
  const request r = {slot, 24, slot >= NW_AL ? 64 : 0,
                     slot == NW_NT || slot == NA_NT || slot >= NW_AL_NT
                         ? &nothrow_arg
                         : NULL};
  void *p;
  bool back;
  {
    __attribute__((cleanup(unhold), unused)) uint64_t countdown = cprof__heap_hold();
    p = call_new(f, &r);
    back = cprof__heap_tls.countdown != CPROF__HEAP_HELD;
  }
  probe_free(slot, p);
  return back ? HELD : DIRECT;
}

/* Whether f is defined in libstdc++ or libc++. */
NO_SAN static bool in_cxx_runtime(void *f) {
  Dl_info info;
  if (!dladdr(f, &info) || !info.dli_fname) return false;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return strncmp(base, "libstdc++.so", 12) == 0 ||
         strncmp(base, "libc++.so", 9) == 0;
}

/* Finds slot's next definition and its mode. A probe needs a thread
 * that samples (set up, not in profiler code): until one calls, HELD
 * serves, which is always correct. */
NO_SAN static __attribute__((noinline, cold)) int resolve(int slot) {
  int saved = errno;
  int m = atomic_load_explicit(&mode[slot], memory_order_acquire);
  if (m == UNKNOWN) {
    cprof__guard_enter();
    void *f = dlsym(RTLD_NEXT, names[slot]);
    bool libc = f && in_cxx_runtime(f);
    cprof__guard_exit();
    m = !f ? NONE : libc ? LIBC : slot >= DL ? DIRECT : PROBE;
    atomic_store_explicit(&next_fn[slot], f, memory_order_release);
    atomic_store_explicit(&mode[slot], m, memory_order_release);
  }
  if (m == PROBE) {
    if (!cprof__heap_ready() || cprof__guarded()) {
      errno = saved;
      return HELD;
    }
    m = probe(slot, next_of(slot));
    atomic_store_explicit(&mode[slot], m, memory_order_release);
  }
  errno = saved;
  return m;
}

NO_SAN static inline int mode_of(int slot) {
  int m = atomic_load_explicit(&mode[slot], memory_order_acquire);
  return CPROF__LIKELY(m != UNKNOWN && m != PROBE) ? m : resolve(slot);
}

NO_SAN static __attribute__((noreturn, cold)) void out_of_memory(void) {
  cprof__warn("operator new: out of memory, and no C++ runtime to throw "
              "std::bad_alloc");
  abort();
}

/* When cprof's malloc failed: the next definition runs the new-handler
 * and throws (LIBC), with the countdown held, since its own malloc calls
 * come back to cprof and the request was charged already; or there is
 * none (NONE). */
NO_SAN static __attribute__((noinline, cold)) void *libc_failed(
    int m, const request *r) {
  if (m == LIBC) return call_new_held(next_of(r->slot), r);
  if (!r->nothrow) out_of_memory();
  return NULL;
}

/* LIBC and NONE: libstdc++'s operator new over cprof's own malloc and
 * aligned_alloc; the next definition runs only when they fail. Always
 * inlined into the exported functions, which are in cprof_alloc_text, so
 * that a sample's stack starts at the caller of new. */
NO_SAN static inline __attribute__((always_inline)) void *
libc_new(int m, int slot, size_t n, size_t align, const void *nothrow) {
  size_t want = n ? n : 1;
  void *p = NULL;
  if (align == 0) {
    p = malloc(want);
  } else if ((align & (align - 1)) == 0) {
    size_t rounded = (want + align - 1) & ~(align - 1);
    if (rounded >= want) p = aligned_alloc(align, rounded);
  }
  if (CPROF__LIKELY(p != NULL)) return p;
  const request r = {slot, n, align, nothrow};
  return libc_failed(m, &r);
}

/* A sampled allocation (DIRECT or HELD): placed where delete recognises it
 * when it can be (a page boundary satisfies any alignment up to a page),
 * otherwise made by the next operator new and tracked where it is. */
CPROF__ALLOC_TEXT NO_SAN static __attribute__((noinline)) void *new_sampled(
    const request *r) {
  _Atomic uint64_t *meta = NULL;
  void *p = r->align <= PAGE ? cprof__heap_place(r->n, &meta) : NULL;
  if (!p) p = call_new_held(next_of(r->slot), r);
  if (p) cprof__heap_record(p, r->n, meta);
  return p;
}

/* Everything but the common cases. */
CPROF__ALLOC_TEXT NO_SAN static __attribute__((noinline)) void *new_slow(
    int slot, size_t n, size_t align, const void *nothrow) {
  const request req = {slot, n, align, nothrow}, *r = &req;
  int m = mode_of(slot);
  if (m == LIBC || m == NONE) return libc_new(m, slot, n, align, nothrow);
  if (m == DIRECT && CPROF__LIKELY(r->n < cprof__heap_tls.countdown)) {
    cprof__heap_tls.countdown -= r->n;
    return call_new(next_of(r->slot), r);
  }
  if (m == HELD && CPROF__LIKELY(r->n < cprof__heap_tls.countdown)) {
    cprof__heap_tls.countdown -= r->n;
    return call_new_held(next_of(r->slot), r);
  }
  if (CPROF__UNLIKELY(cprof__heap_take(r->n))) return new_sampled(r);
  return call_new_held(next_of(r->slot), r);
}

/* Every operator new. The common cases are a few instructions: the mode,
 * then cprof's malloc (LIBC), or the countdown charged and a tail call to
 * the next definition (DIRECT). */
#define NEW_BODY(slot_, n_, align_, nothrow_, call_)                         \
  int m = atomic_load_explicit(&mode[slot_], memory_order_acquire);        \
  if (CPROF__LIKELY(m == LIBC))                                             \
    return libc_new(m, slot_, n_, align_, nothrow_);                        \
  if (CPROF__LIKELY(m == DIRECT && n_ < cprof__heap_tls.countdown)) {      \
    cprof__heap_tls.countdown -= n_;                                        \
    void *f = next_of(slot_);                                               \
    return call_;                                                           \
  }                                                                         \
  return new_slow(slot_, n_, align_, nothrow_);

#define NEW_TEXT CPROF__ALLOC_TEXT NO_SAN CPROF_EXPORT

NEW_TEXT void *_Znwm(size_t n) {
  NEW_BODY(NW, n, 0, NULL, ((new_fn)f)(n))
}
NEW_TEXT void *_Znam(size_t n) {
  NEW_BODY(NA, n, 0, NULL, ((new_fn)f)(n))
}
NEW_TEXT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) {
  NEW_BODY(NW_NT, n, 0, nt, ((new_nt_fn)f)(n, nt))
}
NEW_TEXT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) {
  NEW_BODY(NA_NT, n, 0, nt, ((new_nt_fn)f)(n, nt))
}
NEW_TEXT void *_ZnwmSt11align_val_t(size_t n, size_t align) {
  NEW_BODY(NW_AL, n, align, NULL, ((new_al_fn)f)(n, align))
}
NEW_TEXT void *_ZnamSt11align_val_t(size_t n, size_t align) {
  NEW_BODY(NA_AL, n, align, NULL, ((new_al_fn)f)(n, align))
}
NEW_TEXT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t align,
                                                  const void *nt) {
  NEW_BODY(NW_AL_NT, n, align, nt, ((new_al_nt_fn)f)(n, align, nt))
}
NEW_TEXT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t align,
                                                  const void *nt) {
  NEW_BODY(NA_AL_NT, n, align, nt, ((new_al_nt_fn)f)(n, align, nt))
}

/* Every operator delete: LIBC and NONE go to cprof's free (libstdc++'s
 * delete is free); DIRECT hands heap_live.c the blocks cprof placed (only a
 * pointer on a page boundary can be one, or any while blocks are tracked
 * off one, as for free) and passes every other pointer on, with its
 * arguments as given. */
#define DELETE_BODY(slot_, call_)                                             \
  int m = atomic_load_explicit(&mode[slot_], memory_order_acquire);          \
  if (CPROF__UNLIKELY(m == UNKNOWN)) m = mode_of(slot_);                     \
  if (m != DIRECT) {                                                         \
    free(p);                                                                 \
    return;                                                                  \
  }                                                                          \
  if (CPROF__UNLIKELY(((uintptr_t)p & (PAGE - 1)) == 0 ||                    \
                      atomic_load_explicit(cprof__heap_unaligned_count,      \
                                           memory_order_relaxed) != 0) &&    \
      cprof__heap_release(p))                                                \
    return;                                                                  \
  void *f = next_of(slot_);                                                  \
  call_;

#define DEL_TEXT NO_SAN CPROF_EXPORT

#define DELETE_PLAIN(name, slot)                                             \
  DEL_TEXT void name(void *p) { DELETE_BODY(slot, ((del_fn)f)(p)) }
#define DELETE_WITH(name, slot, type, fn_type)                               \
  DEL_TEXT void name(void *p, type a) {                                      \
    DELETE_BODY(slot, ((fn_type)f)(p, a))                                    \
  }
#define DELETE_WITH2(name, slot, type1, type2, fn_type)                      \
  DEL_TEXT void name(void *p, type1 a, type2 b) {                            \
    DELETE_BODY(slot, ((fn_type)f)(p, a, b))                                 \
  }

DELETE_PLAIN(_ZdlPv, DL)
DELETE_PLAIN(_ZdaPv, DA)
DELETE_WITH(_ZdlPvm, DL_SZ, size_t, del_sz_fn)
DELETE_WITH(_ZdaPvm, DA_SZ, size_t, del_sz_fn)
DELETE_WITH(_ZdlPvRKSt9nothrow_t, DL_NT, const void *, del_nt_fn)
DELETE_WITH(_ZdaPvRKSt9nothrow_t, DA_NT, const void *, del_nt_fn)
DELETE_WITH(_ZdlPvSt11align_val_t, DL_AL, size_t, del_sz_fn)
DELETE_WITH(_ZdaPvSt11align_val_t, DA_AL, size_t, del_sz_fn)
DELETE_WITH2(_ZdlPvmSt11align_val_t, DL_SZ_AL, size_t, size_t, del_sz_al_fn)
DELETE_WITH2(_ZdaPvmSt11align_val_t, DA_SZ_AL, size_t, size_t, del_sz_al_fn)
DELETE_WITH2(_ZdlPvSt11align_val_tRKSt9nothrow_t, DL_AL_NT, size_t,
             const void *, del_al_nt_fn)
DELETE_WITH2(_ZdaPvSt11align_val_tRKSt9nothrow_t, DA_AL_NT, size_t,
             const void *, del_al_nt_fn)

/* The operator new functions, as a program's calls reach them, for the
 * tail-call frames (profile.c). Registering stores addresses only, so it
 * is safe this early. */
__attribute__((constructor)) static void heap_cxx_constructor(void) {
  static const uintptr_t mine[] = {
      (uintptr_t)_Znwm,
      (uintptr_t)_Znam,
      (uintptr_t)_ZnwmRKSt9nothrow_t,
      (uintptr_t)_ZnamRKSt9nothrow_t,
      (uintptr_t)_ZnwmSt11align_val_t,
      (uintptr_t)_ZnamSt11align_val_t,
      (uintptr_t)_ZnwmSt11align_val_tRKSt9nothrow_t,
      (uintptr_t)_ZnamSt11align_val_tRKSt9nothrow_t};
  cprof__interposers_register(mine, CPROF__ARRAY_LEN(mine));
}
