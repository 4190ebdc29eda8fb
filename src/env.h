/*
 * Settings from CPROF_* environment variables, parsed in one place. Each
 * parser rejects anything malformed with one clear line on stderr naming
 * the variable and what is wrong, and reports "unset or bad" so the caller
 * leaves its feature off: a bad setting never stops the host program.
 * Normal context only (the constructor and the API).
 */
#ifndef CPROF_ENV_H
#define CPROF_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

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

/* Prints "cprof: <message>" as one line on stderr, with one write(2) so
 * concurrent output cannot split it. */
CPROF__HIDDEN void cprof__warn(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif
