/*
 * The one /proc reader: small files read whole, the process's thread ids,
 * a thread's name. Normal context only (it allocates and opens files);
 * it never changes errno's meaning for its caller beyond its return.
 */
#ifndef CPROF_PROC_H
#define CPROF_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/internal.h"

/* Reads the small file path (relative to dirfd, or absolute with
 * AT_FDCWD) into buf, NUL-terminated and cut at size - 1 bytes; returns
 * its length, or -1 when it cannot be opened or read. */
CPROF__HIDDEN ssize_t cprof__proc_read(int dirfd, const char *path, char *buf,
                                       size_t size);

/* The same for a file of one line that the kernel writes whole at the
 * first read (a thread's syscall, stat or schedstat file): it stops at
 * the read that ends the line, without the one more that would find the
 * end of the file. */
CPROF__HIDDEN ssize_t cprof__proc_read_line(int dirfd, const char *path,
                                            char *buf, size_t size);

/* The thread ids of the process, from /proc/self/task, in *out (free with
 * cprof__free) and *count. Returns 0, CPROF_ESYS or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__proc_tids(pid_t **out, size_t *count);

/* The same, listed through dirfd: /proc/self/task opened by the caller
 * and not read yet, which it goes on using for the threads' files (one
 * open of the directory a collection, not two). */
CPROF__HIDDEN int cprof__proc_tids_at(int dirfd, pid_t **out, size_t *count);

/* Between begin and end, cprof__proc_tids on the calling thread answers
 * from one listing, taken by its first call: for a page that counts
 * threads several ways (the index: the goroutine and threadcreate counts)
 * at one instant, at the cost of one listing. */
CPROF__HIDDEN void cprof__proc_tids_batch_begin(void);
CPROF__HIDDEN void cprof__proc_tids_batch_end(void);

/* Thread tid's name (/proc/self/task/TID/comm, without the newline) in
 * out; false when it cannot be read (the thread is gone). */
CPROF__HIDDEN bool cprof__proc_thread_name(pid_t tid, char *out, size_t len);

/* Whether the calling thread runs under a seccomp filter ("Seccomp: 2"
 * in /proc/thread-self/status; true when that cannot be read): the
 * filter's action for a call it does not list may be to kill the
 * process, so calls few programs make (perf_event_open, timer_create)
 * are not tried under one. */
CPROF__HIDDEN bool cprof__seccomp_filtered(void);

/* Whether the calling thread may call timer_create: always without a
 * seccomp filter; under one (or where /proc cannot tell), when a child
 * process inheriting the thread's filters (a raw clone that runs nothing
 * of the program's) could create a timer and exit normally. The answer is
 * kept for the thread's number of filters, which only grows
 * (Seccomp_filters), so the probe runs once per filter set. Normal
 * context. */
CPROF__HIDDEN bool cprof__timer_create_allowed(void);

#endif
