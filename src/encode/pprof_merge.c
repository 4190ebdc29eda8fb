/*
 * The pprof merger (see pprof_merge.h). It owns the merged string table,
 * the output compressor and, one part at a time, that part's decompressed
 * bytes and index arrays; it calls only mem.h's memory functions, zlib and
 * the hash helpers. Each part is read three times, each pass linear in its
 * size: the first checks the top-level wire structure and counts the
 * strings and definitions, the second interns the strings and collects the
 * mapping, location and function ids (sorted, to renumber them by rank and
 * to refuse duplicates), the third rewrites and compresses the messages.
 * The string table goes out last, after every part. It allocates, so it
 * must never run in a signal handler.
 */
#define ZLIB_CONST
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "base/rng.h"
#include "encode/gzout.h"
#include "encode/pprof_merge.h"
#include "encode/pprof_wire.h"

/* The three kinds of definition whose ids are renumbered. */
enum { K_MAPPING, K_LOCATION, K_FUNCTION, K_COUNT };
static const char *const kind_name[K_COUNT] = {"mapping", "location",
                                               "function"};

/* A bounded protobuf reader: nothing is read at or past end. */
typedef struct rd {
  const unsigned char *p, *end;
} rd;

/* One field as read: its number and wire type, its value (varint) or
 * bytes (length-delimited), and the span it took on the wire, for copying
 * it through unchanged. */
typedef struct field {
  uint32_t num;
  int wire;
  uint64_t v;
  const unsigned char *data;
  size_t len;
  const unsigned char *start, *end;
} field;

/* Accepts what Go's pprof accepts: at most ten bytes, the bits past 64
 * dropped. */
static bool rd_varint(rd *r, uint64_t *v) {
  uint64_t x = 0;
  for (int i = 0; i < 10; i++) {
    if (r->p >= r->end) return false;
    unsigned char b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

/* Reads one field; false for a malformed one: a truncated varint or
 * length, field number 0 or past 2^29 - 1, or a wire type other than
 * varint, fixed64, length-delimited and fixed32 (groups included, as
 * profile.proto has none and Go's reader refuses them). */
static bool rd_field(rd *r, field *f) {
  uint64_t tag, n;
  f->start = r->p;
  if (!rd_varint(r, &tag) || tag > UINT32_MAX || (tag >> 3) == 0) return false;
  f->num = (uint32_t)(tag >> 3);
  f->wire = (int)(tag & 7);
  switch (f->wire) {
    case WIRE_VARINT:
      if (!rd_varint(r, &f->v)) return false;
      break;
    case WIRE_I64:
      if (r->end - r->p < 8) return false;
      r->p += 8;
      break;
    case WIRE_LEN:
      if (!rd_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return false;
      f->data = r->p;
      f->len = (size_t)n;
      r->p += n;
      break;
    case WIRE_I32:
      if (r->end - r->p < 4) return false;
      r->p += 4;
      break;
    default:
      return false;
  }
  f->end = r->p;
  return true;
}

/* Counts the varints of a packed field; false when one is malformed. */
static bool count_packed(const field *f, size_t *n) {
  rd q = {f->data, f->data + f->len};
  uint64_t v;
  while (q.p < q.end) {
    if (!rd_varint(&q, &v)) return false;
    (*n)++;
  }
  return true;
}

typedef struct merger {
  cprof_buf *out;
  cprof__gzout gz; /* the merged profile, compressed into out */
  /* Latched by the put helpers, checked once per message. */
  bool nomem;
  char *err;
  size_t errlen;
  size_t part; /* the 1-based number of the part being read, for messages */

  /* A top-level message being rewritten and one message nested in it. */
  cprof_buf msg, sub;

  /* The merged string table, kept encoded as Profile's string_table
   * fields (so it goes out as it is), with an index over it: offs[i] is
   * where string i's length varint starts in strtab, and an open-address
   * index maps a hash to a string: tags[j] is a byte of the hash of the
   * string in slots[j], 0 marking a free slot. Entry 0 is "", never in
   * the index. Eight bytes an entry and five a slot, since a part of
   * short distinct strings has one in every few bytes of input. */
  cprof_buf strtab;
  uint64_t *offs;
  size_t nstrs, offs_cap;
  uint32_t *slots;
  unsigned char *tags;
  size_t nslots;
  /* A per-merge hash seed, so that strings chosen to collide under one
   * seed do not collide under the next merge's. */
  uint64_t seed;

  /* The comments, as merged indices in order, and a bit per merged
   * string saying whether it is one already. */
  uint32_t *comments;
  size_t ncomments, comments_cap;
  unsigned char *seen;
  size_t seen_len;

  /* The first part's sample types, two merged indices each. */
  uint32_t *types;
  size_t ntypes;

  int64_t time_nanos, duration_nanos;
  uint32_t drop_frames, keep_frames, default_sample_type, doc_url;
  /* How many ids of each kind the parts before the current one took. */
  uint64_t nids[K_COUNT];
  uint32_t key_pid, key_process;
} merger;

/* One part while it is merged. */
typedef struct part {
  const cprof__merge_part *in;
  const unsigned char *buf; /* the Profile message (owned, when gunzipped) */
  size_t len;
  unsigned char *owned;
  uint32_t *remap; /* the part's string index -> the merged one */
  size_t nstrings;
  uint64_t *ids[K_COUNT]; /* the part's ids, sorted */
  size_t nids[K_COUNT];
  uint64_t base[K_COUNT]; /* merged id = base + rank + 1 */
  size_t ntypes;
  size_t nsamples;
  uint64_t drop_frames, keep_frames, default_sample_type, doc_url;
  int64_t time_nanos, duration_nanos;
  uint32_t name; /* the merged index of the process name, 0 for none */
} part;

/* Records the first failure's message ("part N: ..." while a part is
 * read) and returns code. */
__attribute__((format(printf, 3, 4))) static int fail(merger *m, int code,
                                                      const char *fmt, ...) {
  if (m->errlen == 0 || m->err[0]) return code;
  size_t at = 0;
  if (m->part) {
    int k = snprintf(m->err, m->errlen, "part %zu: ", m->part);
    at = k < 0 ? 0 : (size_t)k;
    if (at >= m->errlen) return code;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err + at, m->errlen - at, fmt, ap);
  va_end(ap);
  return code;
}

static int malformed(merger *m, const char *what) {
  return fail(m, CPROF_EINVAL, "malformed %s (not a valid pprof profile)",
              what);
}

static int nomem(merger *m) {
  return fail(m, CPROF_ENOMEM, "out of memory");
}

/* Encoding into scratch buffers. Each helper is a no-op once an allocation
 * failed, so a whole message can be encoded and checked once. */

static void put_bytes(merger *m, cprof_buf *b, const void *data, size_t n) {
  if (!m->nomem && cprof__buf_append(b, data, n)) m->nomem = true;
}

static void put_varint(merger *m, cprof_buf *b, uint64_t v) {
  unsigned char tmp[10];
  put_bytes(m, b, tmp, cprof__varint_encode(tmp, v));
}

static void put_tag(merger *m, cprof_buf *b, uint32_t num, int wire) {
  put_varint(m, b, ((uint64_t)num << 3) | (uint64_t)wire);
}

/* A varint field, left out when zero as proto3 encoders do (for ids and
 * string indices zero means none). */
static void put_uint(merger *m, cprof_buf *b, uint32_t num, uint64_t v) {
  if (v == 0) return;
  put_tag(m, b, num, WIRE_VARINT);
  put_varint(m, b, v);
}

/* Appends the message built in src as field num of b, and empties src. */
static void put_msg(merger *m, cprof_buf *b, uint32_t num, cprof_buf *src) {
  put_tag(m, b, num, WIRE_LEN);
  put_varint(m, b, src->len);
  put_bytes(m, b, src->data, src->len);
  src->len = 0;
}

/* A field copied through as it was on the wire. */
static void put_raw(merger *m, cprof_buf *b, const field *f) {
  put_bytes(m, b, f->start, (size_t)(f->end - f->start));
}

/* Output: everything passes through the compressor (gzout.h), whose
 * pieces go to the caller's buffer. */

static int out_append(void *ctx, const void *data, size_t n) {
  merger *m = ctx;
  return cprof__buf_append(m->out, data, n) ? CPROF_ENOMEM : 0;
}

/* The compressor's error as the merger reports it: out of memory, or
 * deflate's failure (also as out of memory, as before the compressor was
 * shared). */
static int out_err(merger *m, int err) {
  if (err == 0) return 0;
  return err == CPROF_ENOMEM ? nomem(m)
                             : fail(m, CPROF_ENOMEM, "deflate failed");
}

static int out_write(merger *m, const void *data, size_t n) {
  return out_err(m, cprof__gzout_write(&m->gz, data, n));
}

static int out_finish(merger *m) {
  return out_err(m, cprof__gzout_finish(&m->gz));
}

/* Sends the message in m->msg as top-level field num, and empties it. */
static int emit_msg(merger *m, uint32_t num) {
  if (m->nomem) return nomem(m);
  unsigned char head[20];
  size_t n = cprof__varint_encode(head, ((uint64_t)num << 3) | WIRE_LEN);
  n += cprof__varint_encode(head + n, m->msg.len);
  int err = out_write(m, head, n);
  if (!err) err = out_write(m, m->msg.data, m->msg.len);
  m->msg.len = 0;
  return err;
}

/* The merged string table. */

/* String i of the merged table: its bytes and length. */
static const unsigned char *str_at(const merger *m, size_t i, size_t *len) {
  rd r = {m->strtab.data + m->offs[i], m->strtab.data + m->strtab.len};
  uint64_t n = 0;
  rd_varint(&r, &n); /* written by intern(), so well-formed */
  *len = (size_t)n;
  return r.p;
}

/* A string's hash: the slot it starts probing at comes from the low bits,
 * its tag (never 0, which marks a free slot) from the top byte. */
static uint64_t str_hash(const merger *m, const void *s, size_t len) {
  return cprof__mix64(cprof__hash_bytes(m->seed, s, len));
}

static unsigned char hash_tag(uint64_t h) {
  unsigned char t = (unsigned char)(h >> 56);
  return t ? t : 1;
}

/* Doubles the index, hashing the strings again: each string is hashed
 * about twice over the table's growth in all, which keeps the entries
 * free of a stored hash. */
static int grow_slots(merger *m) {
  size_t nslots = m->nslots * 2;
  uint32_t *slots = cprof__malloc(nslots * sizeof *slots);
  unsigned char *tags = cprof__calloc(nslots, 1);
  if (!slots || !tags) {
    cprof__free(slots);
    cprof__free(tags);
    return nomem(m);
  }
  for (size_t i = 1; i < m->nstrs; i++) {
    size_t len;
    const unsigned char *s = str_at(m, i, &len);
    uint64_t h = str_hash(m, s, len);
    size_t j = (size_t)h & (nslots - 1);
    while (tags[j]) j = (j + 1) & (nslots - 1);
    tags[j] = hash_tag(h);
    slots[j] = (uint32_t)i;
  }
  cprof__free(m->slots);
  cprof__free(m->tags);
  m->slots = slots;
  m->tags = tags;
  m->nslots = nslots;
  return 0;
}

/* Finds or adds a string, setting *idx to its merged index. Probing reads
 * the tags, a byte a slot and contiguous, and looks at a string only when
 * its tag matches: a probe that touched every string on its way would
 * take a cache miss per slot. */
static int intern(merger *m, const void *s, size_t len, uint32_t *idx) {
  *idx = 0;
  if (len == 0) return 0;
  if (len > CPROF__MERGE_MAX_PART)
    return fail(m, CPROF_EINVAL, "a string is too long");
  uint64_t h = str_hash(m, s, len);
  unsigned char tag = hash_tag(h);
  size_t mask = m->nslots - 1;
  size_t j = (size_t)h & mask;
  for (; m->tags[j]; j = (j + 1) & mask) {
    if (m->tags[j] != tag) continue;
    size_t elen;
    const unsigned char *e = str_at(m, m->slots[j], &elen);
    if (elen == len && memcmp(e, s, len) == 0) {
      *idx = m->slots[j];
      return 0;
    }
  }
  /* At most three quarters full, so probes stay short. */
  if ((m->nstrs + 1) * 4 > m->nslots * 3) {
    if (m->nstrs >= UINT32_MAX - 1)
      return fail(m, CPROF_ENOMEM, "too many distinct strings");
    if (grow_slots(m)) return CPROF_ENOMEM;
    mask = m->nslots - 1;
    j = (size_t)h & mask;
    while (m->tags[j]) j = (j + 1) & mask;
  }
  if (m->nstrs == m->offs_cap) {
    size_t cap = m->offs_cap * 2;
    uint64_t *offs = cprof__realloc(m->offs, cap * sizeof *offs);
    if (!offs) return nomem(m);
    m->offs = offs;
    m->offs_cap = cap;
  }
  put_tag(m, &m->strtab, PROFILE_STRING_TABLE, WIRE_LEN);
  size_t off = m->strtab.len;
  put_varint(m, &m->strtab, len);
  put_bytes(m, &m->strtab, s, len);
  if (m->nomem) return nomem(m);
  m->offs[m->nstrs] = off;
  m->tags[j] = tag;
  m->slots[j] = (uint32_t)m->nstrs;
  *idx = (uint32_t)m->nstrs++;
  return 0;
}

/* The merged index of the part's string index i; refuses an index past
 * the part's table (0, "", is always there). */
static int map_str(merger *m, const part *p, uint64_t i, uint32_t *out) {
  *out = 0;
  if (i == 0) return 0;
  if (i >= p->nstrings)
    return fail(m, CPROF_EINVAL,
                "string index %llu past the string table's %zu entries",
                (unsigned long long)i, p->nstrings);
  *out = p->remap[i];
  return 0;
}

/* Adds a comment unless its text is one already. */
static int add_comment(merger *m, uint32_t idx) {
  size_t byte = idx / 8;
  unsigned char bit = (unsigned char)(1u << (idx % 8));
  if (byte >= m->seen_len) {
    size_t len = m->seen_len ? m->seen_len : 64;
    while (len <= byte) len *= 2;
    unsigned char *seen = cprof__realloc(m->seen, len);
    if (!seen) return nomem(m);
    memset(seen + m->seen_len, 0, len - m->seen_len);
    m->seen = seen;
    m->seen_len = len;
  }
  if (m->seen[byte] & bit) return 0;
  if (m->ncomments == m->comments_cap) {
    size_t cap = m->comments_cap ? m->comments_cap * 2 : 16;
    uint32_t *c = cprof__realloc(m->comments, cap * sizeof *c);
    if (!c) return nomem(m);
    m->comments = c;
    m->comments_cap = cap;
  }
  m->seen[byte] |= bit;
  m->comments[m->ncomments++] = idx;
  return 0;
}

/* Gunzips a part into a buffer of its own, refusing it as soon as its
 * output passes CPROF__MERGE_MAX_PART: a gzip bomb costs at most that much
 * inflating and that much memory. Several gzip members in a row are read
 * as one stream, as Go's reader does. */
static int gunzip(merger *m, part *p, const unsigned char *data, size_t len) {
  const size_t limit = CPROF__MERGE_MAX_PART;
  z_stream z;
  memset(&z, 0, sizeof z);
  cprof__guard_enter();
  int zr = inflateInit2(&z, 16 + MAX_WBITS);
  cprof__guard_exit();
  if (zr != Z_OK) return nomem(m);
  /* Profiles compress four to ten times; start near the likely size and
   * double, never past the limit and one byte (to see it passed). */
  size_t cap = len > limit / 4 ? limit + 1 : len * 4;
  if (cap < 4096) cap = 4096;
  unsigned char *buf = cprof__malloc(cap);
  size_t n = 0;
  const unsigned char *in = data;
  size_t left = len;
  int rc = 0;
  if (!buf) {
    rc = nomem(m);
    goto out;
  }
  for (;;) {
    if (n == cap) {
      size_t ncap = cap > limit / 2 ? limit + 1 : cap * 2;
      unsigned char *nb = cprof__realloc(buf, ncap);
      if (!nb) {
        rc = nomem(m);
        goto out;
      }
      buf = nb;
      cap = ncap;
    }
    uInt in_chunk = left > UINT_MAX ? UINT_MAX : (uInt)left;
    uInt out_chunk = cap - n > UINT_MAX ? UINT_MAX : (uInt)(cap - n);
    z.next_in = in;
    z.avail_in = in_chunk;
    z.next_out = buf + n;
    z.avail_out = out_chunk;
    cprof__guard_enter();
    zr = inflate(&z, Z_NO_FLUSH);
    cprof__guard_exit();
    in += in_chunk - z.avail_in;
    left -= in_chunk - z.avail_in;
    n += out_chunk - z.avail_out;
    if (n > limit) {
      rc = fail(m, CPROF_EINVAL,
                "decompressed size passes the %zu MiB limit", limit >> 20);
      goto out;
    }
    if (zr == Z_STREAM_END) {
      if (left >= 2 && in[0] == 0x1f && in[1] == 0x8b) {
        cprof__guard_enter();
        inflateReset(&z);
        cprof__guard_exit();
        continue;
      }
      if (left) {
        rc = fail(m, CPROF_EINVAL, "unexpected data after the gzip stream");
        goto out;
      }
      break;
    }
    if (zr == Z_BUF_ERROR && z.avail_out != 0) {
      rc = fail(m, CPROF_EINVAL, "truncated gzip stream");
      goto out;
    }
    if (zr != Z_OK && zr != Z_BUF_ERROR) {
      if (zr == Z_MEM_ERROR)
        rc = nomem(m);
      else
        rc = fail(m, CPROF_EINVAL, "bad gzip stream: %s",
                  z.msg ? z.msg : "error");
      goto out;
    }
  }
  p->owned = buf;
  p->buf = buf;
  p->len = n;
  buf = NULL;
out:
  cprof__free(buf);
  cprof__guard_enter();
  inflateEnd(&z);
  cprof__guard_exit();
  return rc;
}

/* Pass 1: checks the top level's wire structure and the wire types of
 * Profile's own fields, and counts what the second pass stores. */
static int scan_counts(merger *m, part *p) {
  rd r = {p->buf, p->buf + p->len};
  field f;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "profile");
    switch (f.num) {
      case PROFILE_SAMPLE_TYPE:
      case PROFILE_SAMPLE:
      case PROFILE_MAPPING:
      case PROFILE_LOCATION:
      case PROFILE_FUNCTION:
      case PROFILE_STRING_TABLE:
      case PROFILE_PERIOD_TYPE:
        if (f.wire != WIRE_LEN) return malformed(m, "profile");
        break;
      case PROFILE_DROP_FRAMES:
      case PROFILE_KEEP_FRAMES:
      case PROFILE_TIME_NANOS:
      case PROFILE_DURATION_NANOS:
      case PROFILE_PERIOD:
      case PROFILE_DEFAULT_SAMPLE_TYPE:
      case PROFILE_DOC_URL:
        if (f.wire != WIRE_VARINT) return malformed(m, "profile");
        break;
      case PROFILE_COMMENT:
        if (f.wire != WIRE_VARINT && f.wire != WIRE_LEN)
          return malformed(m, "profile");
        break;
      default:
        break;
    }
    if (f.num == PROFILE_STRING_TABLE) p->nstrings++;
    if (f.num == PROFILE_SAMPLE_TYPE) p->ntypes++;
    if (f.num == PROFILE_SAMPLE) p->nsamples++;
    if (f.num == PROFILE_MAPPING) p->nids[K_MAPPING]++;
    if (f.num == PROFILE_LOCATION) p->nids[K_LOCATION]++;
    if (f.num == PROFILE_FUNCTION) p->nids[K_FUNCTION]++;
  }
  return 0;
}

/* The id of a mapping, location or function message (its last field 1, as
 * protobuf's last value wins); 0 when it has none. */
static int message_id(merger *m, const field *msg, int kind, uint64_t *id) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  *id = 0;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, kind_name[kind]);
    if (f.num != 1) continue;
    if (f.wire != WIRE_VARINT) return malformed(m, kind_name[kind]);
    *id = f.v;
  }
  return 0;
}

/* A ValueType's type and unit, as the part's indices. */
static int value_type(merger *m, const field *msg, uint64_t *type,
                      uint64_t *unit) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  *type = *unit = 0;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "value type");
    if (f.num != 1 && f.num != 2) continue;
    if (f.wire != WIRE_VARINT) return malformed(m, "value type");
    *(f.num == 1 ? type : unit) = f.v;
  }
  return 0;
}

static int by_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Pass 2: interns the part's strings, collects its ids and the scalars it
 * sets (the last value of each, as protobuf reads). */
static int scan_defs(merger *m, part *p) {
  /* The first pass's counts size these exactly (one element at least,
   * so that an empty part allocates too). */
  p->remap = cprof__malloc((p->nstrings + 1) * sizeof *p->remap);
  if (!p->remap) return nomem(m);
  for (int k = 0; k < K_COUNT; k++) {
    p->ids[k] = cprof__malloc((p->nids[k] + 1) * sizeof(uint64_t));
    if (!p->ids[k]) return nomem(m);
  }
  size_t nstr = 0, nids[K_COUNT] = {0};
  rd r = {p->buf, p->buf + p->len};
  field f;
  int err;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "profile");
    int kind = -1;
    switch (f.num) {
      case PROFILE_STRING_TABLE:
        /* Index 0 must be "", which every reader assumes. */
        if (nstr == 0 && f.len != 0)
          return fail(m, CPROF_EINVAL, "string_table[0] is not empty");
        err = intern(m, f.data, f.len, &p->remap[nstr++]);
        if (err) return err;
        break;
      case PROFILE_MAPPING: kind = K_MAPPING; break;
      case PROFILE_LOCATION: kind = K_LOCATION; break;
      case PROFILE_FUNCTION: kind = K_FUNCTION; break;
      case PROFILE_DROP_FRAMES: p->drop_frames = f.v; break;
      case PROFILE_KEEP_FRAMES: p->keep_frames = f.v; break;
      case PROFILE_TIME_NANOS: p->time_nanos = (int64_t)f.v; break;
      case PROFILE_DURATION_NANOS: p->duration_nanos = (int64_t)f.v; break;
      case PROFILE_DEFAULT_SAMPLE_TYPE: p->default_sample_type = f.v; break;
      case PROFILE_DOC_URL: p->doc_url = f.v; break;
      default: break;
    }
    if (kind < 0) continue;
    uint64_t id;
    if (message_id(m, &f, kind, &id)) return CPROF_EINVAL;
    if (id == 0)
      return fail(m, CPROF_EINVAL, "a %s has id 0", kind_name[kind]);
    p->ids[kind][nids[kind]++] = id;
  }
  for (int k = 0; k < K_COUNT; k++) {
    if (p->nids[k] > 1)
      qsort(p->ids[k], p->nids[k], sizeof(uint64_t), by_u64);
    for (size_t i = 1; i < p->nids[k]; i++)
      if (p->ids[k][i] == p->ids[k][i - 1])
        return fail(m, CPROF_EINVAL, "two %ss have id %llu", kind_name[k],
                    (unsigned long long)p->ids[k][i]);
  }
  return 0;
}

/* The merged id of the part's id of a kind; 0 when the part defines no
 * such id. A binary search over the sorted ids: the rank is the new id. */
static uint64_t map_id(const part *p, int kind, uint64_t id) {
  const uint64_t *ids = p->ids[kind];
  size_t lo = 0, hi = p->nids[kind];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ids[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < p->nids[kind] && ids[lo] == id) return p->base[kind] + lo + 1;
  return 0;
}

/* Between the passes: the sample types against the first part's (read
 * once more from the part, rather than kept from the second pass, as the
 * string table may follow them), and the profile-wide scalars. */
static int merge_header(merger *m, part *p, bool first) {
  uint32_t t, u;
  if (first) {
    size_t n = p->ntypes ? p->ntypes : 1;
    m->types = cprof__malloc(n * 2 * sizeof *m->types);
    if (!m->types) return nomem(m);
    m->ntypes = p->ntypes;
  } else if (p->ntypes != m->ntypes) {
    goto differ;
  }
  rd r = {p->buf, p->buf + p->len};
  field f;
  for (size_t i = 0; r.p < r.end;) {
    if (!rd_field(&r, &f)) return malformed(m, "profile");
    if (f.num != PROFILE_SAMPLE_TYPE) continue;
    uint64_t type, unit;
    if (value_type(m, &f, &type, &unit) || map_str(m, p, type, &t) ||
        map_str(m, p, unit, &u))
      return CPROF_EINVAL;
    if (first) {
      m->types[2 * i] = t;
      m->types[2 * i + 1] = u;
    } else if (m->types[2 * i] != t || m->types[2 * i + 1] != u) {
      goto differ;
    }
    i++;
  }

  const struct {
    uint64_t from;
    uint32_t *to;
  } strs[] = {{p->drop_frames, &m->drop_frames},
              {p->keep_frames, &m->keep_frames},
              {p->default_sample_type, &m->default_sample_type},
              {p->doc_url, &m->doc_url}};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(strs); i++) {
    if (map_str(m, p, strs[i].from, &t)) return CPROF_EINVAL;
    if (*strs[i].to == 0) *strs[i].to = t;
  }
  if (p->time_nanos != 0 &&
      (m->time_nanos == 0 || p->time_nanos < m->time_nanos))
    m->time_nanos = p->time_nanos;
  if (p->duration_nanos > m->duration_nanos)
    m->duration_nanos = p->duration_nanos;

  for (int k = 0; k < K_COUNT; k++) {
    p->base[k] = m->nids[k];
    m->nids[k] += p->nids[k];
  }
  return 0;

differ:;
  /* The message names both parts, so it goes without the usual prefix. */
  size_t which = m->part;
  m->part = 0;
  return fail(m, CPROF_EINVAL,
              "the parts' sample types differ (part %zu's are not part 1's)",
              which);
}

/* Pass 3: the rewriting. Each function below rebuilds one message into a
 * scratch buffer: string indices go to the merged table, ids and
 * references to the merged ids, and every other field is copied through
 * as it was, after its wire type is checked where profile.proto names the
 * field (Go's reader refuses a mismatch too). */

/* A string-index field, rewritten. */
static int put_str(merger *m, const part *p, cprof_buf *b, const field *f,
                   const char *what) {
  uint32_t idx;
  if (f->wire != WIRE_VARINT) return malformed(m, what);
  if (map_str(m, p, f->v, &idx)) return CPROF_EINVAL;
  put_uint(m, b, f->num, idx);
  return 0;
}

/* A scalar field profile.proto knows, copied through. */
static int put_scalar(merger *m, cprof_buf *b, const field *f,
                      const char *what) {
  if (f->wire != WIRE_VARINT) return malformed(m, what);
  put_raw(m, b, f);
  return 0;
}

/* A ValueType (sample_type, period_type) into m->msg. */
static int rewrite_value_type(merger *m, const part *p, const field *msg) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "value type");
    if (f.num == 1 || f.num == 2) {
      if (put_str(m, p, &m->msg, &f, "value type")) return CPROF_EINVAL;
    } else {
      put_raw(m, &m->msg, &f);
    }
  }
  return 0;
}

/* A Label into m->sub; *is_pid says whether its key is "pid". */
static int rewrite_label(merger *m, const part *p, const field *msg,
                         bool *is_pid) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  uint64_t key = 0;
  *is_pid = false;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "label");
    if (f.num == 1 || f.num == 2 || f.num == 4) {
      if (put_str(m, p, &m->sub, &f, "label")) return CPROF_EINVAL;
      if (f.num == 1) key = f.v;
    } else if (f.num == 3) {
      if (put_scalar(m, &m->sub, &f, "label")) return CPROF_EINVAL;
    } else {
      put_raw(m, &m->sub, &f);
    }
  }
  uint32_t k;
  if (map_str(m, p, key, &k)) return CPROF_EINVAL;
  *is_pid = k == m->key_pid;
  return 0;
}

/* A sample's location reference, which must name a location of the part
 * (pprof refuses a sample with a location it cannot find). */
static int put_location_ref(merger *m, const part *p, cprof_buf *b,
                            uint64_t id) {
  uint64_t to = id ? map_id(p, K_LOCATION, id) : 0;
  if (!to)
    return fail(m, CPROF_EINVAL, "a sample refers to location %llu, which "
                "the part lacks", (unsigned long long)id);
  put_varint(m, b, to);
  return 0;
}

static int emit_sample(merger *m, const part *p, const field *msg) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  size_t nvalues = 0;
  bool has_pid = false;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "sample");
    if (f.num == 1 && f.wire == WIRE_VARINT) {
      put_tag(m, &m->msg, 1, WIRE_VARINT);
      if (put_location_ref(m, p, &m->msg, f.v)) return CPROF_EINVAL;
    } else if (f.num == 1 && f.wire == WIRE_LEN) {
      rd q = {f.data, f.data + f.len};
      uint64_t id;
      while (q.p < q.end) {
        if (!rd_varint(&q, &id)) return malformed(m, "sample");
        if (put_location_ref(m, p, &m->sub, id)) return CPROF_EINVAL;
      }
      put_msg(m, &m->msg, 1, &m->sub);
    } else if (f.num == 2 && (f.wire == WIRE_VARINT || f.wire == WIRE_LEN)) {
      if (f.wire == WIRE_VARINT)
        nvalues++;
      else if (!count_packed(&f, &nvalues))
        return malformed(m, "sample");
      put_raw(m, &m->msg, &f);
    } else if (f.num == 3 && f.wire == WIRE_LEN) {
      bool is_pid;
      if (rewrite_label(m, p, &f, &is_pid)) return CPROF_EINVAL;
      has_pid |= is_pid;
      put_msg(m, &m->msg, 3, &m->sub);
    } else if (f.num <= 3) {
      return malformed(m, "sample");
    } else {
      put_raw(m, &m->msg, &f);
    }
  }
  /* pprof refuses a sample whose values do not match the sample types. */
  if (nvalues != p->ntypes)
    return fail(m, CPROF_EINVAL, "a sample has %zu values for %zu sample types",
                nvalues, p->ntypes);
  if (!has_pid) {
    /* num goes out even when zero, so the label is there to be seen. */
    put_uint(m, &m->sub, 1, m->key_pid);
    put_tag(m, &m->sub, 3, WIRE_VARINT);
    put_varint(m, &m->sub, (uint64_t)p->in->pid);
    put_msg(m, &m->msg, 3, &m->sub);
    if (p->name) {
      put_uint(m, &m->sub, 1, m->key_process);
      put_uint(m, &m->sub, 2, p->name);
      put_msg(m, &m->msg, 3, &m->sub);
    }
  }
  return emit_msg(m, PROFILE_SAMPLE);
}

/* A definition's id goes out last, renumbered; field order does not
 * matter on the wire, and its value was already checked by the second
 * pass (nonzero, unique). */
static void put_def_id(merger *m, const part *p, int kind, uint64_t id) {
  put_uint(m, &m->msg, 1, map_id(p, kind, id));
}

/* A reference to a mapping or a function. One the part does not define
 * becomes 0: pprof reads both as none, and a dangling id renumbered could
 * name another part's definition. */
static void put_ref(merger *m, const part *p, cprof_buf *b, int kind,
                    uint64_t id) {
  put_uint(m, b, 1 + (kind == K_MAPPING), id ? map_id(p, kind, id) : 0);
}

static int emit_mapping(merger *m, const part *p, const field *msg) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  uint64_t id = 0;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "mapping");
    if (f.num == 1) {
      id = f.v;
    } else if (f.num == 5 || f.num == 6) {
      if (put_str(m, p, &m->msg, &f, "mapping")) return CPROF_EINVAL;
    } else if (f.num <= 10) {
      if (put_scalar(m, &m->msg, &f, "mapping")) return CPROF_EINVAL;
    } else {
      put_raw(m, &m->msg, &f);
    }
  }
  put_def_id(m, p, K_MAPPING, id);
  return emit_msg(m, PROFILE_MAPPING);
}

static int rewrite_line(merger *m, const part *p, const field *msg) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "line");
    if (f.num == 1) {
      if (f.wire != WIRE_VARINT) return malformed(m, "line");
      put_ref(m, p, &m->sub, K_FUNCTION, f.v);
    } else if (f.num <= 3) {
      if (put_scalar(m, &m->sub, &f, "line")) return CPROF_EINVAL;
    } else {
      put_raw(m, &m->sub, &f);
    }
  }
  return 0;
}

static int emit_location(merger *m, const part *p, const field *msg) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  uint64_t id = 0;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "location");
    if (f.num == 1) {
      id = f.v;
    } else if (f.num == 2) {
      if (f.wire != WIRE_VARINT) return malformed(m, "location");
      put_ref(m, p, &m->msg, K_MAPPING, f.v);
    } else if (f.num == 4) {
      if (f.wire != WIRE_LEN) return malformed(m, "location");
      if (rewrite_line(m, p, &f)) return CPROF_EINVAL;
      put_msg(m, &m->msg, 4, &m->sub);
    } else if (f.num == 3 || f.num == 5) {
      if (put_scalar(m, &m->msg, &f, "location")) return CPROF_EINVAL;
    } else {
      put_raw(m, &m->msg, &f);
    }
  }
  put_def_id(m, p, K_LOCATION, id);
  return emit_msg(m, PROFILE_LOCATION);
}

static int emit_function(merger *m, const part *p, const field *msg) {
  rd r = {msg->data, msg->data + msg->len};
  field f;
  uint64_t id = 0;
  while (r.p < r.end) {
    if (!rd_field(&r, &f)) return malformed(m, "function");
    if (f.num == 1) {
      id = f.v;
    } else if (f.num >= 2 && f.num <= 4) {
      if (put_str(m, p, &m->msg, &f, "function")) return CPROF_EINVAL;
    } else if (f.num == 5) {
      if (put_scalar(m, &m->msg, &f, "function")) return CPROF_EINVAL;
    } else {
      put_raw(m, &m->msg, &f);
    }
  }
  put_def_id(m, p, K_FUNCTION, id);
  return emit_msg(m, PROFILE_FUNCTION);
}

static int add_part_comment(merger *m, const part *p, uint64_t i) {
  uint32_t idx;
  if (map_str(m, p, i, &idx)) return CPROF_EINVAL;
  return add_comment(m, idx);
}

static int emit_part(merger *m, const part *p, bool first) {
  rd r = {p->buf, p->buf + p->len};
  field f;
  while (r.p < r.end) {
    /* The first pass checked the top level's structure. */
    if (!rd_field(&r, &f)) return malformed(m, "profile");
    int err = 0;
    switch (f.num) {
      case PROFILE_SAMPLE_TYPE:
      case PROFILE_PERIOD_TYPE:
        /* The sample types are the same in every part, and the period's
         * are the first part's. */
        if (first) {
          err = rewrite_value_type(m, p, &f);
          if (!err) err = emit_msg(m, f.num);
        }
        break;
      case PROFILE_PERIOD:
        if (first) err = out_write(m, f.start, (size_t)(f.end - f.start));
        break;
      case PROFILE_SAMPLE: err = emit_sample(m, p, &f); break;
      case PROFILE_MAPPING: err = emit_mapping(m, p, &f); break;
      case PROFILE_LOCATION: err = emit_location(m, p, &f); break;
      case PROFILE_FUNCTION: err = emit_function(m, p, &f); break;
      case PROFILE_COMMENT:
        if (f.wire == WIRE_VARINT) {
          err = add_part_comment(m, p, f.v);
        } else {
          rd q = {f.data, f.data + f.len};
          uint64_t v;
          while (!err && q.p < q.end) {
            if (!rd_varint(&q, &v)) return malformed(m, "profile");
            err = add_part_comment(m, p, v);
          }
        }
        break;
      /* The string table and the merged scalars go out at the end. */
      case PROFILE_STRING_TABLE:
      case PROFILE_DROP_FRAMES:
      case PROFILE_KEEP_FRAMES:
      case PROFILE_TIME_NANOS:
      case PROFILE_DURATION_NANOS:
      case PROFILE_DEFAULT_SAMPLE_TYPE:
      case PROFILE_DOC_URL:
        break;
      default:
        err = out_write(m, f.start, (size_t)(f.end - f.start));
        break;
    }
    if (err) return err;
    m->msg.len = 0;
    m->sub.len = 0;
  }
  return 0;
}

static void part_free(part *p) {
  cprof__free(p->owned);
  cprof__free(p->remap);
  for (int k = 0; k < K_COUNT; k++) cprof__free(p->ids[k]);
  memset(p, 0, sizeof *p);
}

static int merge_part(merger *m, const cprof__merge_part *in, bool first) {
  part p;
  memset(&p, 0, sizeof p);
  p.in = in;
  int err = 0;
  if (in->len >= 2 && in->data[0] == 0x1f && in->data[1] == 0x8b) {
    err = gunzip(m, &p, in->data, in->len);
  } else if (in->len > CPROF__MERGE_MAX_PART) {
    err = fail(m, CPROF_EINVAL, "size passes the %zu MiB limit",
               CPROF__MERGE_MAX_PART >> 20);
  } else {
    /* An empty part may come without a pointer; the reader wants one. */
    p.buf = in->data ? in->data : (const unsigned char *)"";
    p.len = in->len;
  }
  if (!err) err = scan_counts(m, &p);
  /* "process" and the name join the table with the first named part that
   * has samples, so the table has no string nothing uses. */
  if (!err && p.nsamples && in->name && in->name[0]) {
    if (!m->key_process) err = intern(m, "process", 7, &m->key_process);
    if (!err) err = intern(m, in->name, strlen(in->name), &p.name);
  }
  if (!err) err = scan_defs(m, &p);
  if (!err) err = merge_header(m, &p, first);
  if (!err) err = emit_part(m, &p, first);
  part_free(&p);
  return err;
}

/* The profile-wide fields, after every part. */
static int emit_trailer(merger *m) {
  int err = out_write(m, m->strtab.data, m->strtab.len);
  if (err) return err;
  put_uint(m, &m->msg, PROFILE_DROP_FRAMES, m->drop_frames);
  put_uint(m, &m->msg, PROFILE_KEEP_FRAMES, m->keep_frames);
  put_uint(m, &m->msg, PROFILE_TIME_NANOS, (uint64_t)m->time_nanos);
  put_uint(m, &m->msg, PROFILE_DURATION_NANOS, (uint64_t)m->duration_nanos);
  if (m->ncomments) {
    for (size_t i = 0; i < m->ncomments; i++)
      put_varint(m, &m->sub, m->comments[i]);
    put_msg(m, &m->msg, PROFILE_COMMENT, &m->sub);
  }
  put_uint(m, &m->msg, PROFILE_DEFAULT_SAMPLE_TYPE, m->default_sample_type);
  put_uint(m, &m->msg, PROFILE_DOC_URL, m->doc_url);
  if (m->nomem) return nomem(m);
  err = out_write(m, m->msg.data, m->msg.len);
  m->msg.len = 0;
  return err;
}

static int merger_init(merger *m) {
  m->offs_cap = 64;
  m->offs = cprof__malloc(m->offs_cap * sizeof *m->offs);
  m->nslots = 256;
  m->slots = cprof__malloc(m->nslots * sizeof *m->slots);
  m->tags = cprof__calloc(m->nslots, 1);
  if (!m->offs || !m->slots || !m->tags) return nomem(m);
  m->seed = cprof__rng_seed((uint64_t)(uintptr_t)m);
  /* Entry 0, "", is in the table but never in the index. */
  put_tag(m, &m->strtab, PROFILE_STRING_TABLE, WIRE_LEN);
  m->offs[0] = m->strtab.len;
  put_varint(m, &m->strtab, 0);
  if (m->nomem) return nomem(m);
  m->nstrs = 1;
  /* Level 1, as the profiles it merges (pprof.c); zlib's own memLevel. */
  if (cprof__gzout_init(&m->gz, 8, out_append, m) != 0) return nomem(m);
  /* "pid" is interned first, so a part's own "pid" labels are known by
   * their merged index. */
  return intern(m, "pid", 3, &m->key_pid);
}

static void merger_free(merger *m) {
  cprof__gzout_free(&m->gz);
  cprof_buf_free(&m->msg);
  cprof_buf_free(&m->sub);
  cprof_buf_free(&m->strtab);
  cprof__free(m->offs);
  cprof__free(m->slots);
  cprof__free(m->tags);
  cprof__free(m->comments);
  cprof__free(m->seen);
  cprof__free(m->types);
}

int cprof__pprof_merge(const cprof__merge_part *parts, size_t n,
                       const char *const *comments, size_t ncomments,
                       cprof_buf *out, char *err, size_t errlen) {
  merger m;
  memset(&m, 0, sizeof m);
  m.err = err;
  m.errlen = err ? errlen : 0;
  if (m.errlen) err[0] = 0;
  if (!parts || n == 0 || !out || (!comments && ncomments))
    return fail(&m, CPROF_EINVAL, "no parts, no output or no comments");
  for (size_t i = 0; i < n; i++)
    if (!parts[i].data && parts[i].len)
      return fail(&m, CPROF_EINVAL, "part %zu has no data", i + 1);
  for (size_t i = 0; i < ncomments; i++)
    if (!comments[i]) return fail(&m, CPROF_EINVAL, "comment %zu is NULL", i);

  m.out = out;
  size_t out_len = out->len;
  int rc = merger_init(&m);
  for (size_t i = 0; !rc && i < n; i++) {
    m.part = i + 1;
    rc = merge_part(&m, &parts[i], i == 0);
  }
  m.part = 0;
  for (size_t i = 0; !rc && i < ncomments; i++) {
    uint32_t idx;
    rc = intern(&m, comments[i], strlen(comments[i]), &idx);
    if (!rc) rc = add_comment(&m, idx);
  }
  if (!rc) rc = emit_trailer(&m);
  if (!rc) rc = out_finish(&m);
  merger_free(&m);
  /* A failed merge leaves the caller's buffer as it found it. */
  if (rc) out->len = out_len;
  return rc;
}
