/*
 * Names for code that no file backs: the functions a JIT compiler wrote
 * into anonymous memory, from the /tmp/perf-PID.map file that runtimes
 * write on request (node --perf-basic-prof, LuaJIT's and the JVM's perf
 * agents), the same file perf reads. Each line is
 *
 *   START SIZE NAME
 *
 * with START and SIZE in hexadecimal (an optional 0x), NAME the rest of
 * the line. A later line for the same address wins: a JIT reuses memory.
 *
 * The file is outside input in a world-writable directory, so it is read
 * only when it is a regular file (no symlink followed) owned by the
 * process's effective user and writable by nobody else, at most
 * CPROF__PERFMAP_MAX_BYTES of it; it is read again, from where the last
 * read stopped, when it grows, and whole when it is replaced, shrinks or
 * is rewritten in place.
 * CPROF_PERF_MAP=off turns the reading off, as does a privileged
 * (AT_SECURE) process. Not signal-safe; callers serialize (the
 * symbolizer's lock).
 */
#ifndef CPROF_PERFMAP_H
#define CPROF_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

/* What of the file is read at most, and the longest name kept (longer
 * ones are cut). */
#define CPROF__PERFMAP_MAX_BYTES ((size_t)64 << 20)
#define CPROF__PERFMAP_NAME_MAX 1024

/* Parses complete lines of text (len bytes, the last line ended by a
 * newline or not counted) into the table, as if appended to the file
 * read so far; a malformed line is skipped. Returns the number of bytes
 * consumed (up to the last newline), or (size_t)-1 when memory ran out.
 * For the refresh and the fuzzer. */
CPROF__HIDDEN size_t cprof__perfmap_feed(const char *text, size_t len);

/* Brings the table up to date with /tmp/perf-PID.map (PID the caller's):
 * cheap (one fstat) when the file did not change. Returns true when the
 * table changed, so that names given before may be stale. */
CPROF__HIDDEN bool cprof__perfmap_refresh(void);

/* The name of the newest entry that covers pc, and its first address in
 * *start; NULL when none does. The string lives until the next
 * lookup. */
CPROF__HIDDEN const char *cprof__perfmap_lookup(uintptr_t pc,
                                                uintptr_t *start);

/* How many entries the table holds. */
CPROF__HIDDEN size_t cprof__perfmap_entries(void);

/* Forgets the table and the file (a fork child's file has its own pid). */
CPROF__HIDDEN void cprof__perfmap_reset(void);

#endif
