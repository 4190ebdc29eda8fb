/*
 * libFuzzer target for the HTTP endpoint's input parsers (query.h): the
 * input as a query string, a URL path, an integer parameter, a /symbol
 * address list and a Host header, each from a heap copy of exactly its
 * size so ASan sees any read past the end. It checks the parsers' promises: decoded keys and
 * values lie inside the query's storage and are NUL-terminated at their
 * lengths, no pair is longer than the input, a cleaned path is clean (a
 * second cleaning changes nothing) and fits its buffer, an escaped path
 * decodes back, and ParseInt round-trips what it accepts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sink/http.h"
#include "sink/query.h"

static void count(uint64_t addr, void *ctx) {
  if (addr == 0) abort(); /* zero addresses are never reported */
  (*(size_t *)ctx)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);

  static cprof__query q;
  char err[128];
  int rc = cprof__query_parse(&q, text, size, err, sizeof err);
  if (rc == 0) {
    if (q.npairs > CPROF__QUERY_MAX_PAIRS) abort();
    const char *lo = q.storage, *hi = q.storage + sizeof q.storage;
    for (size_t i = 0; i < q.npairs; i++) {
      const char *k = q.pairs[i].key, *v = q.pairs[i].value;
      size_t kl = q.pairs[i].key_len, vl = q.pairs[i].value_len;
      if (k < lo || k >= hi || v < lo || v >= hi) abort();
      if (k + kl >= hi || v + vl >= hi || kl > size || vl > size) abort();
      if (k[kl] || v[vl]) abort();
      if (strlen(k) == kl && cprof__query_get(&q, k) == NULL) abort();
    }
  } else if (rc != CPROF_EINVAL || !err[0]) {
    abort();
  }

  /* An Authorization value as it is, and as Basic credentials (base64
   * decoded into a bounded buffer): no read past its end, and only the
   * token's exact credentials admitted. */
  if (cprof__http_token_ok("s3cret", text, size) &&
      (size < 6 || strncasecmp(text, "Basic ", 6) != 0) &&
      (size < 7 || strncasecmp(text, "Bearer ", 7) != 0))
    abort();
  char *basic = malloc(size + 6);
  if (basic) {
    memcpy(basic, "Basic ", 6);
    memcpy(basic + 6, text, size);
    (void)cprof__http_token_ok("s3cret", basic, size + 6);
    free(basic);
  }

  char path[256];
  size_t plen;
  rc = cprof__path_decode(text, size, path, sizeof path, &plen, err,
                          sizeof err);
  if (rc == 0 && (plen > size || path[plen])) abort();
  if (rc != 0 && rc != CPROF_EINVAL) abort();
  if (rc == 0) {
    char clean[sizeof path + 2], again[sizeof path + 2];
    char escaped[3 * sizeof clean + 1], back[sizeof escaped];
    size_t cn = cprof__path_clean(path, plen, clean);
    if (cn > plen + 1 || clean[cn] || clean[0] != '/') abort();
    size_t an = cprof__path_clean(clean, cn, again);
    if (an != cn || memcmp(again, clean, cn) != 0) abort();
    size_t en = cprof__path_escape(clean, cn, escaped), bn;
    if (en > 3 * cn || escaped[en] || memchr(escaped, '?', en)) abort();
    if (cprof__path_decode(escaped, en, back, sizeof back, &bn, err,
                           sizeof err) != 0 ||
        bn != cn || memcmp(back, clean, cn) != 0)
      abort();
  }

  /* ParseInt over the input; what it accepts prints back the same
   * number, a range error is clamped, a syntax error is 0. */
  int64_t v;
  cprof__int_parse how = cprof__go_parse_int(text, size, &v);
  if (how == CPROF__INT_OK) {
    char back[32];
    snprintf(back, sizeof back, "%" PRId64, v);
    int64_t again;
    if (!cprof__go_atoi(back, &again) || again != v) abort();
  } else if (how == CPROF__INT_RANGE ? v != INT64_MAX && v != INT64_MIN
                                     : how != CPROF__INT_SYNTAX || v != 0) {
    abort();
  }
  (void)cprof__is_form_type(text, size);

  size_t n = 0;
  size_t calls = cprof__symbol_addresses(text, size, count, &n);
  if (calls != n || calls > size + 1) abort();
  uint64_t addr;
  (void)cprof__parse_address(text, size, &addr);
  /* A Host that passes names loopback, so it holds no NUL. */
  if (cprof__host_is_loopback(text, size, "localhost") &&
      memchr(text, 0, size))
    abort();
  (void)cprof__host_is_loopback(text, size, NULL);
  free(text);
  return 0;
}
