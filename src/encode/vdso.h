/*
 * Names for code in the vDSO, the small shared object the kernel maps into
 * every process (clock_gettime, gettimeofday, getcpu): read from the
 * image's own dynamic symbol table, in memory, as perf names them. It
 * needs neither libdw nor a file: the image is found by
 * getauxval(AT_SYSINFO_EHDR) and read where it is mapped.
 */
#ifndef CPROF_VDSO_H
#define CPROF_VDSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

typedef struct cprof__vdso_sym {
  const char *name; /* NUL-terminated, inside the image */
  uint64_t start;   /* the function's first byte, as an offset in the image */
} cprof__vdso_sym;

/* The exported function of an ELF image (len bytes, laid out as mapped:
 * the vDSO's one load segment at offset 0) that holds the byte at offset
 * off: of several names for one function, a global one before a weak one
 * (__vdso_clock_gettime before clock_gettime). False when no exported
 * function holds it or the image is not a well-formed 64-bit ELF object;
 * every read is checked against len, so any bytes may be given. Does not
 * allocate; async-signal-safe. */
CPROF__HIDDEN bool cprof__vdso_symbol(const unsigned char *image, size_t len,
                                      uint64_t off, cprof__vdso_sym *out);

/* The address of this process's vDSO image (its ELF header, where the
 * [vdso] mapping starts): false when the kernel maps none (vdso=0). */
CPROF__HIDDEN bool cprof__vdso_base(uintptr_t *base);

#endif
