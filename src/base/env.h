/*
 * Settings from CPROF_* environment variables, parsed in one place. Each
 * parser rejects anything malformed with one clear line on stderr naming
 * the variable and what is wrong, and reports "unset or bad" so the caller
 * leaves its feature off: a bad setting never stops the host program.
 * In a privileged process (setuid, setgid, file capabilities: AT_SECURE)
 * every CPROF_* variable reads as unset, as secure_getenv has it, and one
 * line says so. Values shown in messages are quoted and escaped, so a
 * message is one line whatever the value holds. Normal context only (the
 * constructor and the API).
 */
#ifndef CPROF_ENV_H
#define CPROF_ENV_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/internal.h"

/* Parses a whole decimal integer in [min, max] (no sign for min >= 0, no
 * trailing characters, no overflow). Returns 0, or CPROF_EINVAL with a
 * message in err. Pure: used by the env readers and the fuzzer. */
CPROF__HIDDEN int cprof__parse_int(const char *s, long long min, long long max,
                                   long long *out, char *err, size_t errlen);

/* Reads an integer variable. Returns true with *out set when the variable
 * is set and valid; false when it is unset, or bad (then one line on
 * stderr: "cprof: NAME=VALUE: <why>; <what is disabled>"). */
CPROF__HIDDEN bool cprof__env_int(const char *name, long long min,
                                  long long max, const char *disabled,
                                  long long *out);

/* The value of a variable, or NULL when unset or empty. */
CPROF__HIDDEN const char *cprof__env_str(const char *name);

/* The value of a variable as getenv has it (NULL when unset), or NULL in a
 * privileged process. Every CPROF_* variable is read through here; one that
 * the constructor took out of the environment still reads as it was. In
 * CPROF_HTTP every %p reads as the process's pid, so that processes that
 * inherit the address never contend for one socket. */
CPROF__HIDDEN const char *cprof__env_get(const char *name);

/* Whether name is one of cprof's settings (base/settings.h); any other
 * name reads as unset through cprof__env_get. */
CPROF__HIDDEN bool cprof__setting_known(const char *name);

/* The setting whose name is closest to name[0..n) when it is a likely
 * typo of it (a few letters apart), else NULL. Pure. */
CPROF__HIDDEN const char *cprof__setting_closest(const char *name, size_t n);

/* One line on stderr for each CPROF_* variable of envp that is not a
 * setting, naming the closest setting when there is one (at most eight
 * lines and one for the rest). Normal context. */
CPROF__HIDDEN void cprof__env_check_names(char *const *envp);

/* The decision behind cprof__env_get, with the process's AT_SECURE value
 * given: nonzero means the environment belongs to someone less privileged
 * than the process, so the variable reads as unset, and the first time a
 * variable that is set is ignored, one line says why. */
CPROF__HIDDEN const char *cprof__env_lookup(const char *name,
                                            unsigned long at_secure);

/* Writes s into out (outlen bytes, always terminated) with every "%p"
 * replaced by pid. Returns false when it does not fit. Pure. */
CPROF__HIDDEN bool cprof__expand_pid(char *out, size_t outlen, const char *s,
                                     long pid);

/* Entries ("NAME=VALUE", kept for the life of the process) that the
 * constructor took out of the environment (init.c): cprof__env_get still
 * reads them. Called once, before other threads run. */
CPROF__HIDDEN void cprof__env_keep_removed(char *const *entries, size_t n);

/* How many bytes of a value messages show, and a buffer that holds any
 * value quoted by cprof__quoted. */
#define CPROF__QUOTE_MAX 64
#define CPROF__QUOTED_SIZE (4 * CPROF__QUOTE_MAX + 32)

/* Writes the first max bytes of s[0..n) into out (outlen bytes, always
 * terminated) within double quotes, with C escapes for backslash, the
 * quote, control characters and bytes outside printable ASCII (\n, \t,
 * \x1b); a longer value is followed by `... (N bytes)`. Returns the length
 * written. Pure. */
CPROF__HIDDEN size_t cprof__quote(char *out, size_t outlen, const char *s,
                                  size_t n, size_t max);

/* s (NULL reads as "") quoted as above, at most CPROF__QUOTE_MAX bytes of
 * it, in buf; returns buf, for a "%s" in a message. */
CPROF__HIDDEN const char *cprof__quoted(char *buf, size_t len, const char *s);

/* SIGPIPE and SIGXFSZ held off the calling thread around cprof's writes
 * to pipes it does not own the reader of and to files: begin blocks them;
 * end takes back the one a failed write raised (failed_errno EPIPE: a
 * reader gone, SIGPIPE; EFBIG: a file at the process's RLIMIT_FSIZE,
 * SIGXFSZ; 0 for none), unless one was pending before (that one is the
 * program's), and restores the mask. So neither kills the program
 * through cprof. */
typedef struct cprof__write_guard {
  sigset_t old;
  bool pipe_pending, xfsz_pending;
} cprof__write_guard;
CPROF__HIDDEN void cprof__write_guard_begin(cprof__write_guard *g);
CPROF__HIDDEN void cprof__write_guard_end(cprof__write_guard *g,
                                          int failed_errno);

/* Prints "cprof: <message>" as one line on stderr, with one write(2) so
 * concurrent output cannot split it. After cprof__warn_redirect(fd), lines
 * go to fd instead, as long as it is still open on the same file (a line
 * is dropped rather than written into a descriptor the program reused);
 * cprof__warn_redirect(-1) goes back to stderr. SIGPIPE is held off. */
CPROF__HIDDEN void cprof__warn_redirect(int fd);
CPROF__HIDDEN void cprof__warn(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif
