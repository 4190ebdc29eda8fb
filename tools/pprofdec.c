/*
 * The pprof reader behind `cprof top` (see pprofdec.h): zlib's inflate for
 * the gzip layer, a hand-written protobuf decoder for profile.proto, and
 * go tool pprof's -top arithmetic and number formatting. It owns every byte
 * it returns (strings are copied out of the input). Input is untrusted: it
 * must never read past a field's end, trust a length or an index without
 * checking it, or grow memory beyond what the input's size justifies.
 */
#include "pprofdec.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (len) vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

/* Makes room for need elements in *arr (capacity *cap, elements of size
 * elem), doubling. */
static int grow(void *arrp, size_t *cap, size_t need, size_t elem) {
  void **arr = arrp;
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) {
    if (nc > SIZE_MAX / 2) return -1;
    nc *= 2;
  }
  if (nc > SIZE_MAX / elem) return -1;
  void *p = realloc(*arr, nc * elem);
  if (!p) return -1;
  *arr = p;
  *cap = nc;
  return 0;
}

/* Inflates every member of the gzip stream in data (Go's reader accepts
 * several, one after another). With buf NULL the output is only counted,
 * in a scratch buffer; otherwise it goes into buf, which holds cap bytes.
 * Stops with PPROFDEC_ETOOBIG as soon as the output passes max bytes, so a
 * gzip bomb costs at most max bytes of inflating. */
static int inflate_members(const unsigned char *data, size_t len, size_t max,
                           unsigned char *buf, size_t cap, size_t *outlen,
                           char *err, size_t errlen) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    return fail(err, errlen, "cannot start zlib");
  unsigned char scratch[16384];
  const unsigned char *in = data;
  size_t left = len, n = 0;
  int rc = -1;
  for (;;) {
    unsigned char *dst = buf ? buf + n : scratch;
    size_t room = buf ? cap - n : sizeof scratch;
    if (room == 0) {
      /* Only when the input changed between the two passes. */
      fail(err, errlen, "the gzip stream changed while being read");
      goto out;
    }
    uInt in_chunk = left > UINT_MAX ? UINT_MAX : (uInt)left;
    uInt out_chunk = room > UINT_MAX ? UINT_MAX : (uInt)room;
    z.next_in = (unsigned char *)in;
    z.avail_in = in_chunk;
    z.next_out = dst;
    z.avail_out = out_chunk;
    int zr = inflate(&z, Z_NO_FLUSH);
    in += in_chunk - z.avail_in;
    left -= in_chunk - z.avail_in;
    n += out_chunk - z.avail_out;
    if (n > max) {
      char lim[32];
      pprofdec_format_size(lim, sizeof lim, max);
      fail(err, errlen, "decompressed profile larger than the %s limit", lim);
      rc = PPROFDEC_ETOOBIG;
      goto out;
    }
    if (zr == Z_STREAM_END) {
      if (left >= 2 && in[0] == 0x1f && in[1] == 0x8b) {
        inflateReset(&z);
        continue;
      }
      if (left) {
        fail(err, errlen, "unexpected data after the gzip stream");
        goto out;
      }
      break;
    }
    if (zr == Z_BUF_ERROR && z.avail_out != 0) {
      fail(err, errlen, "truncated gzip stream");
      goto out;
    }
    if (zr != Z_OK && zr != Z_BUF_ERROR) {
      fail(err, errlen, "bad gzip stream: %s", z.msg ? z.msg : "error");
      goto out;
    }
  }
  *outlen = n;
  rc = 0;
out:
  inflateEnd(&z);
  return rc;
}

int pprofdec_gunzip(const unsigned char *data, size_t len, size_t max,
                    unsigned char **out, size_t *outlen, char *err,
                    size_t errlen) {
  size_t n;
  int rc = inflate_members(data, len, max, NULL, 0, &n, err, errlen);
  if (rc || !out) {
    if (rc == 0) *outlen = n;
    return rc;
  }
  /* The second pass fills a buffer of the measured size exactly; the byte
   * to spare lets inflate finish the stream with room left. */
  unsigned char *buf = malloc(n + 1);
  if (!buf) return fail(err, errlen, "out of memory");
  rc = inflate_members(data, len, max, buf, n + 1, outlen, err, errlen);
  if (rc == 0 && *outlen != n)
    rc = fail(err, errlen, "the gzip stream changed while being read");
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  return 0;
}

/* A bounded protobuf reader. */
typedef struct rd {
  const unsigned char *p, *end;
} rd;

static int rd_varint(rd *r, uint64_t *v) {
  uint64_t x = 0;
  for (int i = 0; i < 10; i++) {
    if (r->p >= r->end) return -1;
    unsigned char b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

static int rd_tag(rd *r, uint64_t *field, int *wire) {
  uint64_t t;
  if (rd_varint(r, &t) || (t >> 3) == 0) return -1;
  *field = t >> 3;
  *wire = (int)(t & 7);
  return 0;
}

static int rd_sub(rd *r, rd *sub) {
  uint64_t n;
  if (rd_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
  sub->p = r->p;
  sub->end = r->p + n;
  r->p += n;
  return 0;
}

static int rd_skip(rd *r, int wire) {
  uint64_t v;
  rd s;
  switch (wire) {
    case 0: return rd_varint(r, &v);
    case 1:
      if (r->end - r->p < 8) return -1;
      r->p += 8;
      return 0;
    case 2: return rd_sub(r, &s);
    case 5:
      if (r->end - r->p < 4) return -1;
      r->p += 4;
      return 0;
    default: return -1;
  }
}

/* The decoder's working state: the profile plus what refers to strings by
 * index until the string table (usually last) has been read. */
typedef struct dec {
  pprofdec_profile *p;
  size_t cap_types, cap_samples, cap_locids, cap_values, cap_locs, cap_lines,
      cap_funcs, cap_strings, cap_comments, cap_fidx;
  uint64_t *type_idx; /* two per sample type */
  uint64_t *func_idx; /* two per function: name, filename */
  uint64_t *map_idx;  /* the filename of each mapping */
  size_t cap_maps, cap_midx;
  uint64_t *comment_idx;
  uint64_t *values; /* the samples' values as read; become p->values */
  uint64_t default_type_idx, period_idx[2], main_idx[2];
  bool have_mapping;
  /* What the decoded profile may still take, in bytes: the decoder's
   * arrays and strings together stay within PPROFDEC_DECODED_RATIO times
   * the limit, however small the elements the input repeats (an empty
   * sample is 2 bytes of input and 32 of memory). */
  size_t budget;
  bool too_big;
} dec;

/* grow() for the decoder's arrays, charging what they grow by to the
 * budget; refuses (too_big) what would pass it. */
static int dec_grow(dec *d, void *arrp, size_t *cap, size_t need,
                    size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) {
    if (nc > SIZE_MAX / 2) return -1;
    nc *= 2;
  }
  if (nc > SIZE_MAX / elem) return -1;
  size_t more = (nc - *cap) * elem;
  if (more > d->budget) {
    d->too_big = true;
    return -1;
  }
  d->budget -= more;
  return grow(arrp, cap, nc, elem);
}

static int push_u64(dec *d, uint64_t **arr, size_t *cap, size_t n,
                    uint64_t v) {
  if (dec_grow(d, arr, cap, n + 1, sizeof **arr)) return -1;
  (*arr)[n] = v;
  return 0;
}

/* One value or a packed run of them, appended to *arr. */
static int rd_ints(dec *d, rd *r, int wire, uint64_t **arr, size_t *cap,
                   size_t *n) {
  uint64_t v;
  if (wire == 0) {
    if (rd_varint(r, &v) || push_u64(d, arr, cap, *n, v)) return -1;
    (*n)++;
    return 0;
  }
  if (wire != 2) return -1;
  rd s;
  if (rd_sub(r, &s)) return -1;
  while (s.p < s.end) {
    if (rd_varint(&s, &v) || push_u64(d, arr, cap, *n, v)) return -1;
    (*n)++;
  }
  return 0;
}

static int read_value_type(rd *r, uint64_t *type, uint64_t *unit) {
  uint64_t f;
  int w;
  *type = *unit = 0;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    if (f == 1 && w == 0) {
      if (rd_varint(r, type)) return -1;
    } else if (f == 2 && w == 0) {
      if (rd_varint(r, unit)) return -1;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  return 0;
}

static int read_sample(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  if (dec_grow(d, &p->samples, &d->cap_samples, p->nsamples + 1,
               sizeof *p->samples))
    return -1;
  pprofdec_sample *s = &p->samples[p->nsamples];
  s->first_location = p->nlocation_ids;
  s->first_value = p->nvalues;
  uint64_t f;
  int w;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    if (f == 1) {
      if (rd_ints(d, r, w, &p->location_ids, &d->cap_locids, &p->nlocation_ids))
        return -1;
    } else if (f == 2) {
      /* int64 values travel as their two's complement bits. */
      if (rd_ints(d, r, w, &d->values, &d->cap_values, &p->nvalues)) return -1;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  s->nlocations = p->nlocation_ids - s->first_location;
  s->nvalues = p->nvalues - s->first_value;
  p->nsamples++;
  return 0;
}

static int read_line(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  if (dec_grow(d, &p->lines, &d->cap_lines, p->nlines + 1, sizeof *p->lines))
    return -1;
  pprofdec_line *l = &p->lines[p->nlines];
  memset(l, 0, sizeof *l);
  uint64_t f, v;
  int w;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    if ((f == 1 || f == 2) && w == 0) {
      if (rd_varint(r, &v)) return -1;
      if (f == 1)
        l->function_id = v;
      else
        l->line = (int64_t)v;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  p->nlines++;
  return 0;
}

static int read_location(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  if (dec_grow(d, &p->locations, &d->cap_locs, p->nlocations + 1,
           sizeof *p->locations))
    return -1;
  pprofdec_location loc = {0, 0, 0, p->nlines, 0};
  uint64_t f;
  int w;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    if (f == 1 && w == 0) {
      if (rd_varint(r, &loc.id)) return -1;
    } else if (f == 2 && w == 0) {
      if (rd_varint(r, &loc.mapping_id)) return -1;
    } else if (f == 3 && w == 0) {
      if (rd_varint(r, &loc.address)) return -1;
    } else if (f == 4 && w == 2) {
      rd s;
      if (rd_sub(r, &s) || read_line(d, &s)) return -1;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  loc.nlines = p->nlines - loc.first_line;
  p->locations[p->nlocations++] = loc;
  return 0;
}

static int read_function(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  if (dec_grow(d, &p->functions, &d->cap_funcs, p->nfunctions + 1,
           sizeof *p->functions))
    return -1;
  uint64_t id = 0, name = 0, file = 0;
  uint64_t f;
  int w;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    if (f == 1 && w == 0) {
      if (rd_varint(r, &id)) return -1;
    } else if (f == 2 && w == 0) {
      if (rd_varint(r, &name)) return -1;
    } else if (f == 4 && w == 0) {
      if (rd_varint(r, &file)) return -1;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  size_t i = p->nfunctions;
  if (push_u64(d, &d->func_idx, &d->cap_fidx, 2 * i, name) ||
      push_u64(d, &d->func_idx, &d->cap_fidx, 2 * i + 1, file))
    return -1;
  p->functions[i] = (pprofdec_function){id, NULL, NULL};
  p->nfunctions++;
  return 0;
}

static int read_mapping(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  uint64_t f, v, id = 0, file = 0, build_id = 0;
  int w;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    if ((f == 1 || f == 5 || f == 6) && w == 0) {
      if (rd_varint(r, &v)) return -1;
      if (f == 1) id = v;
      if (f == 5) file = v;
      if (f == 6) build_id = v;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  if (!d->have_mapping) d->main_idx[0] = file, d->main_idx[1] = build_id;
  d->have_mapping = true;
  if (dec_grow(d, &p->mappings, &d->cap_maps, p->nmappings + 1,
               sizeof *p->mappings) ||
      push_u64(d, &d->map_idx, &d->cap_midx, p->nmappings, file))
    return -1;
  p->mappings[p->nmappings++] = (pprofdec_mapping){id, NULL};
  return 0;
}

static int read_string(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  rd s;
  if (rd_sub(r, &s) ||
      dec_grow(d, &p->strings, &d->cap_strings, p->nstrings + 1,
               sizeof *p->strings))
    return -1;
  size_t n = (size_t)(s.end - s.p);
  const unsigned char *nul = memchr(s.p, 0, n);
  if (nul) n = (size_t)(nul - s.p);
  /* A string costs its bytes, its NUL and malloc's overhead. */
  if (n + 1 + 2 * sizeof(size_t) > d->budget) {
    d->too_big = true;
    return -1;
  }
  d->budget -= n + 1 + 2 * sizeof(size_t);
  char *c = malloc(n + 1);
  if (!c) return -1;
  memcpy(c, s.p, n);
  c[n] = 0;
  p->strings[p->nstrings++] = c;
  return 0;
}

static int read_profile(dec *d, rd *r) {
  pprofdec_profile *p = d->p;
  uint64_t f, v;
  int w;
  size_t ntype_idx = 0;
  while (r->p < r->end) {
    if (rd_tag(r, &f, &w)) return -1;
    rd s;
    if (w == 2 && (f == 1 || f == 2 || f == 3 || f == 4 || f == 5 || f == 11)) {
      if (rd_sub(r, &s)) return -1;
      int err = 0;
      if (f == 1) {
        uint64_t t, u;
        err = read_value_type(&s, &t, &u) ||
              push_u64(d, &d->type_idx, &d->cap_types, ntype_idx, t) ||
              push_u64(d, &d->type_idx, &d->cap_types, ntype_idx + 1, u);
        ntype_idx += 2;
        p->nsample_types++;
      } else if (f == 2) {
        err = read_sample(d, &s);
      } else if (f == 3) {
        err = read_mapping(d, &s);
      } else if (f == 4) {
        err = read_location(d, &s);
      } else if (f == 5) {
        err = read_function(d, &s);
      } else {
        err = read_value_type(&s, &d->period_idx[0], &d->period_idx[1]);
      }
      if (err) return -1;
    } else if (f == 6 && w == 2) {
      if (read_string(d, r)) return -1;
    } else if (f == 13) {
      if (rd_ints(d, r, w, &d->comment_idx, &d->cap_comments, &p->ncomments))
        return -1;
    } else if ((f == 9 || f == 10 || f == 12 || f == 14) && w == 0) {
      if (rd_varint(r, &v)) return -1;
      if (f == 9) p->time_nanos = (int64_t)v;
      if (f == 10) p->duration_nanos = (int64_t)v;
      if (f == 12) p->period = (int64_t)v;
      if (f == 14) d->default_type_idx = v;
    } else if (rd_skip(r, w)) {
      return -1;
    }
  }
  return 0;
}

static const char *str_at(const pprofdec_profile *p, uint64_t i) {
  return i < p->nstrings ? p->strings[i] : "";
}

static int by_location_id(const void *a, const void *b) {
  uint64_t x = ((const pprofdec_location *)a)->id;
  uint64_t y = ((const pprofdec_location *)b)->id;
  return x < y ? -1 : x > y;
}

static int by_function_id(const void *a, const void *b) {
  uint64_t x = ((const pprofdec_function *)a)->id;
  uint64_t y = ((const pprofdec_function *)b)->id;
  return x < y ? -1 : x > y;
}

int pprofdec_decode(const unsigned char *data, size_t len, pprofdec_profile *p,
                    char *err, size_t errlen) {
  return pprofdec_decode_max(data, len, PPROFDEC_MAX_SIZE, p, err, errlen);
}

int pprofdec_decode_max(const unsigned char *data, size_t len, size_t max,
                        pprofdec_profile *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  unsigned char *raw = NULL;
  size_t rawlen = len;
  const unsigned char *msg = data;
  if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    int zr = pprofdec_gunzip(data, len, max, &raw, &rawlen, err, errlen);
    if (zr) return zr;
    msg = raw;
  } else if (len > max) {
    char lim[32];
    pprofdec_format_size(lim, sizeof lim, max);
    fail(err, errlen, "profile larger than the %s limit", lim);
    return PPROFDEC_ETOOBIG;
  }
  dec d;
  memset(&d, 0, sizeof d);
  d.p = p;
  size_t floor = (size_t)1 << 20;
  d.budget = max > (SIZE_MAX - floor) / PPROFDEC_DECODED_RATIO
                 ? SIZE_MAX
                 : max * PPROFDEC_DECODED_RATIO + floor;
  rd r = {msg, msg + rawlen};
  int rc = read_profile(&d, &r);
  free(raw);
  /* Reading the bits through the signed type is allowed (C11 6.5p7). */
  p->values = (int64_t *)d.values;
  if (rc && d.too_big) {
    char lim[32];
    pprofdec_format_size(lim, sizeof lim, max);
    fail(err, errlen,
         "decoding the profile would take more than %d times the %s limit "
         "in memory",
         PPROFDEC_DECODED_RATIO, lim);
    rc = PPROFDEC_ETOOBIG;
    goto bad;
  }
  if (rc) {
    fail(err, errlen, "not a valid pprof profile (malformed protobuf)");
    goto bad;
  }
  if (p->nsample_types == 0) {
    fail(err, errlen, "the profile has no sample types");
    goto bad;
  }
  for (size_t i = 0; i < p->nsamples; i++)
    if (p->samples[i].nvalues != p->nsample_types) {
      fail(err, errlen, "a sample has %zu values for %zu sample types",
           p->samples[i].nvalues, p->nsample_types);
      goto bad;
    }
  p->sample_types = calloc(p->nsample_types, sizeof *p->sample_types);
  p->comments = calloc(p->ncomments ? p->ncomments : 1, sizeof *p->comments);
  if (!p->sample_types || !p->comments) {
    fail(err, errlen, "out of memory");
    goto bad;
  }
  for (size_t i = 0; i < p->nsample_types; i++) {
    p->sample_types[i].type = str_at(p, d.type_idx[2 * i]);
    p->sample_types[i].unit = str_at(p, d.type_idx[2 * i + 1]);
  }
  for (size_t i = 0; i < p->ncomments; i++)
    p->comments[i] = str_at(p, d.comment_idx[i]);
  for (size_t i = 0; i < p->nfunctions; i++) {
    p->functions[i].name = str_at(p, d.func_idx[2 * i]);
    p->functions[i].filename = str_at(p, d.func_idx[2 * i + 1]);
  }
  for (size_t i = 0; i < p->nmappings; i++)
    p->mappings[i].filename = str_at(p, d.map_idx[i]);
  p->default_sample_type = str_at(p, d.default_type_idx);
  p->period_type.type = str_at(p, d.period_idx[0]);
  p->period_type.unit = str_at(p, d.period_idx[1]);
  p->main_file = str_at(p, d.main_idx[0]);
  p->main_build_id = str_at(p, d.main_idx[1]);
  if (p->nlocations)
    qsort(p->locations, p->nlocations, sizeof *p->locations, by_location_id);
  if (p->nfunctions)
    qsort(p->functions, p->nfunctions, sizeof *p->functions, by_function_id);
  free(d.type_idx);
  free(d.func_idx);
  free(d.map_idx);
  free(d.comment_idx);
  return 0;
bad:
  free(d.type_idx);
  free(d.func_idx);
  free(d.map_idx);
  free(d.comment_idx);
  pprofdec_free(p);
  return d.too_big ? PPROFDEC_ETOOBIG : -1;
}

void pprofdec_free(pprofdec_profile *p) {
  for (size_t i = 0; i < p->nstrings; i++) free(p->strings[i]);
  free(p->strings);
  free(p->sample_types);
  free(p->samples);
  free(p->location_ids);
  free(p->values);
  free(p->locations);
  free(p->lines);
  free(p->functions);
  free(p->mappings);
  free(p->comments);
  memset(p, 0, sizeof *p);
}

size_t pprofdec_default_index(const pprofdec_profile *p) {
  if (p->default_sample_type[0])
    for (size_t i = 0; i < p->nsample_types; i++)
      if (strcmp(p->sample_types[i].type, p->default_sample_type) == 0)
        return i;
  return p->nsample_types - 1;
}

long pprofdec_find_index(const pprofdec_profile *p, const char *which) {
  for (size_t i = 0; i < p->nsample_types; i++)
    if (strcmp(p->sample_types[i].type, which) == 0) return (long)i;
  char *end;
  long i = strtol(which, &end, 10);
  if (*which && !*end && i >= 0 && (size_t)i < p->nsample_types) return i;
  return -1;
}

static const pprofdec_location *find_location(const pprofdec_profile *p,
                                              uint64_t id) {
  pprofdec_location key = {id, 0, 0, 0, 0};
  if (!p->nlocations) return NULL;
  return bsearch(&key, p->locations, p->nlocations, sizeof key, by_location_id);
}

/* The index in p->locations of sample sm's location j, or -1 (with err
 * set) when the profile lacks it. */
static long sample_location(const pprofdec_profile *p,
                            const pprofdec_sample *sm, size_t j, char *err,
                            size_t errlen) {
  uint64_t id = p->location_ids[sm->first_location + j];
  const pprofdec_location *loc = find_location(p, id);
  if (!loc)
    return fail(err, errlen,
                "a sample refers to location %" PRIu64
                ", which the profile lacks",
                id);
  return (long)(loc - p->locations);
}

static const pprofdec_function *find_function(const pprofdec_profile *p,
                                              uint64_t id) {
  pprofdec_function key = {id, NULL, NULL};
  if (!p->nfunctions) return NULL;
  return bsearch(&key, p->functions, p->nfunctions, sizeof key, by_function_id);
}

/* Rows by name: an open-addressed table of row index + 1. */
typedef struct rowtab {
  pprofdec_top *t;
  size_t cap_rows;
  size_t *slots;
  size_t nslots;
  uint64_t *stamps;
} rowtab;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* (Re)builds the table, n slots (a power of two), over the first nrows rows. */
static int rowtab_index(rowtab *rt, size_t nrows, size_t n) {
  size_t *s = calloc(n, sizeof *s);
  if (!s) return -1;
  for (size_t i = 0; i < nrows; i++) {
    size_t h = (size_t)hash_str(rt->t->rows[i].name) & (n - 1);
    while (s[h]) h = (h + 1) & (n - 1);
    s[h] = i + 1;
  }
  free(rt->slots);
  rt->slots = s;
  rt->nslots = n;
  return 0;
}

/* The slot of name's row, or the empty slot where it would go. */
static size_t rowtab_slot(const rowtab *rt, const char *name) {
  size_t h = (size_t)hash_str(name) & (rt->nslots - 1);
  while (rt->slots[h] && strcmp(rt->t->rows[rt->slots[h] - 1].name, name) != 0)
    h = (h + 1) & (rt->nslots - 1);
  return h;
}

/* name's row, added when new; -1 when out of memory. */
static long row_for(rowtab *rt, const char *name) {
  pprofdec_top *t = rt->t;
  if ((t->nrows + 1) * 2 > rt->nslots &&
      rowtab_index(rt, t->nrows, rt->nslots ? rt->nslots * 2 : 1024))
    return -1;
  size_t h = rowtab_slot(rt, name);
  if (rt->slots[h]) return (long)(rt->slots[h] - 1);
  if (grow(&t->rows, &rt->cap_rows, t->nrows + 1, sizeof *t->rows)) return -1;
  uint64_t *st = realloc(rt->stamps, rt->cap_rows * sizeof *st);
  if (!st) return -1;
  rt->stamps = st;
  /* malloc and memcpy rather than strdup: a sanitizer's strdup allocates
   * from its own heap, and the copy is freed with free, whichever malloc
   * stands in front (cprof's, in the fuzzers' static link). */
  size_t len = strlen(name) + 1;
  char *copy = malloc(len);
  if (!copy) return -1;
  memcpy(copy, name, len);
  t->rows[t->nrows] = (pprofdec_row){copy, 0, 0, 0};
  rt->stamps[t->nrows] = 0;
  rt->slots[h] = ++t->nrows;
  return (long)(t->nrows - 1);
}

/* name's row among those indexed; -1 when it is not one of them. */
static long row_find(const rowtab *rt, const char *name) {
  size_t h = rowtab_slot(rt, name);
  return rt->slots[h] ? (long)(rt->slots[h] - 1) : -1;
}

static int64_t abs64(int64_t v) {
  return v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
}

static int by_top_order(const void *a, const void *b) {
  const pprofdec_row *x = a, *y = b;
  int64_t fx = abs64(x->flat), fy = abs64(y->flat);
  if (fx != fy) return fx > fy ? -1 : 1;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  int64_t cx = abs64(x->cum), cy = abs64(y->cum);
  return cx > cy ? -1 : cx < cy;
}

/* Maps every frame of every location to a row by its name: location i's
 * frames, innermost first (its lines, or one frame for a location without
 * lines), are (*framesp)[(*firstp)[i]] up to (*firstp)[i + 1]. With add, a
 * name that is not a row yet becomes one; without, its frame maps to -1. */
static int map_frames(const pprofdec_profile *p, rowtab *rt, bool add,
                      size_t **firstp, long **framesp, char *err,
                      size_t errlen) {
  size_t *first = calloc(p->nlocations + 1, sizeof *first);
  size_t nframes = 0;
  for (size_t i = 0; i < p->nlocations; i++)
    nframes += p->locations[i].nlines ? p->locations[i].nlines : 1;
  long *frames = calloc(nframes + 1, sizeof *frames);
  if (!first || !frames) goto oom;
  size_t k = 0;
  for (size_t i = 0; i < p->nlocations; i++) {
    const pprofdec_location *loc = &p->locations[i];
    first[i] = k;
    if (!loc->nlines) {
      /* pprof names a location without lines by its mapping's file. */
      const char *file = "";
      for (size_t m = 0; m < p->nmappings; m++)
        if (p->mappings[m].id == loc->mapping_id) {
          file = p->mappings[m].filename;
          break;
        }
      const char *slash = strrchr(file, '/');
      if (slash && slash[1]) file = slash + 1;
      char *name = malloc(strlen(file) + 3);
      if (!name) goto oom;
      sprintf(name, "[%s]", file);
      const char *n = *file ? name : "<unknown>";
      frames[k] = add ? row_for(rt, n) : row_find(rt, n);
      free(name);
      if (add && frames[k] < 0) goto oom;
      k++;
    }
    for (size_t j = 0; j < loc->nlines; j++) {
      const pprofdec_line *l = &p->lines[loc->first_line + j];
      const pprofdec_function *fn = find_function(p, l->function_id);
      if (!fn) {
        fail(err, errlen,
             "location %" PRIu64 " refers to function %" PRIu64
             ", which the profile lacks",
             loc->id, l->function_id);
        goto out;
      }
      const char *n = fn->name[0] ? fn->name : "??";
      frames[k] = add ? row_for(rt, n) : row_find(rt, n);
      if (add && frames[k] < 0) goto oom;
      k++;
    }
  }
  first[p->nlocations] = k;
  *firstp = first;
  *framesp = frames;
  return 0;
oom:
  fail(err, errlen, "out of memory");
out:
  free(first);
  free(frames);
  return -1;
}

int pprofdec_compute_top(const pprofdec_profile *p, size_t vi,
                         pprofdec_top *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (vi >= p->nsample_types) return fail(err, errlen, "no such sample type");
  rowtab rt = {out, 0, NULL, 0, NULL};
  size_t *first = NULL;
  long *frames = NULL;
  int rc = -1;
  if (map_frames(p, &rt, true, &first, &frames, err, errlen)) goto out;
  uint64_t stamp = 0;
  for (size_t s = 0; s < p->nsamples; s++) {
    const pprofdec_sample *sm = &p->samples[s];
    int64_t v = p->values[sm->first_value + vi];
    if (v == 0) continue;
    out->total += abs64(v);
    stamp++;
    /* Each function on the stack counts once toward its cum; the innermost
     * frame, reached last from the root, gets the flat. */
    long leaf = -1;
    for (size_t j = sm->nlocations; j-- > 0;) {
      long li = sample_location(p, sm, j, err, errlen);
      if (li < 0) goto out;
      for (size_t f = first[li + 1]; f-- > first[li];) {
        long row = frames[f];
        if (rt.stamps[row] != stamp) {
          rt.stamps[row] = stamp;
          out->rows[row].cum += v;
        }
        leaf = row;
      }
    }
    if (leaf >= 0) out->rows[leaf].flat += v;
  }
  /* Functions only in other samples (or in none) are not in pprof's graph. */
  size_t kept = 0;
  for (size_t i = 0; i < out->nrows; i++) {
    if (rt.stamps[i])
      out->rows[kept++] = out->rows[i];
    else
      free(out->rows[i].name);
  }
  out->nrows = kept;
  if (out->nrows) qsort(out->rows, out->nrows, sizeof *out->rows, by_top_order);
  rc = 0;
out:
  free(first);
  free(frames);
  free(rt.slots);
  free(rt.stamps);
  if (rc) pprofdec_top_free(out);
  return rc;
}

/* An edge of pprof's call graph between two kept rows. */
typedef struct edge {
  long caller, callee;
  int64_t weight;
  uint64_t stamp;   /* the last sample that counted it */
  bool inline_only; /* every count was an inlined call */
} edge;

/* Edges by (caller, callee): an open-addressed table of edge index + 1. */
typedef struct edgetab {
  edge *edges;
  size_t nedges, cap;
  size_t *slots;
  size_t nslots;
} edgetab;

static size_t edge_hash(long caller, long callee, size_t nslots) {
  uint64_t h = ((uint64_t)caller * 0x9e3779b97f4a7c15ull) ^ (uint64_t)callee;
  h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
  return (size_t)(h ^ (h >> 32)) & (nslots - 1);
}

/* The edge from caller to callee, added (weight 0) when new; NULL when out
 * of memory. */
static edge *edge_for(edgetab *et, long caller, long callee) {
  if ((et->nedges + 1) * 2 > et->nslots) {
    size_t n = et->nslots ? et->nslots * 2 : 1024;
    size_t *s = calloc(n, sizeof *s);
    if (!s) return NULL;
    for (size_t i = 0; i < et->nedges; i++) {
      size_t h = edge_hash(et->edges[i].caller, et->edges[i].callee, n);
      while (s[h]) h = (h + 1) & (n - 1);
      s[h] = i + 1;
    }
    free(et->slots);
    et->slots = s;
    et->nslots = n;
  }
  size_t h = edge_hash(caller, callee, et->nslots);
  while (et->slots[h]) {
    edge *e = &et->edges[et->slots[h] - 1];
    if (e->caller == caller && e->callee == callee) return e;
    h = (h + 1) & (et->nslots - 1);
  }
  if (grow(&et->edges, &et->cap, et->nedges + 1, sizeof *et->edges))
    return NULL;
  et->edges[et->nedges] = (edge){caller, callee, 0, 0, true};
  et->slots[h] = ++et->nedges;
  return &et->edges[et->nedges - 1];
}

int pprofdec_top_calls(const pprofdec_profile *p, size_t vi, pprofdec_top *t,
                       size_t nkept, int64_t edge_cutoff, char *err,
                       size_t errlen) {
  if (vi >= p->nsample_types) return fail(err, errlen, "no such sample type");
  if (nkept > t->nrows) nkept = t->nrows;
  for (size_t i = 0; i < t->nrows; i++) t->rows[i].calls = 0;
  rowtab rt = {t, 0, NULL, 0, NULL};
  edgetab et = {NULL, 0, 0, NULL, 0};
  size_t *first = NULL;
  long *frames = NULL;
  int rc = -1;
  size_t nslots = 1024;
  while (nslots < (nkept + 1) * 2) nslots *= 2;
  if (rowtab_index(&rt, nkept, nslots)) {
    fail(err, errlen, "out of memory");
    goto out;
  }
  /* Frames of functions that are not kept map to -1. */
  if (map_frames(p, &rt, false, &first, &frames, err, errlen)) goto out;
  uint64_t stamp = 0;
  for (size_t s = 0; s < p->nsamples; s++) {
    const pprofdec_sample *sm = &p->samples[s];
    int64_t v = p->values[sm->first_value + vi];
    if (v == 0) continue;
    stamp++;
    /* pprof's newGraph: from the root down, each kept frame's caller is the
     * kept frame before it, however many frames that are not kept lie in
     * between; the call is inlined when the callee is not the outermost
     * line of its own location, wherever the caller is. Recursion into the
     * same function makes no edge. */
    long caller = -1;
    for (size_t j = sm->nlocations; j-- > 0;) {
      long li = sample_location(p, sm, j, err, errlen);
      if (li < 0) goto out;
      for (size_t f = first[li + 1]; f-- > first[li];) {
        long row = frames[f];
        if (row < 0) continue;
        if (caller >= 0 && caller != row) {
          edge *e = edge_for(&et, caller, row);
          if (!e) {
            fail(err, errlen, "out of memory");
            goto out;
          }
          /* pprof counts an edge once per sample, at its first (rootmost)
           * occurrence, and keeps it inline only while every count is. */
          if (e->stamp != stamp) {
            e->stamp = stamp;
            e->weight += v;
            if (f + 1 == first[li + 1]) e->inline_only = false;
          }
        }
        caller = row;
      }
    }
  }
  /* pprof drops the edges lighter than its edge cutoff before it labels
   * the nodes by the edges that are left. */
  for (size_t i = 0; i < et.nedges; i++) {
    const edge *e = &et.edges[i];
    if (abs64(e->weight) >= edge_cutoff)
      t->rows[e->callee].calls |=
          e->inline_only ? PPROFDEC_INLINED : PPROFDEC_CALLED;
  }
  rc = 0;
out:
  free(first);
  free(frames);
  free(rt.slots);
  free(et.edges);
  free(et.slots);
  return rc;
}

void pprofdec_top_free(pprofdec_top *t) {
  for (size_t i = 0; i < t->nrows; i++) free(t->rows[i].name);
  free(t->rows);
  memset(t, 0, sizeof *t);
}

/* pprof's measurement units: two families with their aliases. */
typedef struct unit_def {
  const char *name;
  double factor;
  const char *aliases[4];
} unit_def;

static const unit_def byte_units[] = {
    {"B", 1, {"b", "byte"}},
    {"kB", 1024.0, {"kb", "kbyte", "kilobyte"}},
    {"MB", 1048576.0, {"mb", "mbyte", "megabyte"}},
    {"GB", 1073741824.0, {"gb", "gbyte", "gigabyte"}},
    {"TB", 1099511627776.0, {"tb", "tbyte", "terabyte"}},
    {"PB", 1125899906842624.0, {"pb", "pbyte", "petabyte"}},
    {NULL, 0, {NULL}}};
static const unit_def time_units[] = {
    {"ns", 1, {"ns", "nanosecond"}},
    {"us", 1e3, {"\xce\xbcs", "us", "microsecond"}},
    {"ms", 1e6, {"ms", "millisecond"}},
    {"s", 1e9, {"s", "sec", "second"}},
    {"hrs", 3.6e12, {"hour", "hr"}},
    {NULL, 0, {NULL}}};
static const unit_def *const families[] = {byte_units, time_units};

/* pprof's sniffUnit: lower case, a plural 's' dropped, then the aliases. */
static const unit_def *sniff(const unit_def *fam, const char *unit) {
  char u[64];
  size_t n = 0;
  for (; unit[n] && n + 1 < sizeof u; n++)
    u[n] = (char)tolower((unsigned char)unit[n]);
  u[n] = 0;
  if (n > 2 && u[n - 1] == 's') u[n - 1] = 0;
  for (const unit_def *d = fam; d->name; d++)
    for (int a = 0; a < 4 && d->aliases[a]; a++)
      if (strcmp(u, d->aliases[a]) == 0) return d;
  return NULL;
}

/* pprof's Scale: value in unit to to_unit; the unit name goes to *name. */
static double scale(int64_t value, const char *unit, const char *to_unit,
                    const char **name) {
  if (value < 0 && -value > 0) return -scale(-value, unit, to_unit, name);
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    const unit_def *from = sniff(families[f], unit);
    if (!from) continue;
    const unit_def *dflt = f == 0 ? &byte_units[0] : &time_units[3];
    double v = (double)value * from->factor;
    if (strcmp(to_unit, "minimum") == 0 || strcmp(to_unit, "auto") == 0) {
      const unit_def *best = NULL;
      for (const unit_def *d = families[f]; d->name; d++)
        if ((!best || d->factor >= best->factor) && v / d->factor >= 1.0)
          best = d;
      if (!best) best = dflt;
      *name = best->name;
      return v / best->factor;
    }
    const unit_def *to = sniff(families[f], to_unit);
    if (!to) to = dflt;
    *name = to->name;
    return v / to->factor;
  }
  const char *const plain[] = {"count", "sample", "unit", "minimum", "auto"};
  *name = to_unit;
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (strcmp(to_unit, plain[i]) == 0) *name = "";
  return (double)value;
}

void pprofdec_format(char *out, size_t len, int64_t v, const char *unit,
                     const char *to_unit) {
  const char *name = "";
  double x = scale(v, unit, to_unit, &name);
  char num[64];
  snprintf(num, sizeof num, "%.2f", x);
  size_t n = strlen(num);
  if (n > 3 && strcmp(num + n - 3, ".00") == 0) num[n - 3] = 0;
  if (strcmp(num, "0") == 0 || strcmp(num, "-0") == 0)
    snprintf(out, len, "0");
  else
    snprintf(out, len, "%s%s", num, name);
}

void pprofdec_select_unit(char *out, size_t len, const pprofdec_top *t,
                          size_t nrows, const char *unit) {
  int64_t minv = 0, maxv = t->total;
  for (size_t i = 0; i < nrows && i < t->nrows; i++) {
    int64_t m = abs64(t->rows[i].flat);
    if (m == 0) m = abs64(t->rows[i].cum);
    if (m > 0 && (minv == 0 || m < minv)) minv = m;
  }
  if (minv == 0) minv = maxv;
  const char *umin = "", *umax = "";
  scale(minv, unit, "minimum", &umin);
  scale(maxv, unit, "minimum", &umax);
  const char *u = umin;
  if (strcmp(umin, umax) != 0 && minv < INT64_MAX / 100 && minv * 100 < maxv)
    scale(100 * minv, unit, "minimum", &u);
  snprintf(out, len, "%s", u);
}

static const struct {
  const char *name;
  unsigned shift;
} size_units[] = {{"", 0},      {"B", 0},   {"K", 10},  {"KiB", 10},
                  {"M", 20},    {"MiB", 20}, {"G", 30}, {"GiB", 30},
                  {"T", 40},    {"TiB", 40}};

int pprofdec_parse_size(const char *s, size_t *out) {
  if (!s || *s < '0' || *s > '9') return -1;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++) {
    if (strcasecmp(s, size_units[i].name) != 0) continue;
    unsigned shift = size_units[i].shift;
    if (shift >= sizeof(size_t) * CHAR_BIT || v == 0 || v > (SIZE_MAX >> shift))
      return -1;
    *out = (size_t)v << shift;
    return 0;
  }
  return -1;
}

void pprofdec_format_size(char *out, size_t len, size_t bytes) {
  static const char *const names[] = {"TiB", "GiB", "MiB", "KiB"};
  for (unsigned i = 0; i < 4; i++) {
    unsigned shift = 40 - 10 * i;
    if (shift >= sizeof(size_t) * CHAR_BIT) continue;
    if (bytes >> shift && (bytes & (((size_t)1 << shift) - 1)) == 0) {
      snprintf(out, len, "%zu %s", bytes >> shift, names[i]);
      return;
    }
  }
  snprintf(out, len, "%zu-byte", bytes);
}
