#ifndef CPROF_EXIT_H
#define CPROF_EXIT_H
/* The _exit and _Exit interposers (exit.c). Top layer. */
#include "base/internal.h"

/* Resolves libc's _exit and _Exit underneath; from the constructor, before
 * dumps are configured. Normal context. */
CPROF__HIDDEN void cprof__exit_init(void);

#endif
