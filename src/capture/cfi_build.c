/*
 * The CFI table builder. It owns the DWARF CFI parser (the bounded
 * cursor, pointer encodings, .eh_frame records, CIEs and FDEs, the CFA
 * program interpreter) and the builder that turns one object's
 * .eh_frame_hdr/.eh_frame into a compact table of rows. It runs in normal
 * context only, never in a signal handler; outside this file it calls
 * only cprof's own allocator (mem.h). It must never read a byte outside
 * the image it is given: the index (cfi_index.c) gives it a copy of a
 * loaded object's unwind data, never the object's own pages (which can
 * fault), and the fuzzer and the unit tests give it a bounded buffer.
 *
 * A table is built by interpreting the object's CFI once: the FDEs are
 * enumerated through .eh_frame_hdr's search table (or, without one, by
 * walking .eh_frame up to its zero terminator), sorted by start address,
 * and each FDE's CIE initial instructions and own instructions are run to
 * produce a row wherever the rule changes. A row is 6 bytes: the pc as a
 * uint32 offset from the load base, kept in one array for a cache-friendly
 * binary search, and a uint16 index into the table's dictionary of distinct
 * rules (cprof__cfi_rule, 12 bytes, exact int32 offsets; a real object has
 * a few hundred distinct rules, and past 65536 the rest become
 * UNSUPPORTED). Consecutive equal rows are merged, a NONE row ends every
 * FDE that the next one does not start right after, and an FDE that starts
 * inside the range already covered is clipped to start after it (one that
 * lies wholly inside is dropped), so the rows strictly increase whatever
 * the input holds. A malformed FDE is dropped whole (its range gets NONE,
 * i.e. the frame-pointer fallback); a malformed header drops the object.
 * Every loop is bounded by the bytes it consumes, and the instructions
 * interpreted in all by twice the image's size (records can overlap).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cachedir.h"
#include "base/mem.h"
#include "capture/cfi_build.h"

/* Call-frame instructions (DWARF 5 section 6.4.2, and the GNU ones). */
enum {
  DW_CFA_nop = 0x00,
  DW_CFA_set_loc = 0x01,
  DW_CFA_advance_loc1 = 0x02,
  DW_CFA_advance_loc2 = 0x03,
  DW_CFA_advance_loc4 = 0x04,
  DW_CFA_offset_extended = 0x05,
  DW_CFA_restore_extended = 0x06,
  DW_CFA_undefined = 0x07,
  DW_CFA_same_value = 0x08,
  DW_CFA_register = 0x09,
  DW_CFA_remember_state = 0x0a,
  DW_CFA_restore_state = 0x0b,
  DW_CFA_def_cfa = 0x0c,
  DW_CFA_def_cfa_register = 0x0d,
  DW_CFA_def_cfa_offset = 0x0e,
  DW_CFA_def_cfa_expression = 0x0f,
  DW_CFA_expression = 0x10,
  DW_CFA_offset_extended_sf = 0x11,
  DW_CFA_def_cfa_sf = 0x12,
  DW_CFA_def_cfa_offset_sf = 0x13,
  DW_CFA_val_offset = 0x14,
  DW_CFA_val_offset_sf = 0x15,
  DW_CFA_val_expression = 0x16,
  DW_CFA_GNU_args_size = 0x2e,
  DW_CFA_GNU_negative_offset_extended = 0x2f,
  /* The high two bits carry these three, with an operand in the low six. */
  DW_CFA_advance_loc = 0x1,
  DW_CFA_offset = 0x2,
  DW_CFA_restore = 0x3,
};

/* Pointer encodings (LSB, "DWARF Extensions"). */
enum {
  DW_EH_PE_absptr = 0x00,
  DW_EH_PE_uleb128 = 0x01,
  DW_EH_PE_udata2 = 0x02,
  DW_EH_PE_udata4 = 0x03,
  DW_EH_PE_udata8 = 0x04,
  DW_EH_PE_sleb128 = 0x09,
  DW_EH_PE_sdata2 = 0x0a,
  DW_EH_PE_sdata4 = 0x0b,
  DW_EH_PE_sdata8 = 0x0c,
  DW_EH_PE_pcrel = 0x10,
  DW_EH_PE_datarel = 0x30,
  DW_EH_PE_indirect = 0x80,
  DW_EH_PE_omit = 0xff,
};

/* x86-64 DWARF register numbers. */
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

/* How deep DW_CFA_remember_state may nest; gcc never goes past 2. */
#define STATE_STACK 16
/* Rule indexes are uint16; these two are interned first. */
#define RULE_NONE_IDX 0
#define RULE_UNSUPPORTED_IDX 1
#define MAX_RULES 65536u

/*
 * Parsing.
 */

const uint8_t *cprof__cfi_img_span(const cprof__cfi_image *im, uint64_t v,
                                   uint64_t n, uint64_t *avail) {
  for (size_t i = 0; i < im->nsegs; i++) {
    if (v >= im->segs[i].lo && v < im->segs[i].hi &&
        n <= im->segs[i].hi - v) {
      if (avail) *avail = im->segs[i].hi - v;
      return (const uint8_t *)(im->host + (uintptr_t)v);
    }
  }
  return NULL;
}

/* A bounded reader. Reading past end sets bad, pins p at end and returns
 * 0, so a caller checks bad once after a group of reads. */
typedef struct {
  const uint8_t *p, *end;
  uintptr_t host; /* the image's host: p's vaddr is p - host */
  bool bad;
} cursor;

static inline uint64_t cur_vaddr(const cursor *c) {
  return (uint64_t)((uintptr_t)c->p - c->host);
}

static inline bool cur_need(cursor *c, size_t n) {
  if ((size_t)(c->end - c->p) >= n) return true;
  c->bad = true;
  c->p = c->end;
  return false;
}

static inline void cur_skip(cursor *c, uint64_t n) {
  if ((uint64_t)(c->end - c->p) >= n) {
    c->p += n;
  } else {
    c->bad = true;
    c->p = c->end;
  }
}

static inline uint8_t rd_u8(cursor *c) {
  return cur_need(c, 1) ? *c->p++ : 0;
}

/* Reads n bytes into out (zeroed when they are not all there). */
static inline void rd_raw(cursor *c, void *out, size_t n) {
  if (cur_need(c, n)) {
    memcpy(out, c->p, n);
    c->p += n;
  }
}

static inline uint16_t rd_u16(cursor *c) {
  uint16_t v = 0;
  rd_raw(c, &v, sizeof v);
  return v;
}

static inline uint32_t rd_u32(cursor *c) {
  uint32_t v = 0;
  rd_raw(c, &v, sizeof v);
  return v;
}

static inline uint64_t rd_u64(cursor *c) {
  uint64_t v = 0;
  rd_raw(c, &v, sizeof v);
  return v;
}

/* LEB128: bits beyond 64 are dropped; an unterminated number is bad. */
static uint64_t rd_uleb(cursor *c) {
  uint64_t v = 0;
  unsigned shift = 0;
  while (c->p < c->end) {
    uint8_t b = *c->p++;
    if (shift < 64) {
      v |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
    }
    if (!(b & 0x80)) return v;
  }
  c->bad = true;
  return 0;
}

static int64_t rd_sleb(cursor *c) {
  uint64_t v = 0;
  unsigned shift = 0;
  while (c->p < c->end) {
    uint8_t b = *c->p++;
    if (shift < 64) {
      v |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
    }
    if (!(b & 0x80)) {
      if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
      return (int64_t)v;
    }
  }
  c->bad = true;
  return 0;
}

/* The value part of a pointer encoding (its low four bits). */
static uint64_t rd_enc_value(cursor *c, uint8_t fmt) {
  switch (fmt & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
      return rd_u64(c);
    case DW_EH_PE_uleb128:
      return rd_uleb(c);
    case DW_EH_PE_udata2:
      return rd_u16(c);
    case DW_EH_PE_udata4:
      return rd_u32(c);
    case DW_EH_PE_sleb128:
      return (uint64_t)rd_sleb(c);
    case DW_EH_PE_sdata2:
      return (uint64_t)(int64_t)(int16_t)rd_u16(c);
    case DW_EH_PE_sdata4:
      return (uint64_t)(int64_t)(int32_t)rd_u32(c);
    default:
      c->bad = true;
      return 0;
  }
}

/* A pointer of encoding enc, relative to where it is read (pcrel) or to
 * .eh_frame_hdr (datarel). Addresses need no indirection, so an indirect
 * encoding (or omit) is bad; addresses wrap modulo 2^64 like the
 * unwinder's. */
static uint64_t rd_enc(cursor *c, uint8_t enc, uint64_t datarel) {
  uint64_t pos = cur_vaddr(c);
  uint64_t v = rd_enc_value(c, enc);
  switch (enc & 0xf0) {
    case 0:
      return v;
    case DW_EH_PE_pcrel:
      return v + pos;
    case DW_EH_PE_datarel:
      return v + datarel;
    default:
      c->bad = true;
      return 0;
  }
}

/* One .eh_frame record: the CIE or FDE body after its length field(s),
 * wholly inside one segment. */
typedef struct {
  const uint8_t *body, *end;
  uint64_t vaddr;     /* where the record (its length) starts */
  uint64_t body_vaddr;
  uint64_t next;      /* where the next record starts */
  bool terminator;    /* a zero length: .eh_frame ends here */
} record;

static bool rd_record(const cprof__cfi_image *im, uint64_t v, record *r) {
  uint64_t avail;
  const uint8_t *p = cprof__cfi_img_span(im, v, 4, &avail);
  if (!p) return false;
  uint32_t len32;
  memcpy(&len32, p, 4);
  uint64_t head = 4, len = len32;
  memset(r, 0, sizeof *r);
  if (len32 == 0) {
    r->terminator = true;
    return true;
  }
  if (len32 == 0xffffffffu) {
    if (avail < 12) return false;
    memcpy(&len, p + 4, 8);
    head = 12;
  } else if (len32 >= 0xfffffff0u) {
    return false; /* reserved values */
  }
  /* The body holds at least the 4-byte CIE id or CIE pointer. */
  if (len < 4 || len > avail - head) return false;
  r->vaddr = v;
  r->body = p + head;
  r->end = r->body + len;
  r->body_vaddr = v + head;
  r->next = v + head + len;
  return true;
}

/*
 * The interpreter's state: the CFA rule and the rules of the three
 * registers a row needs. Other registers are not tracked at all.
 */
enum { RULE_UNSET, RULE_UNDEF, RULE_SAME, RULE_OFFSET, RULE_OTHER };
enum { CFA_REG, CFA_PLT, CFA_EXPR };

typedef struct {
  uint8_t how;
  int64_t off;
} reg_rule;

typedef struct {
  uint8_t cfa_how;
  uint8_t plt_split;
  uint64_t cfa_reg;
  int64_t cfa_off;
  reg_rule fp, sp, ra;
} cfa_state;

typedef struct cprof__cfi_cie {
  uint64_t vaddr; /* where the CIE record starts: its identity */
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  uint8_t fde_enc;
  bool aug_z;
  bool signal;
  bool ok;        /* false: every FDE of this CIE is bad */
  cfa_state init; /* the state after the initial instructions */
} cie_info;

typedef struct cprof__cfi_fde {
  uint64_t begin, end; /* end <= UINT32_MAX */
  const uint8_t *ins, *ins_end;
  uint32_t cie;
} fde_ent;

/* The builder's state (cfi_build.h). */
typedef cprof__cfi_builder builder;

/* p, grown to hold need elements of elem bytes (*cap says how many it
 * holds), or NULL when out of memory: then p is untouched and the builder
 * stops. */
static void *grow(builder *b, void *p, size_t *cap, size_t need,
                  size_t elem) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap : 64;
  while (n < need) {
    if (n > SIZE_MAX / 2 / elem) {
      b->oom = true;
      return NULL;
    }
    n *= 2;
  }
  void *q = cprof__realloc(p, n * elem);
  if (!q) {
    b->oom = true;
    return NULL;
  }
  *cap = n;
  return q;
}

static inline uint32_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

static inline bool rule_eq(const cprof__cfi_rule *a, const cprof__cfi_rule *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

static uint32_t rule_hash(const cprof__cfi_rule *r) {
  uint64_t a;
  uint32_t b;
  memcpy(&a, r, 8);
  memcpy(&b, (const uint8_t *)r + 8, 4);
  return mix64(a ^ ((uint64_t)b << 17) ^ ((uint64_t)b >> 7));
}

/* Rebuilds an open-addressed table of index + 1 at twice the size. */
static bool rehash(builder *b, uint32_t **tab, size_t *cap, size_t n,
                   uint32_t (*hash)(const builder *, uint32_t)) {
  size_t ncap = *cap ? *cap * 2 : 256;
  uint32_t *t = cprof__calloc(ncap, sizeof *t);
  if (!t) {
    b->oom = true;
    return false;
  }
  for (uint32_t i = 0; i < n; i++) {
    size_t h = hash(b, i) & (ncap - 1);
    while (t[h]) h = (h + 1) & (ncap - 1);
    t[h] = i + 1;
  }
  cprof__free(*tab);
  *tab = t;
  *cap = ncap;
  return true;
}

static uint32_t rule_hash_at(const builder *b, uint32_t i) {
  return rule_hash(&b->rules[i]);
}

static uint32_t cie_hash_at(const builder *b, uint32_t i) {
  return mix64(b->cies[i].vaddr);
}

/* The dictionary index of r, adding it if new. */
static uint16_t intern_rule(builder *b, const cprof__cfi_rule *r) {
  if (2 * (b->nrules + 1) > b->rule_hash_cap &&
      !rehash(b, &b->rule_hash, &b->rule_hash_cap, b->nrules, rule_hash_at))
    return RULE_UNSUPPORTED_IDX;
  size_t mask = b->rule_hash_cap - 1;
  size_t h = rule_hash(r) & mask;
  for (; b->rule_hash[h]; h = (h + 1) & mask) {
    uint32_t i = b->rule_hash[h] - 1;
    if (rule_eq(&b->rules[i], r)) return (uint16_t)i;
  }
  if (b->nrules >= MAX_RULES) return RULE_UNSUPPORTED_IDX;
  cprof__cfi_rule *rules =
      grow(b, b->rules, &b->rules_cap, b->nrules + 1, sizeof *b->rules);
  if (!rules) return RULE_UNSUPPORTED_IDX;
  b->rules = rules;
  b->rules[b->nrules] = *r;
  b->rule_hash[h] = (uint32_t)++b->nrules;
  return (uint16_t)(b->nrules - 1);
}

/* Appends a row unless it repeats the last one's rule. Rows arrive with
 * strictly increasing pcs (see run_fde). */
static void append_row(builder *b, uint32_t pc, const cprof__cfi_rule *r) {
  if (b->nrows > 0 && rule_eq(&b->last, r)) return;
  if (b->nrows == b->rows_cap) {
    /* Both arrays grow to the same capacity. */
    size_t cap = b->rows_cap;
    uint32_t *pcs = grow(b, b->pcs, &cap, b->nrows + 1, sizeof *pcs);
    if (!pcs) return;
    b->pcs = pcs;
    cap = b->rows_cap;
    uint16_t *ridx = grow(b, b->ridx, &cap, b->nrows + 1, sizeof *ridx);
    if (!ridx) return;
    b->ridx = ridx;
    b->rows_cap = cap;
  }
  uint16_t i = intern_rule(b, r);
  b->pcs[b->nrows] = pc;
  b->ridx[b->nrows] = i;
  b->nrows++;
  b->last = b->rules[i];
}

static void flush_pending(builder *b) {
  if (!b->pending) return;
  b->pending = false;
  append_row(b, b->pend_pc, &b->pend);
}

/* The current FDE's rule from loc on; loc is below the FDE's end. */
static void emit(builder *b, uint64_t loc, const cprof__cfi_rule *r) {
  uint32_t pc = (uint32_t)(loc < b->clip ? b->clip : loc);
  if (b->pending && pc == b->pend_pc) {
    b->pend = *r;
    return;
  }
  flush_pending(b);
  b->pending = true;
  b->pend_pc = pc;
  b->pend = *r;
}

/* The row a state stands for (see cfi.h for the kinds). */
static cprof__cfi_rule to_rule(const cie_info *cie, const cfa_state *s) {
  cprof__cfi_rule r = {0};
  if (cie->ra_reg != REG_RA) goto unsupported;
  if (s->ra.how == RULE_UNDEF) {
    r.kind = CPROF__CFI_END;
    return r;
  }
  if (s->ra.how != RULE_OFFSET || s->ra.off != -8) goto unsupported;
  /* The caller's rsp is the CFA, unless a rule says otherwise. */
  if (s->sp.how != RULE_UNSET && s->sp.how != RULE_UNDEF) goto unsupported;
  switch (s->cfa_how) {
    case CFA_REG:
      if (s->cfa_reg == REG_RSP) {
        r.kind = CPROF__CFI_RSP;
      } else if (s->cfa_reg == REG_RBP) {
        r.kind = CPROF__CFI_RBP;
      } else {
        goto unsupported;
      }
      break;
    case CFA_PLT:
      r.kind = CPROF__CFI_PLT;
      r.plt_split = s->plt_split;
      break;
    default:
      goto unsupported;
  }
  if (s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX) goto unsupported;
  r.cfa_off = (int32_t)s->cfa_off;
  switch (s->fp.how) {
    case RULE_UNSET:
    case RULE_UNDEF:
    case RULE_SAME:
      break;
    case RULE_OFFSET:
      if (s->fp.off < INT32_MIN || s->fp.off > INT32_MAX) goto unsupported;
      r.fp_saved = 1;
      r.fp_off = (int32_t)s->fp.off;
      break;
    default:
      goto unsupported;
  }
  return r;
unsupported:
  memset(&r, 0, sizeof r);
  r.kind = CPROF__CFI_UNSUPPORTED;
  return r;
}

/* The rule slot of a tracked register, or NULL. The return-address column
 * comes first, so a CIE that names rbp or rsp as its return column cannot
 * alias the slots. */
static reg_rule *reg_slot(cfa_state *s, const cie_info *cie, uint64_t reg) {
  if (reg == cie->ra_reg) return &s->ra;
  if (reg == REG_RBP) return &s->fp;
  if (reg == REG_RSP) return &s->sp;
  return NULL;
}

/* ld's CFA expression for the lazy PLT: DW_OP_breg7 (rsp) N;
 * DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and; DW_OP_litK; DW_OP_ge;
 * DW_OP_lit3; DW_OP_shl; DW_OP_plus, i.e. CFA = rsp + N + 8 when
 * (rip & 15) >= K. */
static bool plt_expr(const uint8_t *p, uint64_t n, cfa_state *s) {
  static const uint8_t mid[] = {0x80, 0x00, 0x3f, 0x1a};
  static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
  cursor c = {p, p + n, 0, false};
  if (rd_u8(&c) != 0x77) return false;
  int64_t off = rd_sleb(&c);
  if (c.bad || (size_t)(c.end - c.p) != sizeof mid + 1 + sizeof tail)
    return false;
  if (memcmp(c.p, mid, sizeof mid) != 0) return false;
  uint8_t lit = c.p[sizeof mid];
  if (lit < 0x30 || lit > 0x3f) return false;
  if (memcmp(c.p + sizeof mid + 1, tail, sizeof tail) != 0) return false;
  s->cfa_how = CFA_PLT;
  s->cfa_off = off;
  s->plt_split = (uint8_t)(lit - 0x30);
  return true;
}

/* An operand times a data alignment factor; false when it overflows. */
static bool factored(uint64_t u, int64_t factor, int64_t *out) {
  if (u > INT64_MAX) return false;
  return !__builtin_mul_overflow((int64_t)u, factor, out);
}

static bool sfactored(int64_t v, int64_t factor, int64_t *out) {
  return !__builtin_mul_overflow(v, factor, out);
}


/* Emits the row for the state in effect from loc on. */
static void emit_state(builder *b, const cie_info *cie, const cfa_state *st,
                       uint64_t loc) {
  cprof__cfi_rule r = to_rule(cie, st);
  emit(b, loc, &r);
}

/*
 * Runs a CFA program. For a CIE's initial instructions (b == NULL) a
 * location change is bad and a restore means "unset". For an FDE's, a row
 * is emitted at every location in [begin, end) where one starts; what the
 * program says past end is not read. Returns false on anything malformed.
 */
static bool run_program(builder *b, const cie_info *cie, cursor *c,
                        cfa_state *st, uint64_t begin, uint64_t end) {
  cfa_state stack[STATE_STACK];
  unsigned depth = 0;
  uint64_t loc = begin;

  while (c->p < c->end) {
    uint8_t op = *c->p++;
    uint64_t reg, u, to;
    int64_t off;
    reg_rule *r;

    switch (op >> 6) {
      case DW_CFA_advance_loc:
        u = op & 0x3f;
        goto advance;
      case DW_CFA_offset:
        reg = op & 0x3f;
        u = rd_uleb(c);
        goto set_offset;
      case DW_CFA_restore:
        reg = op & 0x3f;
        goto restore;
      default:
        break;
    }
    switch (op) {
      case DW_CFA_nop:
        continue;
      case DW_CFA_set_loc:
        to = rd_enc(c, cie->fde_enc, b ? b->hdr : 0);
        if (c->bad || to < loc) return false;
        goto move;
      case DW_CFA_advance_loc1:
        u = rd_u8(c);
        goto advance;
      case DW_CFA_advance_loc2:
        u = rd_u16(c);
        goto advance;
      case DW_CFA_advance_loc4:
        u = rd_u32(c);
        goto advance;
      case DW_CFA_offset_extended:
        reg = rd_uleb(c);
        u = rd_uleb(c);
        goto set_offset;
      case DW_CFA_restore_extended:
        reg = rd_uleb(c);
        goto restore;
      case DW_CFA_undefined:
      case DW_CFA_same_value:
        reg = rd_uleb(c);
        if ((r = reg_slot(st, cie, reg)))
          *r = (reg_rule){op == DW_CFA_undefined ? RULE_UNDEF : RULE_SAME, 0};
        break;
      case DW_CFA_register:
        reg = rd_uleb(c);
        rd_uleb(c);
        if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OTHER, 0};
        break;
      case DW_CFA_remember_state:
        /* The whole row, CFA included, as libgcc and readelf keep it. */
        if (depth == STATE_STACK) return false;
        stack[depth++] = *st;
        break;
      case DW_CFA_restore_state:
        if (depth == 0) return false;
        *st = stack[--depth];
        break;
      case DW_CFA_def_cfa:
        st->cfa_reg = rd_uleb(c);
        u = rd_uleb(c);
        if (u > INT64_MAX) return false;
        st->cfa_how = CFA_REG;
        st->cfa_off = (int64_t)u;
        break;
      case DW_CFA_def_cfa_sf:
        st->cfa_reg = rd_uleb(c);
        if (!sfactored(rd_sleb(c), cie->data_align, &st->cfa_off))
          return false;
        st->cfa_how = CFA_REG;
        break;
      case DW_CFA_def_cfa_register:
        /* Like readelf, keep the offset even after an expression. */
        st->cfa_reg = rd_uleb(c);
        st->cfa_how = CFA_REG;
        break;
      case DW_CFA_def_cfa_offset:
        u = rd_uleb(c);
        if (u > INT64_MAX) return false;
        st->cfa_off = (int64_t)u;
        break;
      case DW_CFA_def_cfa_offset_sf:
        if (!sfactored(rd_sleb(c), cie->data_align, &st->cfa_off))
          return false;
        break;
      case DW_CFA_def_cfa_expression:
        u = rd_uleb(c);
        if (c->bad || u > (uint64_t)(c->end - c->p)) return false;
        if (!plt_expr(c->p, u, st)) st->cfa_how = CFA_EXPR;
        c->p += u;
        break;
      case DW_CFA_expression:
      case DW_CFA_val_expression:
        reg = rd_uleb(c);
        u = rd_uleb(c);
        cur_skip(c, u);
        if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OTHER, 0};
        break;
      case DW_CFA_offset_extended_sf:
        reg = rd_uleb(c);
        if (!sfactored(rd_sleb(c), cie->data_align, &off)) return false;
        if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OFFSET, off};
        break;
      case DW_CFA_val_offset:
        /* A value rule for a tracked register: no row can say it. */
        reg = rd_uleb(c);
        rd_uleb(c);
        if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OTHER, 0};
        break;
      case DW_CFA_val_offset_sf:
        reg = rd_uleb(c);
        rd_sleb(c);
        if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OTHER, 0};
        break;
      case DW_CFA_GNU_args_size:
        rd_uleb(c);
        break;
      case DW_CFA_GNU_negative_offset_extended:
        reg = rd_uleb(c);
        if (!factored(rd_uleb(c), cie->data_align, &off) || off == INT64_MIN)
          return false;
        if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OFFSET, -off};
        break;
      default:
        /* An unknown opcode (or another architecture's): its operands'
         * length is unknown, so nothing after it can be trusted. */
        return false;
    }
    if (c->bad) return false;
    continue;

  set_offset:
    if (c->bad || !factored(u, cie->data_align, &off)) return false;
    if ((r = reg_slot(st, cie, reg))) *r = (reg_rule){RULE_OFFSET, off};
    continue;

  restore:
    if (c->bad) return false;
    if ((r = reg_slot(st, cie, reg))) {
      if (b) {
        cfa_state init = cie->init;
        *r = *reg_slot(&init, cie, reg);
      } else {
        *r = (reg_rule){RULE_UNSET, 0};
      }
    }
    continue;

  advance:
    /* A factor that overflows moves past any FDE's end. */
    if (__builtin_mul_overflow(u, cie->code_align, &u)) u = UINT64_MAX;
    to = u >= end - loc ? end : loc + u;
  move:
    if (c->bad || !b) return false;
    emit_state(b, cie, st, loc);
    if (to >= end) return true;
    loc = to;
  }
  if (c->bad) return false;
  if (b) emit_state(b, cie, st, loc);
  return true;
}

/*
 * CIEs, parsed once per build and looked up by address.
 */

static int cie_lookup(const builder *b, uint64_t vaddr) {
  if (!b->cie_hash_cap) return -1;
  size_t mask = b->cie_hash_cap - 1;
  for (size_t h = mix64(vaddr) & mask; b->cie_hash[h]; h = (h + 1) & mask) {
    uint32_t i = b->cie_hash[h] - 1;
    if (b->cies[i].vaddr == vaddr) return (int)i;
  }
  return -1;
}

/* Parses the CIE record r into ci; ci->ok says whether it is usable. */
static void parse_cie(builder *b, const record *r, cie_info *ci) {
  cursor c = {r->body, r->end, b->im->host, false};
  memset(ci, 0, sizeof *ci);
  ci->vaddr = r->vaddr;
  ci->ra_reg = UINT64_MAX;
  if (rd_u32(&c) != 0) return; /* not a CIE */
  uint8_t version = rd_u8(&c);
  if (version != 1 && version != 3 && version != 4) return;
  const uint8_t *aug = c.p;
  while (c.p < c.end && *c.p) c.p++;
  if (!cur_need(&c, 1)) return;
  c.p++; /* the NUL */
  if (version == 4) {
    /* DWARF 4 adds the address and segment selector sizes. */
    if (rd_u8(&c) != 8 || rd_u8(&c) != 0) return;
  }
  ci->code_align = rd_uleb(&c);
  ci->data_align = rd_sleb(&c);
  ci->ra_reg = version == 1 ? rd_u8(&c) : rd_uleb(&c);
  ci->fde_enc = DW_EH_PE_absptr;
  if (c.bad) return;
  if (aug[0] == 'z') {
    uint64_t n = rd_uleb(&c);
    if (c.bad || n > (uint64_t)(c.end - c.p)) return;
    cursor a = {c.p, c.p + n, c.host, false};
    c.p += n;
    ci->aug_z = true;
    /* A letter we do not know may have data we cannot size, but the
     * length prefix lets us skip it all: stop reading the letters. */
    for (const uint8_t *l = aug + 1; *l && !a.bad; l++) {
      if (*l == 'R') {
        ci->fde_enc = rd_u8(&a);
      } else if (*l == 'P') {
        uint8_t enc = rd_u8(&a);
        if (enc == DW_EH_PE_omit) return;
        rd_enc_value(&a, enc);
      } else if (*l == 'L') {
        rd_u8(&a);
      } else if (*l == 'S') {
        ci->signal = true;
      } else if (*l != 'B' && *l != 'G') {
        break;
      }
    }
    if (a.bad) return;
  } else if (aug[0] != 0) {
    /* Without 'z' an augmentation's data cannot be skipped ("eh" and
     * older), so the instructions cannot be found. */
    return;
  }
  /* An FDE's addresses must be decodable (checked once here). */
  uint8_t app = ci->fde_enc & 0x70, fmt = ci->fde_enc & 0x0f;
  if (ci->fde_enc & DW_EH_PE_indirect) return;
  if (app != 0 && app != DW_EH_PE_pcrel && app != DW_EH_PE_datarel) return;
  if (fmt != DW_EH_PE_absptr && fmt != DW_EH_PE_uleb128 &&
      (fmt < DW_EH_PE_udata2 || fmt > DW_EH_PE_udata8) &&
      (fmt < DW_EH_PE_sleb128 || fmt > DW_EH_PE_sdata8))
    return;
  /* The initial instructions run once, here. */
  if ((uint64_t)(c.end - c.p) > b->budget) return;
  b->budget -= (uint64_t)(c.end - c.p);
  memset(&ci->init, 0, sizeof ci->init);
  ci->init.cfa_reg = UINT64_MAX; /* no CFA until one is defined */
  ci->ok = run_program(NULL, ci, &c, &ci->init, 0, 0);
}

/* The CIE at vaddr, parsed on first use; -1 when there is no record there
 * or memory ran out. */
static int get_cie(builder *b, uint64_t vaddr) {
  int i = cie_lookup(b, vaddr);
  if (i >= 0) return i;
  record r;
  if (!rd_record(b->im, vaddr, &r) || r.terminator) return -1;
  if (b->ncies >= UINT32_MAX - 1) return -1;
  if (2 * (b->ncies + 1) > b->cie_hash_cap &&
      !rehash(b, &b->cie_hash, &b->cie_hash_cap, b->ncies, cie_hash_at))
    return -1;
  cie_info *cies = grow(b, b->cies, &b->cies_cap, b->ncies + 1, sizeof *cies);
  if (!cies) return -1;
  b->cies = cies;
  cie_info *ci = &b->cies[b->ncies];
  parse_cie(b, &r, ci);
  size_t mask = b->cie_hash_cap - 1;
  size_t h = mix64(vaddr) & mask;
  while (b->cie_hash[h]) h = (h + 1) & mask;
  b->cie_hash[h] = (uint32_t)++b->ncies;
  if (r.vaddr < b->eh_lo) b->eh_lo = r.vaddr;
  if (r.next > b->eh_hi) b->eh_hi = r.next;
  return (int)(b->ncies - 1);
}

/*
 * FDEs: collected first, then sorted, then interpreted in address order.
 */

/* Adds the FDE record r to the list; a bad or empty one is counted or
 * ignored. */
static void add_fde(builder *b, const record *r) {
  cursor c = {r->body, r->end, b->im->host, false};
  uint32_t ptr = rd_u32(&c);
  if (ptr == 0) return; /* a CIE */
  if (r->vaddr < b->eh_lo) b->eh_lo = r->vaddr;
  if (r->next > b->eh_hi) b->eh_hi = r->next;
  /* The CIE pointer counts back from its own field (the body's start). */
  int ci = get_cie(b, r->body_vaddr - ptr);
  if (b->oom) return;
  if (ci < 0 || !b->cies[ci].ok) goto bad;
  const cie_info *cie = &b->cies[ci];
  uint64_t begin = rd_enc(&c, cie->fde_enc, b->hdr);
  uint64_t range = rd_enc_value(&c, cie->fde_enc);
  if (cie->aug_z) cur_skip(&c, rd_uleb(&c));
  if (c.bad) goto bad;
  if (range == 0) return; /* covers nothing */
  if (begin > UINT32_MAX || range > UINT32_MAX - begin) goto bad;
  fde_ent *fdes = grow(b, b->fdes, &b->fdes_cap, b->nfdes + 1, sizeof *fdes);
  if (!fdes) return;
  b->fdes = fdes;
  b->fdes[b->nfdes++] = (fde_ent){begin, begin + range, c.p, c.end,
                                  (uint32_t)ci};
  return;
bad:
  b->fdes_bad++;
}

/* Reads .eh_frame_hdr and collects the FDEs, from its search table when
 * there is one, else by walking .eh_frame. CPROF_EINVAL when the header
 * is unusable. */
static int collect_fdes(builder *b) {
  uint64_t avail;
  const uint8_t *p = cprof__cfi_img_span(b->im, b->hdr, 4, &avail);
  if (!p) return CPROF_EINVAL;
  cursor c = {p, p + avail, b->im->host, false};
  uint8_t version = rd_u8(&c);
  uint8_t eh_enc = rd_u8(&c), count_enc = rd_u8(&c), table_enc = rd_u8(&c);
  if (version != 1) return CPROF_EINVAL;
  bool has_eh = eh_enc != DW_EH_PE_omit;
  uint64_t eh = has_eh ? rd_enc(&c, eh_enc, b->hdr) : 0;
  if (c.bad) return CPROF_EINVAL;

  if (count_enc != DW_EH_PE_omit && table_enc != DW_EH_PE_omit) {
    uint64_t count = rd_enc(&c, count_enc, b->hdr);
    if (c.bad) return CPROF_EINVAL;
    /* Each entry takes at least two bytes, which bounds the loop. */
    for (uint64_t i = 0; i < count && !c.bad && !b->oom; i++) {
      rd_enc(&c, table_enc, b->hdr); /* the FDE's own pc_begin rules */
      uint64_t fde = rd_enc(&c, table_enc, b->hdr);
      record r;
      if (c.bad) break;
      if (rd_record(b->im, fde, &r) && !r.terminator) {
        add_fde(b, &r);
      } else {
        b->fdes_bad++;
      }
    }
    return 0;
  }
  if (!has_eh) return CPROF_EINVAL;
  /* Every record is at least 8 bytes long, which bounds the walk. */
  for (uint64_t v = eh; !b->oom;) {
    record r;
    if (!rd_record(b->im, v, &r) || r.terminator) break;
    add_fde(b, &r);
    v = r.next;
  }
  return 0;
}

bool cprof__cfi_hdr_eh_frame(const uint8_t *h, size_t n, uint64_t hdr,
                             uint64_t *eh) {
  cursor c = {h, h + n, (uintptr_t)h - (uintptr_t)hdr, false};
  uint8_t version = rd_u8(&c), eh_enc = rd_u8(&c);
  cur_skip(&c, 2);
  if (version != 1 || eh_enc == DW_EH_PE_omit) return false;
  *eh = rd_enc(&c, eh_enc, hdr);
  return !c.bad;
}

/* FDE order: by start, the longer first, then by where they are. */
static bool fde_less(const fde_ent *a, const fde_ent *b) {
  if (a->begin != b->begin) return a->begin < b->begin;
  if (a->end != b->end) return a->end > b->end;
  return a->ins < b->ins;
}

static void sift_down(fde_ent *f, size_t i, size_t n) {
  for (;;) {
    size_t m = i, l = 2 * i + 1, r = l + 1;
    if (l < n && fde_less(&f[m], &f[l])) m = l;
    if (r < n && fde_less(&f[m], &f[r])) m = r;
    if (m == i) return;
    fde_ent t = f[i];
    f[i] = f[m];
    f[m] = t;
    i = m;
  }
}

/* The search table is sorted already, so check first; otherwise heapsort,
 * which needs no memory (glibc's qsort may call malloc). */
static void sort_fdes(fde_ent *f, size_t n) {
  size_t i;
  for (i = 1; i < n && !fde_less(&f[i], &f[i - 1]); i++) {
  }
  if (i >= n) return;
  for (i = n / 2; i-- > 0;) sift_down(f, i, n);
  for (i = n; i-- > 1;) {
    fde_ent t = f[0];
    f[0] = f[i];
    f[i] = t;
    sift_down(f, 0, i);
  }
}

/* Turns one FDE into rows. Its rows start no lower than what earlier FDEs
 * cover, so the table stays sorted; a malformed FDE is rolled back. */
static void run_fde(builder *b, const fde_ent *f) {
  static const cprof__cfi_rule none = {0};
  if (f->end <= b->covered) {
    b->fdes_bad++; /* wholly inside an earlier FDE */
    return;
  }
  size_t saved_rows = b->nrows;
  cprof__cfi_rule saved_last = b->last;
  if (b->nrows > 0 && f->begin > b->covered)
    append_row(b, (uint32_t)b->covered, &none);
  b->clip = f->begin > b->covered ? f->begin : b->covered;
  const cie_info *cie = &b->cies[f->cie];
  bool ok = true;
  if (cie->signal) {
    cprof__cfi_rule sig = {.kind = CPROF__CFI_SIGNAL};
    emit(b, f->begin, &sig);
  } else if ((uint64_t)(f->ins_end - f->ins) > b->budget) {
    ok = false;
  } else {
    b->budget -= (uint64_t)(f->ins_end - f->ins);
    cfa_state st = cie->init;
    cursor c = {f->ins, f->ins_end, b->im->host, false};
    ok = run_program(b, cie, &c, &st, f->begin, f->end);
  }
  flush_pending(b);
  if (!ok || b->oom) {
    b->nrows = saved_rows;
    b->last = saved_last;
    b->fdes_bad++;
    return;
  }
  b->covered = f->end;
  b->fdes_ok++;
}

static void builder_reset(builder *b, const cprof__cfi_image *im,
                          uint64_t hdr) {
  b->im = im;
  b->hdr = hdr;
  b->eh_lo = UINT64_MAX;
  b->eh_hi = 0;
  b->ncies = b->nfdes = b->nrows = b->nrules = 0;
  if (b->cie_hash)
    memset(b->cie_hash, 0, b->cie_hash_cap * sizeof *b->cie_hash);
  if (b->rule_hash)
    memset(b->rule_hash, 0, b->rule_hash_cap * sizeof *b->rule_hash);
  memset(&b->last, 0, sizeof b->last);
  b->pending = false;
  b->covered = b->clip = 0;
  b->fdes_ok = b->fdes_bad = 0;
  b->oom = false;
  b->budget = 1 << 16;
  for (size_t i = 0; i < im->nsegs; i++)
    b->budget += 2 * (im->segs[i].hi - im->segs[i].lo);
}

void cprof__cfi_builder_free(builder *b) {
  cprof__free(b->cies);
  cprof__free(b->cie_hash);
  cprof__free(b->fdes);
  cprof__free(b->pcs);
  cprof__free(b->ridx);
  cprof__free(b->rules);
  cprof__free(b->rule_hash);
  memset(b, 0, sizeof *b);
}

/* The page index rows pcs (sorted) get (cprof__cfi_table): its number of
 * pages, 0 when the rows are too sparse for an index (more pages than
 * twice the rows), and the first page's number. */
static uint32_t page_count(const uint32_t *pcs, size_t nrows,
                           uint32_t *base) {
  *base = 0;
  if (nrows < 2) return 0;
  uint32_t first = pcs[0] >> CPROF__CFI_PAGE_SHIFT;
  uint64_t span = (uint64_t)(pcs[nrows - 1] >> CPROF__CFI_PAGE_SHIFT) -
                  first + 1;
  if (pcs[nrows - 1] < pcs[0] || span > 2 * (uint64_t)nrows + 16) return 0;
  *base = first;
  return (uint32_t)span;
}

/* Fills page[0..npages] for rows pcs (sorted). */
static void page_fill(const uint32_t *pcs, size_t nrows, uint32_t base,
                      uint32_t npages, uint32_t *page) {
  size_t i = 0;
  for (uint32_t j = 0; j <= npages; j++) {
    uint64_t start = (uint64_t)(base + j) << CPROF__CFI_PAGE_SHIFT;
    while (i + 1 < nrows && pcs[i + 1] <= start) i++;
    page[j] = (uint32_t)i;
  }
}

/* A table in one allocation, from its rules and rows. */
static int table_make(const cprof__cfi_rule *rules_in, size_t nrules,
                      const uint32_t *pcs_in, const uint16_t *ridx_in,
                      size_t nrows, size_t eh_bytes, size_t fdes,
                      size_t fdes_bad, cprof__cfi_table **out) {
  uint32_t base;
  uint32_t npages = page_count(pcs_in, nrows, &base);
  size_t npage = npages ? (size_t)npages + 1 : 0;
  size_t bytes = sizeof(cprof__cfi_table) + nrules * sizeof *rules_in +
                 npage * sizeof(uint32_t) +
                 nrows * (sizeof *pcs_in + sizeof *ridx_in);
  cprof__cfi_table *t = cprof__malloc(bytes);
  if (!t) return CPROF_ENOMEM;
  cprof__cfi_rule *rules = (cprof__cfi_rule *)(t + 1);
  uint32_t *page = (uint32_t *)(rules + nrules);
  uint32_t *pcs = page + npage;
  uint16_t *ridx = (uint16_t *)(pcs + nrows);
  memcpy(rules, rules_in, nrules * sizeof *rules);
  if (nrows) {
    memcpy(pcs, pcs_in, nrows * sizeof *pcs);
    memcpy(ridx, ridx_in, nrows * sizeof *ridx);
  }
  if (npages) page_fill(pcs, nrows, base, npages, page);
  t->page = npages ? page : NULL;
  t->npages = npages;
  t->page_base = base;
  t->nrows = (uint32_t)nrows;
  t->nrules = (uint32_t)nrules;
  t->bytes = bytes;
  t->map = NULL;
  t->map_len = 0;
  t->eh_bytes = eh_bytes;
  t->fdes = fdes;
  t->fdes_bad = fdes_bad;
  t->pc = pcs;
  t->rule = ridx;
  t->rules = rules;
  *out = t;
  return 0;
}

int cprof__cfi_build(builder *b, const cprof__cfi_image *im, uint64_t hdr,
                     cprof__cfi_table **out) {
  static const cprof__cfi_rule none = {0};
  static const cprof__cfi_rule unsupported = {.kind = CPROF__CFI_UNSUPPORTED};
  *out = NULL;
  builder_reset(b, im, hdr);
  intern_rule(b, &none);
  intern_rule(b, &unsupported);
  if (b->oom) return CPROF_ENOMEM;
  int rc = collect_fdes(b);
  if (rc) return rc;
  if (b->oom) return CPROF_ENOMEM;
  sort_fdes(b->fdes, b->nfdes);
  for (size_t i = 0; i < b->nfdes && !b->oom; i++) {
    /* The search table may list one FDE many times; sorted, the copies
     * are neighbours. Running each once keeps the work within the input's
     * size even when the FDE is malformed (and so covers nothing). */
    if (i > 0 && b->fdes[i].ins == b->fdes[i - 1].ins) {
      b->fdes_bad++;
      continue;
    }
    run_fde(b, &b->fdes[i]);
  }
  if (b->nrows > 0) append_row(b, (uint32_t)b->covered, &none);
  if (b->oom) return CPROF_ENOMEM;

  return table_make(b->rules, b->nrules, b->pcs, b->ridx, b->nrows,
                    b->eh_hi > b->eh_lo ? (size_t)(b->eh_hi - b->eh_lo) : 0,
                    b->fdes_ok, b->fdes_bad, out);
}

int cprof__cfi_table_build(const uint8_t *img, size_t len, size_t hdr_off,
                           cprof__cfi_table **out) {
  *out = NULL;
  if (!img || hdr_off >= len) return CPROF_EINVAL;
  if ((uint64_t)len > UINT32_MAX) return CPROF_EUNSUPPORTED;
  cprof__cfi_image im = {.host = (uintptr_t)img, .nsegs = 1};
  im.segs[0].lo = 0;
  im.segs[0].hi = len;
  builder b = {0};
  int rc = cprof__cfi_build(&b, &im, hdr_off, out);
  cprof__cfi_builder_free(&b);
  return rc;
}

void cprof__cfi_table_free(cprof__cfi_table *t) {
  if (t && t->map) munmap(t->map, t->map_len);
  cprof__free(t);
}

size_t cprof__cfi_table_rows(const cprof__cfi_table *t) {
  return t ? t->nrows : 0;
}

size_t cprof__cfi_table_bytes(const cprof__cfi_table *t) {
  return t ? t->bytes : 0;
}

bool cprof__cfi_table_row(const cprof__cfi_table *t, size_t i, uint32_t *pc,
                          cprof__cfi_rule *out) {
  if (!t || i >= t->nrows) return false;
  *pc = t->pc[i];
  /* A row of a table read from the cache is checked as it is used: one
   * whose rule index is out of range has no rule. */
  uint16_t r = t->rule[i];
  if (r < t->nrules)
    *out = t->rules[r];
  else
    memset(out, 0, sizeof *out);
  return true;
}


/*
 * Tables as cache entries: a header (magic, the .eh_frame_hdr vaddr, the
 * figures, the counts, the tag's length and the page index's extent), the
 * tag padded to 4 bytes, then the rules, the page index, the rows' pcs
 * and their rule indexes, as a table holds them.
 */
static const unsigned char TABLE_MAGIC[8] = {'C', 'P', 'C', 'F', 'I', 0, 0, 2};

typedef struct table_header {
  unsigned char magic[8];
  uint64_t hdr, eh_bytes, fdes, fdes_bad;
  uint32_t nrows, nrules, tag_len, zero;
  uint32_t npages, page_base;
} table_header;

/* The page index's entries in a table of h. */
static size_t page_entries(const table_header *h) {
  return h->npages ? (size_t)h->npages + 1 : 0;
}

int cprof__cfi_table_save(const cprof__cfi_table *t, uint64_t hdr,
                          const char *tag, cprof_buf *out) {
  size_t tag_len = strlen(tag);
  if (tag_len > 4096) return CPROF_EINVAL;
  table_header h = {.hdr = hdr,
                    .eh_bytes = t->eh_bytes,
                    .fdes = t->fdes,
                    .fdes_bad = t->fdes_bad,
                    .nrows = t->nrows,
                    .nrules = t->nrules,
                    .tag_len = (uint32_t)tag_len,
                    .npages = t->npages,
                    .page_base = t->page_base};
  memcpy(h.magic, TABLE_MAGIC, sizeof h.magic);
  static const unsigned char zeros[4];
  out->len = 0;
  if (cprof__buf_append(out, &h, sizeof h) != 0 ||
      cprof__buf_append(out, tag, tag_len) != 0 ||
      cprof__buf_append(out, zeros, (4 - tag_len % 4) % 4) != 0 ||
      cprof__buf_append(out, t->rules, t->nrules * sizeof *t->rules) != 0 ||
      (t->npages && cprof__buf_append(out, t->page,
                                      page_entries(&h) * sizeof *t->page) !=
                        0) ||
      cprof__buf_append(out, t->pc, t->nrows * sizeof *t->pc) != 0 ||
      cprof__buf_append(out, t->rule, t->nrows * sizeof *t->rule) != 0)
    return CPROF_ENOMEM;
  return 0;
}

/* A rule a table may hold: a known kind, the fields its kind does not use
 * zero (so equal rules compare equal), as the builder makes them. */
static bool rule_ok(const cprof__cfi_rule *r) {
  if (r->reserved) return false;
  switch (r->kind) {
    case CPROF__CFI_NONE:
    case CPROF__CFI_SIGNAL:
    case CPROF__CFI_END:
    case CPROF__CFI_UNSUPPORTED:
      return !r->fp_saved && !r->plt_split && !r->cfa_off && !r->fp_off;
    case CPROF__CFI_PLT:
      if (r->plt_split > 15) return false;
      break;
    case CPROF__CFI_RSP:
    case CPROF__CFI_RBP:
      if (r->plt_split) return false;
      break;
    default:
      return false;
  }
  return r->fp_saved <= 1 && (r->fp_saved || !r->fp_off);
}

/* The header of an entry: its layout checked against hdr, tag and the
 * entry's length len; *at gets where the rules start. */
static bool header_ok(const table_header *h, const unsigned char *tag_bytes,
                      size_t len, uint64_t hdr, const char *tag, size_t *at) {
  size_t tag_len = strlen(tag);
  if (memcmp(h->magic, TABLE_MAGIC, sizeof h->magic) != 0 || h->hdr != hdr ||
      h->tag_len != tag_len || h->zero || h->nrows == 0 || h->nrules == 0 ||
      h->nrules > (uint32_t)UINT16_MAX + 1 || h->nrows > (uint32_t)INT32_MAX ||
      h->eh_bytes > SIZE_MAX || h->fdes > SIZE_MAX || h->fdes_bad > SIZE_MAX ||
      (uint64_t)h->npages > 2 * (uint64_t)h->nrows + 16)
    return false;
  *at = sizeof *h + tag_len + (4 - tag_len % 4) % 4;
  /* Each count is below 2^33, so the sum cannot overflow. */
  size_t need = *at + (size_t)h->nrules * sizeof(cprof__cfi_rule) +
                page_entries(h) * sizeof(uint32_t) +
                (size_t)h->nrows * (sizeof(uint32_t) + sizeof(uint16_t));
  return need == len && (!tag_bytes || memcmp(tag_bytes, tag, tag_len) == 0);
}

/* Fills t's header from h, its arrays being at arrays (4-byte aligned),
 * and checks every rule and the last row: false when one is not what a
 * build makes. The other rows are checked as a lookup uses them
 * (cprof__cfi_table_find): a process reads every table at start, and a
 * check here would touch every page of each. */
static bool body_ok(cprof__cfi_table *t, const void *arrays,
                    const table_header *h, size_t bytes) {
  const cprof__cfi_rule *r = arrays;
  const uint32_t *page = (const uint32_t *)(r + h->nrules);
  const uint32_t *pc = page + page_entries(h);
  const uint16_t *ri = (const uint16_t *)(pc + h->nrows);
  bool ok = true;
  for (uint32_t i = 0; ok && i < h->nrules; i++) ok = rule_ok(&r[i]);
  /* The last row ends the table: no rule past it. */
  if (ok) {
    uint16_t last = ri[h->nrows - 1];
    ok = last < h->nrules && r[last].kind == CPROF__CFI_NONE;
  }
  t->nrows = h->nrows;
  t->nrules = h->nrules;
  t->bytes = bytes;
  t->eh_bytes = (size_t)h->eh_bytes;
  t->fdes = (size_t)h->fdes;
  t->fdes_bad = (size_t)h->fdes_bad;
  t->pc = pc;
  t->rule = ri;
  t->rules = r;
  /* The page index's entries are checked as a lookup uses them too. */
  t->page = h->npages ? page : NULL;
  t->npages = h->npages;
  t->page_base = h->page_base;
  return ok;
}

static size_t table_bytes(const table_header *h) {
  return sizeof(cprof__cfi_table) +
         (size_t)h->nrules * sizeof(cprof__cfi_rule) +
         page_entries(h) * sizeof(uint32_t) +
         (size_t)h->nrows * (sizeof(uint32_t) + sizeof(uint16_t));
}

int cprof__cfi_table_load(const void *data, size_t len, uint64_t hdr,
                          const char *tag, cprof__cfi_table **out) {
  *out = NULL;
  const unsigned char *p = data;
  table_header h;
  size_t at;
  if (!p || len < sizeof h) return CPROF_EINVAL;
  memcpy(&h, p, sizeof h);
  if (len - sizeof h < h.tag_len ||
      !header_ok(&h, p + sizeof h, len, hdr, tag, &at))
    return CPROF_EINVAL;
  size_t bytes = table_bytes(&h);
  cprof__cfi_table *t = cprof__malloc(bytes);
  if (!t) return CPROF_ENOMEM;
  /* Copied before they are checked: the bytes may be unaligned. */
  memcpy(t + 1, p + at, bytes - sizeof *t);
  t->map = NULL;
  t->map_len = 0;
  if (!body_ok(t, t + 1, &h, bytes)) {
    cprof__free(t);
    return CPROF_EINVAL;
  }
  *out = t;
  return 0;
}

int cprof__cfi_table_read(int fd, size_t len, uint64_t hdr, const char *tag,
                          cprof__cfi_table **out) {
  *out = NULL;
  table_header h;
  size_t at;
  if (len < sizeof h) return CPROF_EINVAL;
  /* The entry is used where its file lies, mapped read-only: its pages
   * are the page cache's, shared by every process that reads the entry,
   * and come in sixteen a fault. A copy (read into memory of its own) cost
   * four to eight times as much, in the copy and in the first touch of
   * each new page. Entries are replaced by a rename and removed by an
   * unlink, never written in place, so the file under a mapping does not
   * change. */
  unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) {
    /* A file system that cannot map files: a copy, populated in one call
     * (a page fault a page otherwise). */
    m = mmap(NULL, len, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) return CPROF_ENOMEM;
    if (!cprof__cachedir_read_at(fd, m, len, 0)) {
      munmap(m, len);
      return CPROF_EINVAL;
    }
  }
  memcpy(&h, m, sizeof h);
  cprof__cfi_table *t = NULL;
  int err = CPROF_EINVAL;
  if (len - sizeof h >= h.tag_len &&
      header_ok(&h, m + sizeof h, len, hdr, tag, &at)) {
    t = cprof__malloc(sizeof *t);
    err = t ? 0 : CPROF_ENOMEM;
  }
  if (!t) {
    munmap(m, len);
    return err;
  }
  t->map = m;
  t->map_len = len;
  if (!body_ok(t, m + at, &h, table_bytes(&h))) {
    cprof__cfi_table_free(t);
    return CPROF_EINVAL;
  }
  *out = t;
  return 0;
}
