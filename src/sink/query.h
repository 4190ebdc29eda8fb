/*
 * Parsers for what an HTTP client sends the endpoint: the query string and
 * an urlencoded POST body (Go's url.ParseQuery: percent-decoding, '+' as
 * space, "first value wins", a pair that does not decode dropped), the
 * request path (decoded, then cleaned as Go's ServeMux cleans it, and
 * escaped back for a redirect's Location), integer parameters the way
 * Go's strconv reads them, the '+'-separated address list of
 * /debug/pprof/symbol, the Content-Type of a form, and the Host header.
 * Pure functions over caller memory: no allocation, no globals, no I/O, so
 * the fuzzer can drive them directly.
 */
#ifndef CPROF_QUERY_H
#define CPROF_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

/* The longest query string (bytes after '?') or urlencoded POST body and
 * the most parameters the parser accepts; longer input is rejected, never
 * truncated. */
#define CPROF__QUERY_MAX_LEN 4096
#define CPROF__QUERY_MAX_PAIRS 64

typedef struct cprof__query_pair {
  const char *key;   /* decoded, NUL-terminated, inside the query's storage */
  const char *value; /* "" when the pair had no '=' */
  /* The decoded lengths: "%00" decodes to a NUL, which Go keeps, so a key
   * or value may hold NULs before its terminating one. */
  size_t key_len, value_len;
} cprof__query_pair;

typedef struct cprof__query {
  size_t npairs;
  cprof__query_pair pairs[CPROF__QUERY_MAX_PAIRS];
  /* Decoded text never grows, so the raw length plus one NUL per key and
   * value always fits. */
  char storage[CPROF__QUERY_MAX_LEN + 2 * CPROF__QUERY_MAX_PAIRS + 2];
} cprof__query;

/* Parses the len bytes at s (no leading '?') into q as Go's url.ParseQuery
 * does: pairs are separated by '&' (empty pairs skipped); keys and values
 * are percent-decoded with '+' as a space; a pair holding ';' or an escape
 * that does not decode ("%zz", a '%' near the end) is dropped, and the
 * others kept. Returns 0, or CPROF_EINVAL with a one-line reason in err
 * (too long, more than CPROF__QUERY_MAX_PAIRS pairs kept). */
CPROF__HIDDEN int cprof__query_parse(cprof__query *q, const char *s,
                                     size_t len, char *err, size_t errlen);

/* The first value of key (compared over the decoded key's whole length),
 * or NULL when the key is absent (Go's r.FormValue returns "" then;
 * callers treat NULL and "" alike). With len, *len is the value's length,
 * NULs inside included. */
CPROF__HIDDEN const char *cprof__query_get(const cprof__query *q,
                                           const char *key);
CPROF__HIDDEN const char *cprof__query_value(const cprof__query *q,
                                             const char *key, size_t *len);

/* Percent-decodes a URL path ('+' stays '+') from len bytes at s into out
 * (outlen bytes, NUL-terminated), *outlen_used bytes before the NUL; a
 * "%00" is a NUL inside, as in Go's URL.Path. Returns 0, or CPROF_EINVAL
 * with a reason (a bad escape, does not fit). */
CPROF__HIDDEN int cprof__path_decode(const char *s, size_t len, char *out,
                                     size_t outlen, size_t *outlen_used,
                                     char *err, size_t errlen);

/* Go's ServeMux cleanPath: a leading '/' added, path.Clean ("//", "." and
 * ".." elements resolved), a trailing '/' kept. Reads len bytes at p
 * (NULs are ordinary bytes) and writes the result to out, which must have
 * room for len + 2 bytes, NUL-terminated; returns its length. */
CPROF__HIDDEN size_t cprof__path_clean(const char *p, size_t len, char *out);

/* Go's url.URL.EscapedPath for a path without RawPath: every byte but
 * letters, digits and -._~$&+,/:;=@ as %XX (upper case). Writes to out,
 * which must have room for 3 * len + 1 bytes, NUL-terminated; returns the
 * length. */
CPROF__HIDDEN size_t cprof__path_escape(const char *p, size_t len, char *out);

/* How Go's strconv.ParseInt(s, 10, 64) ends. */
typedef enum cprof__int_parse {
  CPROF__INT_OK,
  CPROF__INT_RANGE,  /* out of int64: the value is clamped, as Go's is */
  CPROF__INT_SYNTAX, /* not an integer: the value is 0 */
} cprof__int_parse;

/* Go's strconv.ParseInt(s, 10, 64) (and so strconv.Atoi on 64 bits) over
 * the len bytes at s, NULs included: an optional sign and decimal digits,
 * nothing else. *out is set as Go sets its result: the number, INT64_MAX
 * or INT64_MIN for a range error (which Go reports at the first digit
 * that overflows 64 bits, whatever follows), 0 for a syntax error. */
CPROF__HIDDEN cprof__int_parse cprof__go_parse_int(const char *s, size_t len,
                                                   int64_t *out);

/* cprof__go_parse_int over a NUL-terminated s: true only for
 * CPROF__INT_OK. NULL is false. */
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

/* True when a Content-Type value (len bytes at s, no NUL needed) is
 * application/x-www-form-urlencoded the way Go's parsePostForm reads it
 * (mime.ParseMediaType): parameters after ';' ignored, surrounding spaces
 * and the case of the type itself too. */
CPROF__HIDDEN bool cprof__is_form_type(const char *s, size_t len);

/* True when the Host header's value (len bytes at s, no NUL needed) names
 * the loopback interface: "localhost", an IPv4 address in 127.0.0.0/8, or
 * an IPv6 loopback address in brackets ("[::1]", "[::ffff:127.0.0.1]"),
 * each with an optional ":port"; or when its host part equals listen_host
 * (the configured listen host, compared without case; NULL for none).
 * Anything else, a name that merely starts like one of these included, is
 * false. */
CPROF__HIDDEN bool cprof__host_is_loopback(const char *s, size_t len,
                                           const char *listen_host);

/* Constant-time check of an Authorization header value (len bytes, which
 * may include NULs) against "Bearer <token>", or Basic credentials whose
 * password is the token; true when token is NULL. Kept here with the other
 * parsers of outside input, so that its fuzzer links no more than them. */
CPROF__HIDDEN bool cprof__http_token_ok(const char *token,
                                        const char *authorization,
                                        size_t len);

#endif
