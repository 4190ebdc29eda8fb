/*
 * The dump specification parser (dumpspec.h). It walks the string once,
 * item by item, with explicit bounds; it does not allocate and depends only
 * on the integer parser and the quoting in env.c, so the fuzzer can drive
 * it alone. Parts of the spec quoted in messages are escaped, so a message
 * stays one line whatever the spec holds.
 */
#include <stdio.h>
#include <string.h>

#include "sink/dumpspec.h"
#include "base/env.h"

typedef struct known_profile {
  const char *name;
  const char *canonical;
  const char *rate_means; /* NULL: rate not accepted */
  long long rate_max;
} known_profile;

static const known_profile known[] = {
    {"cpu", "cpu", NULL, 0},
    {"heap", "heap", "bytes", 1LL << 40},
    {"allocs", "allocs", "bytes", 1LL << 40},
    {"threadcreate", "threadcreate", NULL, 0},
    {"goroutine", "goroutine", NULL, 0},
    {"threads", "goroutine", NULL, 0},
    {"mutex", "mutex", "fraction", 1000000000LL},
    {"block", "block", "nanoseconds", 1LL << 50},
};

/* Writes "<message> at column <c>" into err, with the part of the spec at
 * fault quoted (at most 40 bytes of it). */
static int fail(char *err, size_t errlen, size_t column, const char *what,
                const char *s, size_t n) {
  if (s) {
    char q[4 * 40 + 32];
    cprof__quote(q, sizeof q, s, n, 40);
    snprintf(err, errlen, "%s %s at column %zu", what, q, column);
  } else {
    snprintf(err, errlen, "%s at column %zu", what, column);
  }
  return CPROF_EINVAL;
}

static const known_profile *lookup(const char *s, size_t n) {
  for (size_t i = 0; i < CPROF__ARRAY_LEN(known); i++)
    if (strlen(known[i].name) == n && memcmp(known[i].name, s, n) == 0)
      return &known[i];
  return NULL;
}

/* Parses one "key=value" parameter of item it. */
static int parse_param(const char *spec, const char *p, size_t n,
                       const known_profile *k, cprof__dump_item *it,
                       unsigned *seen, char *err, size_t errlen) {
  size_t col = (size_t)(p - spec) + 1;
  if (n == 0) return fail(err, errlen, col, "empty parameter", NULL, 0);
  const char *eq = memchr(p, '=', n);
  if (!eq) return fail(err, errlen, col, "parameter without a value", p, n);
  size_t klen = (size_t)(eq - p), vlen = n - klen - 1;
  if (klen == 0) return fail(err, errlen, col, "parameter without a name", p, n);
  char value[32];
  if (vlen == 0 || vlen >= sizeof value)
    return fail(err, errlen, col + klen + 1,
                vlen ? "value too long" : "missing value", p, n);
  memcpy(value, eq + 1, vlen);
  value[vlen] = '\0';

  unsigned bit;
  long long min, max;
  if (klen == 5 && memcmp(p, "debug", 5) == 0) {
    bit = 1;
    min = 0;
    max = 2;
    if (strcmp(k->canonical, "cpu") == 0 && strcmp(value, "0") != 0)
      return fail(err, errlen, col, "cpu has no text form; debug must be 0",
                  p, n);
  } else if (klen == 4 && memcmp(p, "rate", 4) == 0) {
    if (!k->rate_means)
      return fail(err, errlen, col, "this profile takes no rate", p, n);
    bit = 2;
    min = 0;
    max = k->rate_max;
  } else if (klen == 2 && memcmp(p, "hz", 2) == 0) {
    if (strcmp(k->canonical, "cpu") != 0)
      return fail(err, errlen, col, "only cpu takes hz", p, n);
    bit = 4;
    min = 1;
    max = 10000;
  } else {
    return fail(err, errlen, col, "unknown parameter", p, klen);
  }
  if (*seen & bit) return fail(err, errlen, col, "duplicate parameter", p, klen);
  *seen |= bit;
  long long v;
  char why[80];
  if (cprof__parse_int(value, min, max, &v, why, sizeof why) != 0) {
    char what[128];
    snprintf(what, sizeof what, "bad value (%s) for", why);
    return fail(err, errlen, col + klen + 1, what, p, n);
  }
  if (bit == 1) it->debug = (int)v;
  if (bit == 2) {
    it->has_rate = true;
    it->rate = v;
  }
  if (bit == 4) it->hz = (int)v;
  return 0;
}

int cprof__dump_parse(const char *spec, cprof__dump_spec *out, char *err,
                      size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!spec || !*spec) return fail(err, errlen, 1, "empty specification", NULL, 0);
  const char *p = spec;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    size_t col = (size_t)(p - spec) + 1;
    if (n == 0) return fail(err, errlen, col, "empty item", NULL, 0);
    const char *eq = memchr(p, '=', n);
    size_t nlen = eq ? (size_t)(eq - p) : n;
    if (nlen == 0) return fail(err, errlen, col, "item without a profile name", p, n);
    const known_profile *k = lookup(p, nlen);
    if (!k) return fail(err, errlen, col, "unknown profile", p, nlen);
    for (size_t i = 0; i < out->n; i++)
      if (strcmp(out->items[i].name, k->canonical) == 0)
        return fail(err, errlen, col, "duplicate profile", p, nlen);
    if (out->n == CPROF__DUMP_MAX_ITEMS)
      return fail(err, errlen, col, "too many profiles", NULL, 0);
    cprof__dump_item *it = &out->items[out->n];
    it->name = k->canonical;
    if (eq) {
      const char *q = eq + 1, *item_end = p + n;
      if (q == item_end)
        return fail(err, errlen, (size_t)(q - spec) + 1,
                    "'=' without parameters after", p, nlen);
      unsigned seen = 0;
      for (;;) {
        const char *colon = memchr(q, ':', (size_t)(item_end - q));
        size_t plen = colon ? (size_t)(colon - q) : (size_t)(item_end - q);
        int rc = parse_param(spec, q, plen, k, it, &seen, err, errlen);
        if (rc) return rc;
        if (!colon) break;
        q = colon + 1;
        if (q == item_end)
          return fail(err, errlen, (size_t)(q - spec) + 1, "empty parameter",
                      NULL, 0);
      }
    }
    /* heap and allocs are two views of the same samples: one rate. */
    if (it->has_rate && k->rate_means && strcmp(k->rate_means, "bytes") == 0)
      for (size_t i = 0; i < out->n; i++)
        if (out->items[i].has_rate && out->items[i].rate != it->rate &&
            (strcmp(out->items[i].name, "heap") == 0 ||
             strcmp(out->items[i].name, "allocs") == 0))
          return fail(err, errlen, col,
                      "heap and allocs share one sampling rate; a different "
                      "rate for",
                      p, nlen);
    out->n++;
    if (!end) break;
    p = end + 1;
    if (!*p) return fail(err, errlen, (size_t)(p - spec) + 1, "empty item", NULL, 0);
  }
  return 0;
}
