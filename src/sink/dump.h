/*
 * Dumps: profiles listed in CPROF_DUMP (or given to cprof_dump_configure)
 * are collected from the start and written into the log as PEM blocks on
 * SIGTERM, SIGINT, SIGUSR1, at normal exit and at _exit. Signal handlers
 * (and _exit) only wake the dumper thread; the dump itself runs in normal
 * context. A fork child dumps as its parent does, with a dumper of its own.
 */
#ifndef CPROF_DUMP_H
#define CPROF_DUMP_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

#include "base/internal.h"

/* Reads CPROF_DUMP and CPROF_DUMP_OUT and configures dumps when set; a bad
 * value prints one line and leaves dumps off. Returns whether dumps are
 * on. Called by the constructor. */
CPROF__HIDDEN bool cprof__dump_env_init(void);

/* Called by the exec interposers in a process that is not the one whose
 * environment cprof changed, with its pid: a fork child that tries to exec
 * is being replaced, and no longer dumps at exit, even if the exec fails.
 * Async-signal-safe; in a vfork child (another pid than the one the dump
 * state belongs to) it does nothing. */
CPROF__HIDDEN void cprof__dump_exec_attempt(pid_t pid);

/* Asks the dumper for the final dump and waits for it (at most
 * DUMP_WAIT_MS), in the process that configured dumps; elsewhere returns
 * at once. For the _exit interposers (src/exit.c). Async-signal-safe. */
CPROF__HIDDEN void cprof__dump_before_exit(void);

/* Asks for a dump of every listed profile now, as a dump signal that lets
 * the program carry on does, with reason in the blocks' Reason header
 * (a static string), and waits for it (at most DUMP_WAIT_MS). In the root
 * of a process tree (tree.h) the members dump too, and *members says how
 * many did. Returns 0, or
 * CPROF_EINVAL when this process has no dumps configured. Normal
 * context; not from the dumper thread. */
CPROF__HIDDEN int cprof__dump_now(const char *reason, size_t *members);


#endif
