/*
 * The /proc/PID/maps parser (see maps.h). It owns nothing: entries point
 * into the caller's text. It treats its input as hostile, so every field is
 * checked and every read is bounded by the length it was given; it must
 * never allocate, never look past len and never assume NUL termination.
 *
 * A line is "start-end perms offset dev inode[ path]": lower- or upper-case
 * hex for start, end, offset and the two halves of dev, four permission
 * characters ("rwxp" or "rwxs" with '-' for absent ones), a decimal inode,
 * then, after any run of blanks, a path that may itself contain spaces.
 */
#include <stdbool.h>
#include <string.h>

#include "encode/maps.h"

typedef struct cursor {
  const char *p;
  const char *end;
} cursor;

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Reads at least min_digits hex digits; fails on overflow of 64 bits. */
static bool parse_hex(cursor *c, size_t min_digits, uint64_t *out) {
  uint64_t v = 0;
  size_t n = 0;
  while (c->p < c->end) {
    int d = hex_value(*c->p);
    if (d < 0) break;
    if (v >> 60) return false;
    v = (v << 4) | (uint64_t)d;
    c->p++;
    n++;
  }
  if (n < min_digits) return false;
  *out = v;
  return true;
}

static bool parse_dec(cursor *c, uint64_t *out) {
  uint64_t v = 0;
  size_t n = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    uint64_t d = (uint64_t)(*c->p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
    c->p++;
    n++;
  }
  *out = v;
  return n > 0;
}

static bool expect(cursor *c, char ch) {
  if (c->p >= c->end || *c->p != ch) return false;
  c->p++;
  return true;
}

static bool parse_flag(cursor *c, char set, bool *out) {
  if (c->p >= c->end) return false;
  if (*c->p == set) {
    *out = true;
  } else if (*c->p == '-') {
    *out = false;
  } else {
    return false;
  }
  c->p++;
  return true;
}

static bool parse_perms(cursor *c, cprof__map_entry *e) {
  if (!parse_flag(c, 'r', &e->readable) || !parse_flag(c, 'w', &e->writable) ||
      !parse_flag(c, 'x', &e->executable))
    return false;
  if (c->p >= c->end) return false;
  if (*c->p == 's') {
    e->shared = true;
  } else if (*c->p == 'p') {
    e->shared = false;
  } else {
    return false;
  }
  c->p++;
  return true;
}

static bool is_blank(char ch) { return ch == ' ' || ch == '\t'; }

int cprof__maps_parse_line(const char *line, size_t len,
                           cprof__map_entry *out) {
  static const char deleted[] = " (deleted)";
  const size_t deleted_len = sizeof deleted - 1;
  cprof__map_entry e;
  memset(&e, 0, sizeof e);
  if (!line || !out) return CPROF_EINVAL;
  cursor c = {line, line + len};
  uint64_t major, minor;

  if (!parse_hex(&c, 1, &e.start) || !expect(&c, '-') ||
      !parse_hex(&c, 1, &e.end) || !expect(&c, ' ') || !parse_perms(&c, &e) ||
      !expect(&c, ' ') || !parse_hex(&c, 1, &e.offset) || !expect(&c, ' ') ||
      !parse_hex(&c, 2, &major) || !expect(&c, ':') ||
      !parse_hex(&c, 2, &minor) || !expect(&c, ' ') || !parse_dec(&c, &e.inode))
    return CPROF_EINVAL;
  if (e.start > e.end) return CPROF_EINVAL;
  /* Device numbers are 32 bits at most (12 major, 20 minor in the kernel). */
  if (major > UINT32_MAX || minor > UINT32_MAX) return CPROF_EINVAL;

  if (c.p < c.end) {
    /* Anything after the inode must be blanks and then, optionally, a path. */
    if (!is_blank(*c.p)) return CPROF_EINVAL;
    while (c.p < c.end && is_blank(*c.p)) c.p++;
  }
  e.path = c.p;
  e.path_len = (size_t)(c.end - c.p);
  if (e.path_len > deleted_len &&
      memcmp(e.path + e.path_len - deleted_len, deleted, deleted_len) == 0) {
    e.path_len -= deleted_len;
    e.deleted = true;
  }
  *out = e;
  return 0;
}

int cprof__maps_parse(const char *text, size_t len,
                      int (*cb)(const cprof__map_entry *e, void *ctx),
                      void *ctx) {
  if (!text && len) return CPROF_EINVAL;
  size_t pos = 0;
  while (pos < len) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t line_len = nl ? (size_t)(nl - (text + pos)) : len - pos;
    cprof__map_entry e;
    int err = cprof__maps_parse_line(text + pos, line_len, &e);
    if (err) return err;
    if (cb) {
      int rc = cb(&e, ctx);
      if (rc) return rc;
    }
    pos += line_len + (nl ? 1 : 0);
  }
  return 0;
}
