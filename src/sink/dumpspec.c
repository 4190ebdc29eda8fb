/*
 * The dump specification parser (dumpspec.h). It walks the string once,
 * item by item, with explicit bounds; it does not allocate and depends only
 * on the integer parser and the quoting in env.c, and on the table of
 * profiles its caller gives (dump.c's, from the registry), so the fuzzer
 * can drive it alone. Parts of the spec quoted in messages are escaped, so a message
 * stays one line whatever the spec holds.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sink/dumpspec.h"
#include "base/env.h"

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

static const cprof__dump_profile *lookup(const cprof__dump_profile *known,
                                         size_t nknown, const char *s,
                                         size_t n) {
  for (size_t i = 0; i < nknown; i++)
    if (strlen(known[i].name) == n && memcmp(known[i].name, s, n) == 0)
      return &known[i];
  return NULL;
}

/* The profile that alone takes key as its rate, or NULL when none or
 * several do. */
static const cprof__dump_profile *only_taker(const cprof__dump_profile *known,
                                             size_t nknown, const char *key,
                                             size_t klen) {
  const cprof__dump_profile *found = NULL;
  for (size_t i = 0; i < nknown; i++) {
    const char *rk = known[i].rate_key;
    if (!rk || strlen(rk) != klen || memcmp(rk, key, klen) != 0) continue;
    if (found && strcmp(found->canonical, known[i].canonical) != 0)
      return NULL;
    found = &known[i];
  }
  return found;
}

static bool takes_as_rate(const cprof__dump_profile *known, size_t nknown,
                          const char *key, size_t klen) {
  for (size_t i = 0; i < nknown; i++) {
    const char *rk = known[i].rate_key;
    if (rk && strlen(rk) == klen && memcmp(rk, key, klen) == 0) return true;
  }
  return false;
}

/* Parses one "key=value" parameter of item it. */
static int parse_param(const cprof__dump_profile *known, size_t nknown,
                       const char *spec, const char *p, size_t n,
                       const cprof__dump_profile *k, cprof__dump_item *it,
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
    max = k->max_debug;
    if (k->max_debug == 0 && strcmp(value, "0") != 0) {
      char what[64];
      snprintf(what, sizeof what, "%s has no text form; debug must be 0",
               k->canonical);
      return fail(err, errlen, col, what, p, n);
    }
  } else if (k->rate_key && strlen(k->rate_key) == klen &&
             memcmp(p, k->rate_key, klen) == 0) {
    bit = 2;
    min = k->rate_min;
    max = k->rate_max;
  } else if (takes_as_rate(known, nknown, p, klen)) {
    const cprof__dump_profile *only = only_taker(known, nknown, p, klen);
    char what[64];
    if (only && k->rate_key)
      snprintf(what, sizeof what, "only %s takes %.*s", only->canonical,
               (int)klen, p);
    else
      snprintf(what, sizeof what, "this profile takes no %.*s", (int)klen, p);
    return fail(err, errlen, col, what, p, n);
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
  return 0;
}

int cprof__dump_parse_with(const cprof__dump_profile *known, size_t nknown,
                           const char *spec, cprof__dump_spec *out, char *err,
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
    const cprof__dump_profile *k = lookup(known, nknown, p, nlen);
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
        int rc = parse_param(known, nknown, spec, q, plen, k, it, &seen, err,
                             errlen);
        if (rc) return rc;
        if (!colon) break;
        q = colon + 1;
        if (q == item_end)
          return fail(err, errlen, (size_t)(q - spec) + 1, "empty parameter",
                      NULL, 0);
      }
    }
    /* Profiles that are views of the same samples (heap and allocs) have
     * one rate. */
    for (size_t i = 0; it->has_rate && k->rate_shared && i < out->n; i++) {
      const cprof__dump_item *o = &out->items[i];
      if (o->has_rate && o->rate_shared == k->rate_shared &&
          o->rate != it->rate) {
        char what[96];
        snprintf(what, sizeof what,
                 "%s and %s share one sampling rate; a different rate for",
                 o->name, k->canonical);
        return fail(err, errlen, col, what, p, nlen);
      }
    }
    it->rate_shared = k->rate_shared;
    out->n++;
    if (!end) break;
    p = end + 1;
    if (!*p) return fail(err, errlen, (size_t)(p - spec) + 1, "empty item", NULL, 0);
  }
  return 0;
}
