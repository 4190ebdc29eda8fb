/*
 * cprof's own descriptors, kept out of the program's way (fd_interpose.c).
 * A descriptor cprof registers here is moved to a number at or above
 * CPROF__FD_HIGH, where the program's own opens (lowest free number) do
 * not reach, and is protected by the close, close_range, closefrom, dup2
 * and dup3 interposers: the program closing it (a daemon closing every
 * descriptor it did not open) sees success and leaves it open, and a dup2
 * or dup3 onto it fails with EBUSY rather than replace it under cprof.
 * Only cprof's own code (a thread inside cprof__guard, which every thread
 * cprof starts is for its whole life) really closes a registered
 * descriptor, and that unregisters it.
 *
 * Descriptors of kind CPROF__FD_ENDPOINT (the HTTP server's) are closed in
 * a fork child, where the threads that use them do not exist: a child
 * that does not exec never holds the server's port.
 */
#ifndef CPROF_FDS_H
#define CPROF_FDS_H

#include <stdbool.h>

#include "base/internal.h"

/* The lowest number cprof moves its descriptors to (kept lower when the
 * limit on descriptors forbids it). */
#define CPROF__FD_HIGH 100

enum {
  CPROF__FD_KEEP = 1,     /* protected; kept in a fork child */
  CPROF__FD_ENDPOINT = 2, /* protected; closed in a fork child */
};

/* Registers fd (a descriptor cprof just created) as cprof's, of kind, and
 * returns the number it now has: moved to CPROF__FD_HIGH or above when it
 * was below (close-on-exec set; the old number closed). A descriptor past
 * the registry's reach (65536) stays unregistered and unprotected. Call
 * between cprof__fd_begin() and cprof__fd_end() so that a fork in between
 * cannot copy it unregistered. Normal context. */
CPROF__HIDDEN int cprof__fd_adopt(int fd, int kind);

/* Brackets the creation and adoption of descriptors: a fork waits for
 * cprof__fd_end(). Never nest; hold it only around system calls that do
 * not block. */
CPROF__HIDDEN void cprof__fd_begin(void);
/* cprof__fd_begin when fd_mu is free now, never waiting: false when it is
 * not (for code that may run in a signal handler). */
CPROF__HIDDEN bool cprof__fd_trybegin(void);
CPROF__HIDDEN void cprof__fd_end(void);

/* Until the matching cprof__fd_capture(0) the calling thread registers,
 * as kind, every eventfd and pipe it creates inside cprof's guard (those a
 * library such as libmicrohttpd makes for itself). */
CPROF__HIDDEN void cprof__fd_capture(int kind);

/* Whether fd is registered now. Async-signal-safe. */
CPROF__HIDDEN bool cprof__fd_is_own(int fd);

/* Unregisters and closes one of cprof's descriptors, from any thread. */
CPROF__HIDDEN int cprof__fd_close(int fd);

/* Marks the module's use: registers its fork handler. Idempotent. */
CPROF__HIDDEN void cprof__fd_init(void);

#endif
