/*
 * The pprof writer: encodes profile.proto's Profile message by hand and
 * streams it, gzipped by zlib or raw, to a sink. This module owns the
 * encoder state, the string table (a hash index over strings copied into an
 * arena) and the output buffer; it calls only the memory functions of mem.h,
 * the gzip stream of gzout.h and the caller's sink. Each top-level message is encoded into a
 * reusable buffer and pushed through the compressor as soon as it is added,
 * so nothing but strings and a few scalars outlives the call that produced
 * it. It allocates, so it must never run in a signal handler.
 */
#include <limits.h>
#include <string.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "encode/gzout.h"
#include "encode/pprof.h"
#include "encode/pprof_wire.h"

/* The sink sees the profile in pieces of this size (the last may be
 * shorter), which keeps sink calls rare without holding much output. */
#define OUT_CAP (32 * 1024)

/* Strings longer than a quarter block get a block of their own, so one long
 * string never strands most of a shared block. A block and its header stay
 * below 16 KiB: a block of cprof's own heap's small classes, reused from
 * one profile to the next, where one over 64 KiB was a mapping of its own
 * each time (a mapping, a fault, an unmapping and its TLB flush). */
#define ARENA_BLOCK (16 * 1024 - 64)

typedef struct arena_block {
  struct arena_block *next;
  size_t used;
  size_t cap;
  char data[];
} arena_block;

typedef struct str_entry {
  const char *s;
  size_t len;
  uint64_t hash;
} str_entry;

struct cprof__pprof {
  cprof_sink sink;
  bool gzip;
  int err;
  cprof__gzout gz;    /* when compressing */
  unsigned char *out; /* when not: bytes pending for the sink */
  size_t out_len;

  /* The top-level message being built, and the body of one message nested
   * in it (a Line, a Label, a ValueType, a packed field), which is finished
   * and copied into msg before the next one starts. */
  cprof_buf msg;
  cprof_buf sub;

  /* The string table in index order; slots map a hash to index + 1, with 0
   * marking an empty slot. Entry 0 is "" and is never in slots, because
   * cprof__pprof_string() answers "" without looking. */
  str_entry *strs;
  size_t nstrs;
  size_t strs_cap;
  uint32_t *slots;
  size_t nslots;
  arena_block *arena;

  int64_t *comments;
  size_t ncomments;
  size_t comments_cap;

  bool has_period_type;
  int64_t period_type_type;
  int64_t period_type_unit;
  int64_t period;
  int64_t time_nanos;
  int64_t duration_nanos;
  int64_t default_sample_type;
  int64_t drop_frames;
  int64_t keep_frames;
  int64_t doc_url;
};

static void latch(cprof__pprof *p, int err) {
  if (!p->err) p->err = err;
}

/* Output: everything on the wire passes through write_out(), which either
 * compresses it (gzout.h, which hands its pieces to the sink) or copies it
 * into out, handing out to the sink whenever it fills. */

static int sink_write(void *ctx, const void *data, size_t n) {
  cprof__pprof *p = ctx;
  int rc = p->sink.write(p->sink.ctx, data, n);
  return rc == 0 ? 0 : rc < 0 ? rc : CPROF_EIO;
}

static void flush_out(cprof__pprof *p) {
  if (p->out_len > 0 && !p->err) {
    int rc = sink_write(p, p->out, p->out_len);
    if (rc != 0) latch(p, rc);
  }
  p->out_len = 0;
}

static void write_out(cprof__pprof *p, const void *data, size_t n) {
  if (p->err) return;
  if (!p->gzip) {
    const unsigned char *src = data;
    while (n > 0 && !p->err) {
      if (p->out_len == OUT_CAP) flush_out(p);
      size_t take = OUT_CAP - p->out_len;
      if (take > n) take = n;
      memcpy(p->out + p->out_len, src, take);
      p->out_len += take;
      src += take;
      n -= take;
    }
    return;
  }
  int rc = cprof__gzout_write(&p->gz, data, n);
  if (rc != 0) latch(p, rc);
}

/* Encoding into a buffer. Each helper is a no-op once an error is latched,
 * so callers can encode a whole message and check once. */

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static void put_bytes(cprof__pprof *p, cprof_buf *b, const void *data,
                      size_t n) {
  if (p->err) return;
  int err = cprof__buf_append(b, data, n);
  if (err) latch(p, err);
}

static void put_varint(cprof__pprof *p, cprof_buf *b, uint64_t v) {
  unsigned char tmp[10];
  put_bytes(p, b, tmp, cprof__varint_encode(tmp, v));
}

static void put_tag(cprof__pprof *p, cprof_buf *b, int field, int wire) {
  put_varint(p, b, ((uint64_t)field << 3) | (uint64_t)wire);
}

/* Scalars equal to zero are left out, as proto3 encoders do: a reader
 * cannot tell an absent field from a zero one. A negative int64 goes out as
 * its two's complement, ten bytes long, which is what int64 means on the
 * wire (no zigzag). */
static void put_uint(cprof__pprof *p, cprof_buf *b, int field, uint64_t v) {
  if (v == 0) return;
  put_tag(p, b, field, WIRE_VARINT);
  put_varint(p, b, v);
}

static void put_int(cprof__pprof *p, cprof_buf *b, int field, int64_t v) {
  put_uint(p, b, field, (uint64_t)v);
}

static void put_len(cprof__pprof *p, cprof_buf *b, int field,
                    const void *data, size_t n) {
  put_tag(p, b, field, WIRE_LEN);
  put_varint(p, b, n);
  put_bytes(p, b, data, n);
}

/* Appends the nested message built in p->sub to b and empties p->sub. */
static void put_sub(cprof__pprof *p, cprof_buf *b, int field) {
  put_len(p, b, field, p->sub.data, p->sub.len);
  p->sub.len = 0;
}

/* A packed repeated field. int64 arrays are passed through a uint64_t
 * pointer, which C allows for the signed and unsigned forms of a type and
 * which gives the same bits the wire wants. */
static void put_packed(cprof__pprof *p, cprof_buf *b, int field,
                       const uint64_t *v, size_t n) {
  if (n == 0) return;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += varint_size(v[i]);
  put_tag(p, b, field, WIRE_LEN);
  put_varint(p, b, len);
  for (size_t i = 0; i < n; i++) put_varint(p, b, v[i]);
}

/* Sends the top-level message in p->msg as Profile field `field`. */
static void emit_msg(cprof__pprof *p, int field) {
  unsigned char head[20];
  size_t n = cprof__varint_encode(head, ((uint64_t)field << 3) | WIRE_LEN);
  n += cprof__varint_encode(head + n, p->msg.len);
  write_out(p, head, n);
  write_out(p, p->msg.data, p->msg.len);
  p->msg.len = 0;
}

/* The string table is append-only: an index, once returned, names the same
 * string until finish() writes the table in index order. */

static const char *arena_copy(cprof__pprof *p, const char *s, size_t n) {
  arena_block *head = p->arena;
  if (head && head->cap - head->used >= n) {
    char *d = head->data + head->used;
    memcpy(d, s, n);
    head->used += n;
    return d;
  }
  bool dedicated = n > ARENA_BLOCK / 4;
  size_t cap = dedicated ? n : ARENA_BLOCK;
  if (cap > SIZE_MAX - sizeof(arena_block)) return NULL;
  arena_block *blk = cprof__malloc(sizeof(arena_block) + cap);
  if (!blk) return NULL;
  blk->cap = cap;
  blk->used = n;
  memcpy(blk->data, s, n);
  /* A dedicated block goes behind the head so the head's free space is
   * still used by the strings that follow. */
  if (dedicated && head) {
    blk->next = head->next;
    head->next = blk;
  } else {
    blk->next = head;
    p->arena = blk;
  }
  return blk->data;
}

static int grow_slots(cprof__pprof *p) {
  size_t nslots = p->nslots * 2;
  uint32_t *slots = cprof__calloc(nslots, sizeof *slots);
  if (!slots) return CPROF_ENOMEM;
  for (size_t i = 1; i < p->nstrs; i++) {
    size_t j = (size_t)p->strs[i].hash & (nslots - 1);
    while (slots[j]) j = (j + 1) & (nslots - 1);
    slots[j] = (uint32_t)(i + 1);
  }
  cprof__free(p->slots);
  p->slots = slots;
  p->nslots = nslots;
  return 0;
}

int64_t cprof__pprof_string(cprof__pprof *p, const char *s) {
  if (!p || !s || !*s || p->err) return 0;
  size_t len = strlen(s);
  uint64_t hash = cprof__hash_bytes(CPROF__HASH_SEED, s, len);
  size_t mask = p->nslots - 1;
  size_t j = (size_t)hash & mask;
  for (; p->slots[j]; j = (j + 1) & mask) {
    const str_entry *e = &p->strs[p->slots[j] - 1];
    if (e->hash == hash && e->len == len && memcmp(e->s, s, len) == 0)
      return (int64_t)(p->slots[j] - 1);
  }

  /* Keep the table at most three quarters full so probes stay short. */
  if ((p->nstrs + 1) * 4 > p->nslots * 3) {
    if (p->nstrs >= UINT32_MAX - 1 || grow_slots(p)) goto oom;
    mask = p->nslots - 1;
    j = (size_t)hash & mask;
    while (p->slots[j]) j = (j + 1) & mask;
  }
  if (p->nstrs == p->strs_cap) {
    size_t cap = p->strs_cap * 2;
    str_entry *strs = cprof__realloc(p->strs, cap * sizeof *strs);
    if (!strs) goto oom;
    p->strs = strs;
    p->strs_cap = cap;
  }
  const char *copy = arena_copy(p, s, len);
  if (!copy) goto oom;
  size_t idx = p->nstrs++;
  p->strs[idx] = (str_entry){copy, len, hash};
  p->slots[j] = (uint32_t)(idx + 1);
  return (int64_t)idx;

oom:
  latch(p, CPROF_ENOMEM);
  return 0;
}

static void pprof_free(cprof__pprof *p) {
  if (p->gzip) cprof__gzout_free(&p->gz);
  while (p->arena) {
    arena_block *next = p->arena->next;
    cprof__free(p->arena);
    p->arena = next;
  }
  cprof__free(p->out);
  cprof_buf_free(&p->msg);
  cprof_buf_free(&p->sub);
  cprof__free(p->strs);
  cprof__free(p->slots);
  cprof__free(p->comments);
  cprof__free(p);
}

cprof__pprof *cprof__pprof_new(const cprof_sink *sink, bool gzip) {
  cprof__pprof *p = cprof__calloc(1, sizeof *p);
  if (!p) return NULL;
  p->sink = *sink;
  p->gzip = gzip;
  if (!gzip) p->out = cprof__malloc(OUT_CAP);
  p->strs_cap = 64;
  p->strs = cprof__malloc(p->strs_cap * sizeof *p->strs);
  p->nslots = 256;
  p->slots = cprof__calloc(p->nslots, sizeof *p->slots);
  if ((!gzip && !p->out) || !p->strs || !p->slots) goto fail;
  p->strs[0] = (str_entry){"", 0, 0};
  p->nstrs = 1;
  if (gzip) {
    /* Level 1, as Go's runtime/pprof writes its profiles
     * (gzip.BestSpeed): a compiler's exit dump of a
     * 185 KB CPU profile and a 150 KB heap profile took 14 ms to compress
     * at level 6 and take 5 ms, for files 12% larger.
     * memLevel 5 for a profile of up to 32 KiB, not zlib's 8: a hash
     * table of 8 KiB instead of 64, which every profile clears and a fork
     * child's first profile faults in (0.8 ms of such a child's exit
     * dump); such profiles compress as small or smaller (at level 6,
     * 3,062 bytes against 3,080 for a 13,864-byte heap profile). A longer
     * profile gets 8, which compresses it faster (gzout.h). */
    if (cprof__gzout_init(&p->gz, 5, sink_write, p) != 0) goto fail;
  }
  return p;

fail:
  pprof_free(p);
  return NULL;
}

int cprof__pprof_finish(cprof__pprof *p) {
  if (!p) return CPROF_ENOMEM;

  for (size_t i = 0; i < p->nstrs && !p->err; i++) {
    put_len(p, &p->msg, PROFILE_STRING_TABLE, p->strs[i].s, p->strs[i].len);
    /* Flushing now and then keeps a large table from sitting in msg whole. */
    if (p->msg.len >= OUT_CAP) {
      write_out(p, p->msg.data, p->msg.len);
      p->msg.len = 0;
    }
  }

  /* The scalars are Profile's own fields rather than a nested message, so
   * they go out without a wrapper. */
  put_int(p, &p->msg, PROFILE_DROP_FRAMES, p->drop_frames);
  put_int(p, &p->msg, PROFILE_KEEP_FRAMES, p->keep_frames);
  put_int(p, &p->msg, PROFILE_TIME_NANOS, p->time_nanos);
  put_int(p, &p->msg, PROFILE_DURATION_NANOS, p->duration_nanos);
  if (p->has_period_type) {
    put_int(p, &p->sub, 1, p->period_type_type);
    put_int(p, &p->sub, 2, p->period_type_unit);
    put_sub(p, &p->msg, PROFILE_PERIOD_TYPE);
  }
  put_int(p, &p->msg, PROFILE_PERIOD, p->period);
  put_packed(p, &p->msg, PROFILE_COMMENT, (const uint64_t *)p->comments,
             p->ncomments);
  put_int(p, &p->msg, PROFILE_DEFAULT_SAMPLE_TYPE, p->default_sample_type);
  put_int(p, &p->msg, PROFILE_DOC_URL, p->doc_url);
  write_out(p, p->msg.data, p->msg.len);
  p->msg.len = 0;

  if (p->gzip && !p->err) {
    int rc = cprof__gzout_finish(&p->gz);
    if (rc != 0) latch(p, rc);
  }
  flush_out(p);

  int err = p->err;
  pprof_free(p);
  return err;
}

/* These fields are remembered rather than streamed, because a caller may
 * set them at any point and the last setting wins; finish() writes them. */

void cprof__pprof_period(cprof__pprof *p, const char *type, const char *unit,
                         int64_t period) {
  if (!p) return;
  p->period_type_type = cprof__pprof_string(p, type);
  p->period_type_unit = cprof__pprof_string(p, unit);
  p->has_period_type = true;
  p->period = period;
}

void cprof__pprof_time(cprof__pprof *p, int64_t time_nanos,
                       int64_t duration_nanos) {
  if (!p) return;
  p->time_nanos = time_nanos;
  p->duration_nanos = duration_nanos;
}

void cprof__pprof_comment(cprof__pprof *p, const char *comment) {
  if (!p || p->err) return;
  if (p->ncomments == p->comments_cap) {
    size_t cap = p->comments_cap ? p->comments_cap * 2 : 4;
    int64_t *c = cprof__realloc(p->comments, cap * sizeof *c);
    if (!c) {
      latch(p, CPROF_ENOMEM);
      return;
    }
    p->comments = c;
    p->comments_cap = cap;
  }
  int64_t idx = cprof__pprof_string(p, comment);
  if (!p->err) p->comments[p->ncomments++] = idx;
}

void cprof__pprof_default_sample_type(cprof__pprof *p, const char *type) {
  if (p) p->default_sample_type = cprof__pprof_string(p, type);
}

void cprof__pprof_drop_frames(cprof__pprof *p, const char *re) {
  if (p) p->drop_frames = cprof__pprof_string(p, re);
}

void cprof__pprof_keep_frames(cprof__pprof *p, const char *re) {
  if (p) p->keep_frames = cprof__pprof_string(p, re);
}

void cprof__pprof_doc_url(cprof__pprof *p, const char *url) {
  if (p) p->doc_url = cprof__pprof_string(p, url);
}

/* Each of these messages goes to the compressor before the call returns. */

void cprof__pprof_sample_type(cprof__pprof *p, const char *type,
                              const char *unit) {
  if (!p || p->err) return;
  put_int(p, &p->msg, 1, cprof__pprof_string(p, type));
  put_int(p, &p->msg, 2, cprof__pprof_string(p, unit));
  emit_msg(p, PROFILE_SAMPLE_TYPE);
}

void cprof__pprof_add_mapping(cprof__pprof *p,
                          const struct cprof__pprof_mapping *m) {
  if (!p || p->err) return;
  cprof_buf *b = &p->msg;
  put_uint(p, b, 1, m->id);
  put_uint(p, b, 2, m->memory_start);
  put_uint(p, b, 3, m->memory_limit);
  put_uint(p, b, 4, m->file_offset);
  put_int(p, b, 5, cprof__pprof_string(p, m->filename));
  put_int(p, b, 6, cprof__pprof_string(p, m->build_id));
  put_uint(p, b, 7, m->has_functions);
  put_uint(p, b, 8, m->has_filenames);
  put_uint(p, b, 9, m->has_line_numbers);
  put_uint(p, b, 10, m->has_inline_frames);
  emit_msg(p, PROFILE_MAPPING);
}

void cprof__pprof_location(cprof__pprof *p, uint64_t id, uint64_t mapping_id,
                           uint64_t address, const cprof__pprof_line *lines,
                           size_t nlines, bool is_folded) {
  if (!p || p->err) return;
  cprof_buf *b = &p->msg;
  put_uint(p, b, 1, id);
  put_uint(p, b, 2, mapping_id);
  put_uint(p, b, 3, address);
  for (size_t i = 0; i < nlines; i++) {
    put_uint(p, &p->sub, 1, lines[i].function_id);
    put_int(p, &p->sub, 2, lines[i].line);
    put_int(p, &p->sub, 3, lines[i].column);
    put_sub(p, b, 4);
  }
  put_uint(p, b, 5, is_folded);
  emit_msg(p, PROFILE_LOCATION);
}

void cprof__pprof_function(cprof__pprof *p, uint64_t id, const char *name,
                           const char *system_name, const char *filename,
                           int64_t start_line) {
  if (!p || p->err) return;
  cprof_buf *b = &p->msg;
  put_uint(p, b, 1, id);
  put_int(p, b, 2, cprof__pprof_string(p, name));
  put_int(p, b, 3, cprof__pprof_string(p, system_name));
  put_int(p, b, 4, cprof__pprof_string(p, filename));
  put_int(p, b, 5, start_line);
  emit_msg(p, PROFILE_FUNCTION);
}

void cprof__pprof_sample(cprof__pprof *p, const uint64_t *location_ids,
                         size_t nlocations, const int64_t *values,
                         size_t nvalues, const cprof__pprof_label *labels,
                         size_t nlabels) {
  if (!p || p->err) return;
  cprof_buf *b = &p->msg;
  put_packed(p, b, 1, location_ids, nlocations);
  put_packed(p, b, 2, (const uint64_t *)values, nvalues);
  for (size_t i = 0; i < nlabels; i++) {
    const cprof__pprof_label *l = &labels[i];
    put_int(p, &p->sub, 1, cprof__pprof_string(p, l->key));
    if (l->str) {
      put_int(p, &p->sub, 2, cprof__pprof_string(p, l->str));
    } else {
      put_int(p, &p->sub, 3, l->num);
      put_int(p, &p->sub, 4, cprof__pprof_string(p, l->num_unit));
    }
    put_sub(p, b, 3);
  }
  emit_msg(p, PROFILE_SAMPLE);
}
