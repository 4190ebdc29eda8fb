/*
 * Libraries loaded when a feature first needs them, not at start-up. The
 * HTTP server's libmicrohttpd and the pusher's libcurl pull in some thirty
 * shared objects between them (TLS, compression, name services); mapping
 * and relocating those cost every profiled process about 15 ms of CPU at
 * start, whether or not it ever serves or pushes a profile.
 */
#ifndef CPROF_DYNLOAD_H
#define CPROF_DYNLOAD_H

#include <stddef.h>

#include "base/internal.h"

/* One symbol to resolve: its name and where its address goes (the address
 * of a function pointer, cast). */
typedef struct cprof__dynsym {
  const char *name;
  void **slot;
} cprof__dynsym;

/* A library to load once: the sonames to try, in order, and its symbols.
 * The state is the loader's; start it zeroed. */
typedef struct cprof__dynlib {
  const char *const *sonames; /* null-terminated */
  const cprof__dynsym *syms;
  size_t nsyms;
  int state;     /* 0 unloaded, 1 loaded, -1 failed */
  char why[200]; /* why it failed */
} cprof__dynlib;

/*
 * A library's function table, from an X-macro that names each function
 * once with the field it goes in:
 *   #define FOO_FNS(X, v) X(v, foo_open, open) X(v, foo_close, close)
 *   CPROF__DYNLIB_DEFINE(foo, FOO_FNS, "libfoo.so.1")
 * defines `foo` (foo.open, foo.close: pointers typed as the functions'
 * declarations) and `foo_lib`, for cprof__dynload(&foo_lib).
 */
#define CPROF__DYN_FIELD(v, sym, field) __typeof__(sym) *field;
#define CPROF__DYN_SYM(v, sym, field) {#sym, (void **)&v.field},
#define CPROF__DYNLIB_DEFINE(v, LIST, ...)                                \
  static struct {                                                       \
    LIST(CPROF__DYN_FIELD, v)                                           \
  } v;                                                                  \
  static const cprof__dynsym v##_syms[] = {LIST(CPROF__DYN_SYM, v)};    \
  static const char *const v##_sonames[] = {__VA_ARGS__, NULL};         \
  static cprof__dynlib v##_lib = {v##_sonames, v##_syms,                \
                                  sizeof v##_syms / sizeof v##_syms[0], \
                                  0, ""};

/* Loads lib (the first soname that loads) and resolves all its symbols, the
 * first time it is called for lib; later calls return the first result.
 * Returns 0, or CPROF_EUNSUPPORTED with the reason in lib->why. Thread-safe;
 * normal context only. */
CPROF__HIDDEN int cprof__dynload(cprof__dynlib *lib);

#endif
