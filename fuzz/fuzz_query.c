/*
 * libFuzzer target for the HTTP endpoint's input parsers (query.h): the
 * input as a query string, a URL path, an integer parameter, a /symbol
 * address list and a Host header, each from a heap copy of exactly its
 * size so ASan sees any read past the end. It checks the parsers' promises: decoded keys and
 * values lie inside the query's storage and are NUL-terminated, no pair is
 * longer than the input, and Atoi round-trips what it accepts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query.h"

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
      if (k < lo || k >= hi || v < lo || v >= hi) abort();
      size_t kl = strnlen(k, (size_t)(hi - k)), vl = strnlen(v, (size_t)(hi - v));
      if (k + kl >= hi || v + vl >= hi || kl > size || vl > size) abort();
      if (cprof__query_get(&q, k) == NULL) abort();
    }
  } else if (rc != CPROF_EINVAL || !err[0]) {
    abort();
  }

  char path[256];
  rc = cprof__path_decode(text, size, path, sizeof path, err, sizeof err);
  if (rc == 0 && strlen(path) > size) abort();
  if (rc != 0 && rc != CPROF_EINVAL) abort();

  /* Atoi on a NUL-terminated copy; what it accepts prints back the same
   * number. */
  char *z = malloc(size + 1);
  if (z) {
    memcpy(z, data, size);
    z[size] = 0;
    int64_t v;
    if (cprof__go_atoi(z, &v)) {
      char back[32];
      snprintf(back, sizeof back, "%" PRId64, v);
      int64_t again;
      if (!cprof__go_atoi(back, &again) || again != v) abort();
    }
    free(z);
  }

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
