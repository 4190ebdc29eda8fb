/*
 * The symbol cache's entry format (symcache.h). All integers are
 * little-endian, as the machine writes them (x86-64):
 *
 *   header   8-byte magic, then u32 stamp_len, nentries, nframes,
 *            strings_len
 *   stamp    stamp_len bytes, padded to 8
 *   entries  nentries x 32 bytes: u64 offset (nonzero, increasing),
 *            u32 first frame, u16 frames, u8 flags, u8 zero, i32
 *            declaration line, i32 call displacement (flag 16; else 0),
 *            u32 before and u32 after (flag 128; else 0)
 *   frames   nframes x 24 bytes: u32 name, system name and file (string
 *            offsets), i32 line, i64 function start - pc (INT64_MIN: none)
 *   strings  strings_len bytes of NUL-terminated strings; "" at 0
 *
 * and after them the parts appended since, each
 *
 *   header   8-byte magic, then u32 nentries, nframes, strings_len, a
 *            zero u32, and the u64 hash (cprof__hash_bytes) of the rest
 *   entries, frames and strings as above, the strings the part's own
 *
 * An appended part is written by one write() to the file opened for
 * appending, and a part cut short, or followed by another process's, is
 * told by its size and hash: parsing stops there.
 *
 * Flags: 1 a line, 2 inline levels, 4 a function name, 8 the instruction
 * ending at the address was read, 16 ... and is call rel32 (E8), whose
 * displacement is kept (16 only with 8), 32 the code starting at the
 * address was read, 64 ... and is a PLT stub (64 only with 32), 128 the
 * names hold for every offset from offset - before up to offset + after
 * (after at least 1; never with 1 or 2): the facts of the code (8 to 64)
 * are the offset's own.
 *
 * A stamp is records of u8 kind (1 tag, 2 file), u16 length and that many
 * bytes of text; a file record goes on with u8 present and, when present,
 * five u64: device, inode, size, modification seconds and nanoseconds.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "encode/symcache.h"

static const unsigned char MAGIC[8] = {'C', 'P', 'S', 'Y', 'M', 0, 0, 4};
static const unsigned char PART_MAGIC[8] = {'C', 'P', 'S', 'Y', 'M', 0, 'A', 4};
enum { HDR = 24, PART_HDR = 32, ENTRY = 32, FRAME = 24 };
enum {
  F_LINE = 1,
  F_INLINE = 2,
  F_FUNCTION = 4,
  F_CALL_READ = 8,
  F_CALL = 16,
  F_STUB_READ = 32,
  F_STUB = 64,
  F_RANGE = 128,
  F_ALL = 255
};
enum { ST_TAG = 1, ST_FILE = 2 };
#define NO_START INT64_MIN

typedef struct entry {
  uint64_t off;
  uint32_t frame0;
  uint16_t nframes;
  uint8_t flags, zero;
  int32_t decl_line;
  int32_t call_disp;
  uint32_t before, after;
} entry;

typedef struct frame {
  uint32_t name, sysname, file;
  int32_t line;
  int64_t start_delta;
} frame;

_Static_assert(sizeof(entry) == ENTRY, "entry layout");
_Static_assert(sizeof(frame) == FRAME, "frame layout");

/* A fact of the code (symbolize.h) from an entry's flags, and back. */
static uint8_t code_fact(uint8_t flags, uint8_t read, uint8_t yes) {
  return !(flags & read) ? CPROF__CODE_UNREAD
         : flags & yes   ? CPROF__CODE_YES
                         : CPROF__CODE_NO;
}

static int code_flags(uint8_t fact, uint8_t read, uint8_t yes) {
  return fact == CPROF__CODE_YES ? read | yes
         : fact == CPROF__CODE_NO ? read
                                  : 0;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static entry entry_at(const cprof__symcache_part *v, uint32_t i) {
  entry e;
  memcpy(&e, v->entries + (size_t)i * ENTRY, ENTRY);
  return e;
}

static frame frame_at(const cprof__symcache_part *v, uint32_t i) {
  frame f;
  memcpy(&f, v->frames + (size_t)i * FRAME, FRAME);
  return f;
}

/* Sets *v over data[0..len), the records of a part with nentries
 * entries, nframes frames and strings_len bytes of strings: false unless
 * that is exactly their size and every record, index and string lies
 * inside. */
static bool part_over(const unsigned char *data, size_t len,
                      uint32_t nentries, uint32_t nframes,
                      uint32_t strings_len, cprof__symcache_part *v) {
  if (nentries > CPROF__SYMCACHE_MAX ||
      nframes > (uint32_t)CPROF__SYMCACHE_MAX * CPROF__SYM_MAX_FRAMES ||
      strings_len == 0)
    return false;
  /* Each part is bounded well below 2^40 bytes, so this sum cannot
   * overflow. */
  if ((size_t)nentries * ENTRY + (size_t)nframes * FRAME + strings_len !=
      len)
    return false;
  *v = (cprof__symcache_part){
      .entries = data,
      .nentries = nentries,
      .frames = data + (size_t)nentries * ENTRY,
      .nframes = nframes,
      .strings = (const char *)(data + (size_t)nentries * ENTRY +
                                (size_t)nframes * FRAME),
      .strings_len = strings_len,
  };
  if (v->strings[0] != '\0' || v->strings[strings_len - 1] != '\0')
    return false;
  uint64_t last = 0;
  for (uint32_t i = 0; i < nentries; i++) {
    entry e = entry_at(v, i);
    if (e.off <= last || e.nframes > CPROF__SYM_MAX_FRAMES ||
        e.frame0 > nframes || e.nframes > nframes - e.frame0 ||
        (e.flags & ~F_ALL) || e.zero ||
        ((e.flags & F_CALL) && !(e.flags & F_CALL_READ)) ||
        ((e.flags & F_STUB) && !(e.flags & F_STUB_READ)) ||
        (!(e.flags & F_CALL) && e.call_disp) ||
        ((e.flags & F_RANGE)
             ? e.after == 0 || e.before > e.off ||
                   (e.flags & (F_LINE | F_INLINE))
             : e.before || e.after))
      return false;
    last = e.off;
  }
  for (uint32_t i = 0; i < nframes; i++) {
    frame f = frame_at(v, i);
    if (f.name >= strings_len || f.sysname >= strings_len ||
        f.file >= strings_len)
      return false;
  }
  return true;
}

/* The size of the appended part that data[0..len) begins with (*v set
 * over it), or 0 when none does: too short, another magic, a hash that
 * does not match, a record out of place. */
static size_t part_at(const unsigned char *data, size_t len,
                      cprof__symcache_part *v) {
  if (len < PART_HDR || memcmp(data, PART_MAGIC, sizeof PART_MAGIC) != 0)
    return 0;
  uint32_t h[4];
  uint64_t hash;
  memcpy(h, data + sizeof PART_MAGIC, sizeof h);
  memcpy(&hash, data + sizeof PART_MAGIC + sizeof h, sizeof hash);
  if (h[0] > CPROF__SYMCACHE_MAX ||
      h[1] > (uint32_t)CPROF__SYMCACHE_MAX * CPROF__SYM_MAX_FRAMES || h[3])
    return 0;
  size_t body = (size_t)h[0] * ENTRY + (size_t)h[1] * FRAME + h[2];
  if (body > len - PART_HDR ||
      cprof__hash_bytes(CPROF__HASH_SEED, data + PART_HDR, body) != hash ||
      !part_over(data + PART_HDR, body, h[0], h[1], h[2], v))
    return 0;
  return PART_HDR + body;
}

bool cprof__symcache_parse(const void *data, size_t len,
                           cprof__symcache_view *v) {
  const unsigned char *p = data;
  if (!p || len < HDR || memcmp(p, MAGIC, sizeof MAGIC) != 0) return false;
  uint32_t h[4];
  memcpy(h, p + sizeof MAGIC, sizeof h);
  uint32_t stamp_len = h[0], nentries = h[1], nframes = h[2],
           strings_len = h[3];
  size_t at = HDR + pad8(stamp_len);
  if (at > len) return false;
  size_t body = (size_t)nentries * ENTRY + (size_t)nframes * FRAME +
                strings_len;
  if (body > len - at) return false;
  *v = (cprof__symcache_view){
      .stamp = p + HDR, .stamp_len = stamp_len, .nparts = 1,
      .nentries = nentries};
  if (!part_over(p + at, body, nentries, nframes, strings_len, &v->part[0]))
    return false;
  for (at += body; at < len;) {
    cprof__symcache_part part;
    size_t n = v->nparts < CPROF__SYMCACHE_PARTS
                   ? part_at(p + at, len - at, &part)
                   : 0;
    if (n == 0) {
      v->damaged = true;
      break;
    }
    v->part[v->nparts++] = part;
    v->nentries += part.nentries;
    at += n;
  }
  return true;
}

bool cprof__symcache_add_part(cprof__symcache_view *v, const void *data,
                              size_t len) {
  cprof__symcache_part part;
  if (v->nparts >= CPROF__SYMCACHE_PARTS || part_at(data, len, &part) != len)
    return false;
  v->part[v->nparts++] = part;
  v->nentries += part.nentries;
  return true;
}

size_t cprof__symcache_head_len(size_t stamp_len) { return HDR + stamp_len; }

bool cprof__symcache_appendable(const void *head, size_t len,
                                const void *stamp, size_t stamp_len) {
  const unsigned char *p = head;
  uint32_t have;
  if (len < HDR + stamp_len || memcmp(p, MAGIC, sizeof MAGIC) != 0)
    return false;
  memcpy(&have, p + sizeof MAGIC, sizeof have);
  return have == stamp_len && memcmp(p + HDR, stamp, stamp_len) == 0;
}

/* The index of v's entry for off; false when it has none. */
static bool index_of(const cprof__symcache_part *v, uint64_t off,
                     uint32_t *at) {
  uint32_t lo = 0, n = v->nentries;
  while (n > 0) {
    uint32_t half = n / 2;
    if (entry_at(v, lo + half).off < off) {
      lo += half + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  *at = lo;
  return lo < v->nentries && entry_at(v, lo).off == off;
}

/* Fills *r and frames[] from e, an entry of v, for the address pc at
 * offset off: e's own when e.off is off, else an entry whose range holds
 * off (the names and starts hold there; the facts of the code are e's
 * own, so none is given). */
static void fill(const cprof__symcache_part *v, entry e, uint64_t off,
                 uint64_t pc, cprof__sym_result *r,
                 cprof__sym_frame *frames) {
  const bool own = e.off == off;
  const uint64_t at = pc - off + e.off; /* the address e is for */
  r->nframes = e.nframes;
  r->has_line = e.flags & F_LINE;
  r->has_inline = e.flags & F_INLINE;
  r->has_function = e.flags & F_FUNCTION;
  r->decl_line = e.decl_line;
  r->call = own ? code_fact(e.flags, F_CALL_READ, F_CALL) : CPROF__CODE_UNREAD;
  r->stub = own ? code_fact(e.flags, F_STUB_READ, F_STUB) : CPROF__CODE_UNREAD;
  r->call_disp = own ? e.call_disp : 0;
  /* The range where pc's mapping has it (none that would wrap). */
  const bool ranged = (e.flags & F_RANGE) && at >= e.before &&
                      at + e.after > at;
  r->range_lo = ranged ? at - e.before : 0;
  r->range_hi = ranged ? at + e.after : 0;
  for (uint32_t i = 0; i < e.nframes; i++) {
    frame f = frame_at(v, e.frame0 + i);
    frames[i] = (cprof__sym_frame){
        .name = v->strings + f.name,
        .system_name = v->strings + f.sysname,
        .file = v->strings + f.file,
        .line = f.line,
        .start = f.start_delta == NO_START ? 0 : at + (uint64_t)f.start_delta,
    };
  }
}

static bool find_in(const cprof__symcache_part *v, uint64_t off,
                    uint64_t pc, cprof__sym_result *r,
                    cprof__sym_frame *frames) {
  uint32_t at;
  if (!index_of(v, off, &at)) return false;
  fill(v, entry_at(v, at), off, pc, r, frames);
  return true;
}

/* An entry of v whose range holds off: the one before off's place or the
 * one after it (ranges are made for one function each, so those are the
 * entries that can). */
static bool find_range_in(const cprof__symcache_part *v, uint64_t off,
                          uint64_t pc, cprof__sym_result *r,
                          cprof__sym_frame *frames) {
  uint32_t at;
  if (index_of(v, off, &at)) return false; /* an entry of its own */
  for (uint32_t i = at > 0 ? at - 1 : at; i <= at && i < v->nentries; i++) {
    entry e = entry_at(v, i);
    if ((e.flags & F_RANGE) && pc - off + e.off >= e.before &&
        off >= e.off - e.before &&
        off - (e.off - e.before) < (uint64_t)e.before + e.after) {
      fill(v, e, off, pc, r, frames);
      return true;
    }
  }
  return false;
}

/* The part written whole first: it holds most of an entry's addresses,
 * and each search of a part costs as much as the whole lookup would. */
bool cprof__symcache_find(const cprof__symcache_view *v, uint64_t off,
                          uint64_t pc, cprof__sym_result *r,
                          cprof__sym_frame *frames) {
  if (v->nparts == 0) return false;
  if (find_in(&v->part[0], off, pc, r, frames)) return true;
  for (uint32_t i = v->nparts; i-- > 1;)
    if (find_in(&v->part[i], off, pc, r, frames)) return true;
  return false;
}

bool cprof__symcache_find_range(const cprof__symcache_view *v, uint64_t off,
                                uint64_t pc, cprof__sym_result *r,
                                cprof__sym_frame *frames) {
  for (uint32_t i = 0; i < v->nparts; i++)
    if (find_range_in(&v->part[i], off, pc, r, frames)) return true;
  return false;
}

/*
 * Writing.
 */

typedef struct writer {
  cprof_buf entries, frames, strings;
  cprof__hmap offs;    /* offset -> 1, for the addresses already in */
  cprof__hmap strs;    /* content hash -> string offset + 1 */
  uint32_t nentries, nframes;
  int err;
} writer;

static uint32_t put_string(writer *w, const char *s) {
  size_t n = strlen(s);
  if (n == 0) return 0;
  uint64_t key = cprof__hash_bytes(CPROF__HASH_SEED, s, n), val;
  if (cprof__hmap_get(&w->strs, key, &val)) {
    const char *old = (const char *)w->strings.data + (val - 1);
    if (strncmp(old, s, n) == 0 && old[n] == '\0') return (uint32_t)(val - 1);
    key = 0; /* a collision: a copy of its own */
  }
  if (w->strings.len + n + 1 > UINT32_MAX) {
    w->err = CPROF_EINVAL;
    return 0;
  }
  uint32_t at = (uint32_t)w->strings.len;
  if (cprof__buf_append(&w->strings, s, n + 1) != 0 ||
      (key && cprof__hmap_put(&w->strs, key, (uint64_t)at + 1) != 0))
    w->err = CPROF_ENOMEM;
  return at;
}

/* Appends one address's result, unless its offset is in already or the
 * entry is full. */
static void put_result(writer *w, uint64_t off, uint64_t pc,
                       const cprof__sym_result *r) {
  uint64_t seen;
  if (w->err || w->nentries >= CPROF__SYMCACHE_MAX || off == 0 ||
      cprof__hmap_get(&w->offs, off, &seen))
    return;
  if (r->nframes < 0 || r->nframes > CPROF__SYM_MAX_FRAMES) return;
  entry e = {.off = off,
             .frame0 = w->nframes,
             .nframes = (uint16_t)r->nframes,
             .flags = (uint8_t)((r->has_line ? F_LINE : 0) |
                                (r->has_inline ? F_INLINE : 0) |
                                (r->has_function ? F_FUNCTION : 0) |
                                code_flags(r->call, F_CALL_READ, F_CALL) |
                                code_flags(r->stub, F_STUB_READ, F_STUB)),
             .decl_line = r->decl_line,
             .call_disp = r->call == CPROF__CODE_YES ? r->call_disp : 0};
  /* A range is kept only as the format allows it: around pc, no more
   * than 4 GiB each way, for names without lines. */
  if (r->range_lo <= pc && pc < r->range_hi && pc - r->range_lo <= UINT32_MAX &&
      r->range_hi - pc <= UINT32_MAX && pc - r->range_lo <= off &&
      !r->has_line && !r->has_inline) {
    e.flags |= F_RANGE;
    e.before = (uint32_t)(pc - r->range_lo);
    e.after = (uint32_t)(r->range_hi - pc);
  }
  for (int i = 0; i < r->nframes && !w->err; i++) {
    const cprof__sym_frame *s = &r->frames[i];
    frame f = {.name = put_string(w, s->name),
               .sysname = put_string(w, s->system_name),
               .file = put_string(w, s->file ? s->file : ""),
               .line = s->line,
               .start_delta = s->start ? (int64_t)(s->start - pc) : NO_START};
    if (!w->err && cprof__buf_append(&w->frames, &f, sizeof f) != 0)
      w->err = CPROF_ENOMEM;
    w->nframes++;
  }
  if (!w->err && (cprof__buf_append(&w->entries, &e, sizeof e) != 0 ||
                  cprof__hmap_put(&w->offs, off, 1) != 0))
    w->err = CPROF_ENOMEM;
  w->nentries++;
}

static int by_off(const void *a, const void *b) {
  uint64_t x = ((const cprof__symcache_add *)a)->off;
  uint64_t y = ((const cprof__symcache_add *)b)->off;
  return x < y ? -1 : x > y;
}

static int entry_by_off(const void *a, const void *b) {
  uint64_t x, y;
  memcpy(&x, a, sizeof x);
  memcpy(&y, b, sizeof y);
  return x < y ? -1 : x > y;
}

static void writer_free(writer *w) {
  cprof_buf_free(&w->entries);
  cprof_buf_free(&w->frames);
  cprof_buf_free(&w->strings);
  cprof__hmap_free(&w->offs);
  cprof__hmap_free(&w->strs);
}

/* Adds to w's index the strings of old's table (w's first part) that
 * add[0..n)'s results have, so that those share them. Only those: a
 * compiler's entry has thousands of strings, and an index of them all,
 * built at each save for the few hundred new results, was most of its
 * cost. */
static void index_strings(writer *w, const cprof__symcache_part *old,
                          const cprof__symcache_add *add, size_t n) {
  cprof__hmap want = {0}; /* content hashes of add's strings */
  for (size_t i = 0; i < n && !w->err; i++) {
    const cprof__sym_result *r = add[i].r;
    for (int j = 0; j < r->nframes && j < CPROF__SYM_MAX_FRAMES; j++) {
      const cprof__sym_frame *f = &r->frames[j];
      const char *str[3] = {f->name, f->system_name, f->file ? f->file : ""};
      for (int k = 0; k < 3; k++) {
        size_t len = strlen(str[k]);
        if (len && cprof__hmap_put(&want, cprof__hash_bytes(CPROF__HASH_SEED,
                                                            str[k], len),
                                   1) != 0)
          w->err = CPROF_ENOMEM;
      }
    }
  }
  for (uint32_t at = 1; at < old->strings_len && !w->err;) {
    const char *s = old->strings + at;
    size_t len = strlen(s); /* the table ends with a NUL (parse) */
    uint64_t key = cprof__hash_bytes(CPROF__HASH_SEED, s, len), val;
    if (len && cprof__hmap_get(&want, key, &val) &&
        !cprof__hmap_get(&w->strs, key, &val) &&
        cprof__hmap_put(&w->strs, key, (uint64_t)at + 1) != 0)
      w->err = CPROF_ENOMEM;
    at += (uint32_t)len + 1;
  }
  cprof__hmap_free(&want);
}

static int put_header(cprof_buf *out, uint32_t nentries, uint32_t nframes,
                      uint32_t strings_len, const void *stamp,
                      size_t stamp_len, size_t body) {
  static const unsigned char zeros[8];
  uint32_t h[4] = {(uint32_t)stamp_len, nentries, nframes, strings_len};
  out->len = 0;
  size_t total = HDR + pad8(stamp_len) + body;
  if (out->cap < total) { /* one allocation for the whole entry */
    unsigned char *p = cprof__realloc(out->data, total);
    if (!p) return CPROF_ENOMEM;
    out->data = p;
    out->cap = total;
  }
  if (cprof__buf_append(out, MAGIC, sizeof MAGIC) != 0 ||
      cprof__buf_append(out, h, sizeof h) != 0 ||
      cprof__buf_append(out, stamp, stamp_len) != 0 ||
      cprof__buf_append(out, zeros, pad8(stamp_len) - stamp_len) != 0)
    return CPROF_ENOMEM;
  return 0;
}

/*
 * Adding to an entry that has room: old's entries, frames and strings are
 * copied as they are, the new results' frames and strings go after them,
 * and the two runs of entries, both in offset order, are merged (an added
 * result replaces old's for its offset, whose frames are then left
 * unused). An exit dump adds a few hundred addresses to an entry of
 * thousands; putting every old result again cost a compiler's exit 45 ms
 * a profile. Returns 1 when old has no room (or the added frames would
 * pass the bound), for the full rewrite to make it.
 */
static int write_appended(const cprof__symcache_part *old,
                          const cprof__symcache_add *add, size_t n,
                          const void *stamp, size_t stamp_len,
                          cprof_buf *out) {
  size_t fresh = 0, fresh_frames = 0;
  uint32_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && add[i].off == add[i - 1].off) continue;
    while (o < old->nentries && entry_at(old, o).off < add[i].off) o++;
    if (o == old->nentries || entry_at(old, o).off != add[i].off) fresh++;
    if (add[i].r->nframes > 0) fresh_frames += (size_t)add[i].r->nframes;
  }
  if (fresh > CPROF__SYMCACHE_MAX - old->nentries ||
      fresh_frames > (size_t)CPROF__SYMCACHE_MAX * CPROF__SYM_MAX_FRAMES -
                         old->nframes)
    return 1;

  writer w = {.nframes = old->nframes};
  if (cprof__buf_append(&w.strings, old->strings, old->strings_len) != 0 ||
      cprof__buf_append(&w.frames, old->frames,
                        (size_t)old->nframes * FRAME) != 0)
    w.err = CPROF_ENOMEM;
  index_strings(&w, old, add, n);
  for (size_t i = 0; i < n && !w.err; i++)
    put_result(&w, add[i].off, add[i].pc, add[i].r);
  int err = w.err;
  size_t most = (size_t)old->nentries + w.nentries;
  if (!err)
    err = put_header(out, 0, w.nframes, (uint32_t)w.strings.len, stamp,
                     stamp_len, most * ENTRY + w.frames.len + w.strings.len);
  if (!err) { /* the two sorted runs, merged */
    unsigned char *at = out->data + out->len;
    const unsigned char *a = old->entries, *b = w.entries.data;
    const unsigned char *a_end = a + (size_t)old->nentries * ENTRY,
                        *b_end = b + w.entries.len;
    uint32_t total = 0;
    while (a < a_end || b < b_end) {
      uint64_t x = 0, y = 0;
      if (a < a_end) memcpy(&x, a, sizeof x);
      if (b < b_end) memcpy(&y, b, sizeof y);
      if (b < b_end && a < a_end && x == y) a += ENTRY; /* replaced */
      const unsigned char **from =
          b == b_end || (a < a_end && x < y) ? &a : &b;
      memcpy(at, *from, ENTRY);
      *from += ENTRY;
      at += ENTRY;
      total++;
    }
    memcpy(out->data + sizeof MAGIC + sizeof(uint32_t), &total,
           sizeof total);
    out->len += (size_t)total * ENTRY;
    memcpy(out->data + out->len, w.frames.data, w.frames.len);
    out->len += w.frames.len;
    memcpy(out->data + out->len, w.strings.data, w.strings.len);
    out->len += w.strings.len;
  }
  writer_free(&w);
  return err;
}

/* An entry of old's first part and add[0..n) (sorted by offset, an
 * offset given twice keeping either): old's records copied and add's
 * appended when there is room, else written again whole. */
static int write_entry(const cprof__symcache_part *old,
                       const cprof__symcache_add *add, size_t n,
                       const void *stamp, size_t stamp_len, cprof_buf *out) {
  if (old && n > 0) {
    int err = write_appended(old, add, n, stamp, stamp_len, out);
    if (err != 1) return err;
  }
  writer w = {0};
  if (cprof__buf_append(&w.strings, "", 1) != 0) return CPROF_ENOMEM;
  for (size_t i = 0; i < n; i++)
    put_result(&w, add[i].off, add[i].pc, add[i].r);
  for (uint32_t i = 0; old && i < old->nentries && !w.err; i++) {
    entry e = entry_at(old, i);
    cprof__sym_result r = {0};
    cprof__sym_frame frames[CPROF__SYM_MAX_FRAMES];
    /* pc = offset keeps each start's distance to it. */
    if (!find_in(old, e.off, e.off, &r, frames)) continue;
    r.frames = frames;
    put_result(&w, e.off, e.off, &r);
  }
  int err = w.err;
  if (!err) {
    /* The entries in offset order (the new and the old were put in two
     * runs). */
    if (w.nentries > 1)
      qsort(w.entries.data, w.nentries, ENTRY, entry_by_off);
    err = put_header(out, w.nentries, w.nframes, (uint32_t)w.strings.len,
                     stamp, stamp_len,
                     w.entries.len + w.frames.len + w.strings.len);
    if (err ||
        cprof__buf_append(out, w.entries.data, w.entries.len) != 0 ||
        cprof__buf_append(out, w.frames.data, w.frames.len) != 0 ||
        cprof__buf_append(out, w.strings.data, w.strings.len) != 0)
      err = err ? err : CPROF_ENOMEM;
  }
  writer_free(&w);
  return err;
}

/* add[0..n) followed by the results of old's appended parts, newest
 * first, each offset once (the first kept) and none old's first part
 * holds, as lookups find them (cprof__symcache_find): what an entry of
 * old's first part gets added when its parts are written into one. */
typedef struct gathered {
  cprof__symcache_add *add;
  size_t n;
  cprof__sym_result *results;
  cprof__sym_frame *frames;
} gathered;

static void gathered_free(gathered *g) {
  cprof__free(g->add);
  cprof__free(g->results);
  cprof__free(g->frames);
}

static int gather(const cprof__symcache_view *old,
                  const cprof__symcache_add *add, size_t n, gathered *g) {
  size_t nres = 0, nframes = 0;
  for (uint32_t i = 1; i < old->nparts; i++) {
    nres += old->part[i].nentries;
    nframes += old->part[i].nframes;
  }
  g->add = cprof__malloc((n + nres + 1) * sizeof *g->add);
  g->results = cprof__malloc((nres + 1) * sizeof *g->results);
  g->frames = cprof__malloc((nframes + 1) * sizeof *g->frames);
  cprof__hmap seen = {0};
  int err = g->add && g->results && g->frames ? 0 : CPROF_ENOMEM;
  uint64_t v;
  for (size_t i = 0; i < n && !err; i++) {
    if (add[i].off == 0 || cprof__hmap_get(&seen, add[i].off, &v)) continue;
    if (cprof__hmap_put(&seen, add[i].off, 1) != 0) err = CPROF_ENOMEM;
    g->add[g->n++] = add[i];
  }
  size_t r = 0, f = 0;
  for (uint32_t p = old->nparts; p-- > 1 && !err;) {
    const cprof__symcache_part *part = &old->part[p];
    /* A part whose entries share frames (which no writer here makes) is
     * left out: the frames copied are at most the parts' frames. */
    size_t uses = 0;
    for (uint32_t i = 0; i < part->nentries; i++)
      uses += entry_at(part, i).nframes;
    if (uses > part->nframes) continue;
    for (uint32_t i = 0; i < part->nentries && !err; i++) {
      entry e = entry_at(part, i);
      uint32_t at;
      if (cprof__hmap_get(&seen, e.off, &v) ||
          index_of(&old->part[0], e.off, &at))
        continue;
      cprof__sym_result *res = &g->results[r];
      *res = (cprof__sym_result){0};
      if (!find_in(part, e.off, e.off, res, g->frames + f)) continue;
      res->frames = g->frames + f;
      f += (size_t)res->nframes;
      r++;
      if (cprof__hmap_put(&seen, e.off, 1) != 0) err = CPROF_ENOMEM;
      g->add[g->n++] = (cprof__symcache_add){e.off, e.off, res};
    }
  }
  cprof__hmap_free(&seen);
  return err;
}

int cprof__symcache_write(const cprof__symcache_view *old,
                          cprof__symcache_add *add, size_t n,
                          const void *stamp, size_t stamp_len,
                          cprof_buf *out) {
  if (stamp_len > UINT32_MAX / 2) return CPROF_EINVAL;
  gathered g = {0};
  if (old && old->nparts > 1) {
    int err = gather(old, add, n, &g);
    if (err) {
      gathered_free(&g);
      return err;
    }
    add = g.add;
    n = g.n;
  }
  /* An offset given twice (a pc looked up again after JIT code moved)
   * has the same result both times: either is kept. */
  if (n > 1) qsort(add, n, sizeof *add, by_off);
  int err = write_entry(old ? &old->part[0] : NULL, add, n, stamp,
                        stamp_len, out);
  gathered_free(&g);
  return err;
}

int cprof__symcache_append(cprof__symcache_add *add, size_t n,
                           cprof_buf *out) {
  if (n > 1) qsort(add, n, sizeof *add, by_off);
  writer w = {0};
  if (cprof__buf_append(&w.strings, "", 1) != 0) return CPROF_ENOMEM;
  for (size_t i = 0; i < n; i++)
    put_result(&w, add[i].off, add[i].pc, add[i].r);
  int err = w.err;
  size_t body = w.entries.len + w.frames.len + w.strings.len;
  if (!err) {
    uint32_t h[4] = {w.nentries, w.nframes, (uint32_t)w.strings.len, 0};
    const uint64_t hash_later = 0;
    out->len = 0;
    if (cprof__buf_append(out, PART_MAGIC, sizeof PART_MAGIC) != 0 ||
        cprof__buf_append(out, h, sizeof h) != 0 ||
        cprof__buf_append(out, &hash_later, sizeof hash_later) != 0 ||
        cprof__buf_append(out, w.entries.data, w.entries.len) != 0 ||
        cprof__buf_append(out, w.frames.data, w.frames.len) != 0 ||
        cprof__buf_append(out, w.strings.data, w.strings.len) != 0)
      err = CPROF_ENOMEM;
  }
  if (!err) {
    uint64_t hash =
        cprof__hash_bytes(CPROF__HASH_SEED, out->data + PART_HDR, body);
    memcpy(out->data + sizeof PART_MAGIC + 4 * sizeof(uint32_t), &hash,
           sizeof hash);
  }
  writer_free(&w);
  return err;
}

/*
 * Stamps.
 */

static int put_record(cprof_buf *b, uint8_t kind, const char *text) {
  size_t n = strlen(text);
  if (n > UINT16_MAX) return CPROF_EINVAL;
  uint16_t n16 = (uint16_t)n;
  if (cprof__buf_append(b, &kind, 1) != 0 ||
      cprof__buf_append(b, &n16, sizeof n16) != 0 ||
      cprof__buf_append(b, text, n) != 0)
    return CPROF_ENOMEM;
  return 0;
}

/* A file's status as a stamp keeps it: present, then five numbers. */
static void file_status(const char *path, uint8_t *present, uint64_t st5[5]) {
  struct stat st;
  memset(st5, 0, 5 * sizeof *st5);
  *present = stat(path, &st) == 0;
  if (!*present) return;
  st5[0] = (uint64_t)st.st_dev;
  st5[1] = (uint64_t)st.st_ino;
  st5[2] = (uint64_t)st.st_size;
  st5[3] = (uint64_t)st.st_mtim.tv_sec;
  st5[4] = (uint64_t)st.st_mtim.tv_nsec;
}

int cprof__symcache_stamp_begin(cprof_buf *stamp, const char *tag) {
  stamp->len = 0;
  return put_record(stamp, ST_TAG, tag);
}

int cprof__symcache_stamp_file(cprof_buf *stamp, const char *path) {
  uint8_t present;
  uint64_t st5[5];
  file_status(path, &present, st5);
  int err = put_record(stamp, ST_FILE, path);
  if (!err && cprof__buf_append(stamp, &present, 1) != 0) err = CPROF_ENOMEM;
  if (!err && present && cprof__buf_append(stamp, st5, sizeof st5) != 0)
    err = CPROF_ENOMEM;
  return err;
}

bool cprof__symcache_stamp_holds(const void *data, size_t len,
                                 const char *tag) {
  const unsigned char *p = data;
  size_t at = 0;
  bool first = true;
  char path[4096];
  while (at < len) {
    uint16_t n;
    if (len - at < 3) return false;
    uint8_t kind = p[at];
    memcpy(&n, p + at + 1, sizeof n);
    at += 3;
    if (len - at < n) return false;
    const char *text = (const char *)p + at;
    at += n;
    if (first != (kind == ST_TAG)) return false;
    if (kind == ST_TAG) {
      if (strlen(tag) != n || memcmp(text, tag, n) != 0) return false;
      first = false;
      continue;
    }
    if (kind != ST_FILE || n == 0 || n >= sizeof path || len - at < 1)
      return false;
    memcpy(path, text, n);
    path[n] = '\0';
    if (memchr(path, '\0', n)) return false;
    uint8_t was = p[at++], now;
    uint64_t st_was[5], st_now[5];
    if (was > 1 || (was && len - at < sizeof st_was)) return false;
    memset(st_was, 0, sizeof st_was);
    if (was) {
      memcpy(st_was, p + at, sizeof st_was);
      at += sizeof st_was;
    }
    file_status(path, &now, st_now);
    if (now != was || memcmp(st_now, st_was, sizeof st_now) != 0)
      return false;
  }
  return !first;
}
