/*
 * Parsers for what an HTTP client sends the endpoint: the query string
 * (percent-decoding, '+' as space, Go's "first value wins"), integer
 * parameters the way Go's strconv reads them, the '+'-separated address
 * list of /debug/pprof/symbol, and the Host header. Pure functions over caller memory: no
 * allocation, no globals, no I/O, so the fuzzer can drive them directly.
 */
#ifndef CPROF_QUERY_H
#define CPROF_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* The longest query string (bytes after '?') and the most parameters the
 * parser accepts; longer input is rejected, never truncated. */
#define CPROF__QUERY_MAX_LEN 4096
#define CPROF__QUERY_MAX_PAIRS 64

typedef struct cprof__query_pair {
  const char *key;   /* decoded, NUL-terminated, inside the query's storage */
  const char *value; /* "" when the pair had no '=' */
} cprof__query_pair;

typedef struct cprof__query {
  size_t npairs;
  cprof__query_pair pairs[CPROF__QUERY_MAX_PAIRS];
  /* Decoded text never grows, so the raw length plus one NUL per key and
   * value always fits. */
  char storage[CPROF__QUERY_MAX_LEN + 2 * CPROF__QUERY_MAX_PAIRS + 2];
} cprof__query;

/* Parses the len bytes at s (no leading '?') into q. Pairs are separated by
 * '&' (empty pairs skipped); keys and values are percent-decoded with '+'
 * as a space. Returns 0, or CPROF_EINVAL with a one-line reason in err
 * (a bad %-escape, a NUL byte, too long, too many parameters). */
CPROF__HIDDEN int cprof__query_parse(cprof__query *q, const char *s,
                                     size_t len, char *err, size_t errlen);

/* The first value of key, or NULL when the key is absent (Go's
 * r.FormValue returns "" then; callers treat NULL and "" alike). */
CPROF__HIDDEN const char *cprof__query_get(const cprof__query *q,
                                           const char *key);

/* Percent-decodes a URL path ('+' stays '+') from len bytes at s into out
 * (outlen bytes, NUL-terminated). Returns 0, or CPROF_EINVAL with a reason
 * (bad escape, NUL, does not fit). */
CPROF__HIDDEN int cprof__path_decode(const char *s, size_t len, char *out,
                                     size_t outlen, char *err, size_t errlen);

/* Go's strconv.ParseInt(s, 10, 64): an optional sign and decimal digits,
 * nothing else, within int64. Returns true with *out set. NULL is false. */
CPROF__HIDDEN bool cprof__go_atoi(const char *s, int64_t *out);

/* Go's strconv.ParseUint(s, 0, 64) as /symbol uses it (strtoull(s, 0, 0)
 * without its leniency): "0x"/"0X" hex, "0o"/"0O" or a leading 0 octal,
 * "0b"/"0B" binary, else decimal; no sign, no spaces, no overflow. The
 * len bytes at s need no NUL. Returns true with *out set. */
CPROF__HIDDEN bool cprof__parse_address(const char *s, size_t len,
                                        uint64_t *out);

/* Splits a /symbol request (POST body or GET query, len bytes at s) at '+'
 * and calls fn for each word that parses to a nonzero address, in order.
 * Words that do not parse are skipped, as Go skips them. Returns the number
 * of calls made. */
CPROF__HIDDEN size_t cprof__symbol_addresses(const char *s, size_t len,
                                             void (*fn)(uint64_t addr,
                                                        void *ctx),
                                             void *ctx);

/* True when the Host header's value (len bytes at s, no NUL needed) names
 * the loopback interface: "localhost", an IPv4 address in 127.0.0.0/8, or
 * an IPv6 loopback address in brackets ("[::1]", "[::ffff:127.0.0.1]"),
 * each with an optional ":port"; or when its host part equals listen_host
 * (the configured listen host, compared without case; NULL for none).
 * Anything else, a name that merely starts like one of these included, is
 * false. */
CPROF__HIDDEN bool cprof__host_is_loopback(const char *s, size_t len,
                                           const char *listen_host);

#endif
