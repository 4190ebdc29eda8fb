/*
 * The CFI tables. This module owns every object's compact row table, the
 * published index of them and the writer lock that serialises refreshes.
 * The build side (cprof__cfi_refresh, cprof__cfi_shutdown, the stats, the
 * buffer builder) runs in normal context only: it may call dl_iterate_phdr,
 * cprof's own allocator (mem.h), mmap, sched_yield, nanosleep and
 * process_vm_readv, and must never take a pthread mutex (cprof interposes
 * them) or load a byte of an object's memory directly: a loaded object's
 * pages can fault (a library whose file was truncated after it was mapped
 * raises SIGBUS on every page past the file's new end), so its unwind data
 * is first copied out with process_vm_readv, which reports the pages it
 * cannot read instead of faulting, and only the copy is parsed. The signal side (cprof__cfi_read_begin, _read_end,
 * _find, _code_range, _table_find) runs in signal handlers: it must never
 * lock, allocate, make a system call or loop beyond a binary search, and it
 * reads only memory this module allocated and published.
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
 *
 * Publishing: the index is immutable once published. Readers add one to a
 * global reader count before they load the index pointer and subtract one
 * when done (all seq_cst). The writer stores the new pointer (seq_cst) and
 * then waits until it reads the count as zero before it frees the old index
 * or a table only the old index held. That is safe because all these
 * operations fall in one total order: a reader that got the old pointer
 * loaded it before the writer's store, so its increment came before the
 * store too, and the writer's load of the count, which comes after the
 * store, reads a value that includes the increment, nonzero until that
 * reader's decrement (a release the writer's load acquires, so the
 * reader's last use happens before the free). A reader whose increment
 * comes after the writer's load of the count loads the pointer after the
 * store, so it gets the new index. The wait is bounded (about a second:
 * a walk takes microseconds, but a reader can be preempted); when it
 * times out, the old index stays on a retired list that a later refresh
 * (or shutdown) frees. One count for all readers means readers that never
 * pause would starve the wait; a profiler's handlers run for microseconds
 * at most a few thousand times a second, which leaves the count at zero
 * nearly all the time. Readers never touch the objects' own memory, so
 * dlclose needs no further grace. Around fork, the writer lock is held so
 * that a child never inherits it taken, and the child, which has no other
 * threads, starts with no readers.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>

#include "base/fork.h"
#include "base/lock.h"
#include "capture/cfi.h"
#include "capture/stack.h"
#include "base/mem.h"
#include "base/spin.h"
#include "base/sys.h"

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
/* Readable segments an image may have; real objects have 2 to 5. */
#define MAX_SEGS 16
/* Rule indexes are uint16; these two are interned first. */
#define RULE_NONE_IDX 0
#define RULE_UNSUPPORTED_IDX 1
#define MAX_RULES 65536u
/* How long a refresh waits for readers before it retires an index. */
#define GRACE_NS 1000000000ll
/* The most bytes of one object's unwind data copied for a build; real
 * objects have a few hundred KiB (libstdc++: 250 KiB). */
#define MAX_UNWIND_COPY ((uint64_t)256 << 20)
/* Pages per process_vm_readv call when unwind data is copied, and the
 * page size (x86-64's, the one architecture tables are built for). */
#define COPY_PAGES 64
#define PAGE ((uintptr_t)4096)

/*
 * Parsing.
 */

/* An object's memory image: the byte at vaddr v is at host + v when v lies
 * in one of the readable segments. */
typedef struct {
  uintptr_t host;
  struct {
    uint64_t lo, hi;
  } segs[MAX_SEGS];
  size_t nsegs;
} image;

/* The bytes [v, v + n), or NULL unless they lie inside one segment; *avail
 * gets how many bytes from v the segment holds. */
static const uint8_t *img_span(const image *im, uint64_t v, uint64_t n,
                               uint64_t *avail) {
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

static bool rd_record(const image *im, uint64_t v, record *r) {
  uint64_t avail;
  const uint8_t *p = img_span(im, v, 4, &avail);
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

typedef struct {
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

typedef struct {
  uint64_t begin, end; /* end <= UINT32_MAX */
  const uint8_t *ins, *ins_end;
  uint32_t cie;
} fde_ent;

/* Everything one build needs; the arrays are reused from object to object
 * within a refresh. */
typedef struct {
  const image *im;
  uint64_t hdr; /* vaddr of .eh_frame_hdr: the datarel base */
  uint64_t eh_lo, eh_hi; /* the span of .eh_frame records seen */

  cie_info *cies;
  size_t ncies, cies_cap;
  uint32_t *cie_hash; /* index + 1; 0 = empty slot */
  size_t cie_hash_cap;

  fde_ent *fdes;
  size_t nfdes, fdes_cap;

  uint32_t *pcs;
  uint16_t *ridx;
  size_t nrows, rows_cap;
  cprof__cfi_rule *rules;
  size_t nrules, rules_cap;
  uint32_t *rule_hash;
  size_t rule_hash_cap;

  cprof__cfi_rule last; /* the rule of the last row */
  bool pending;         /* a row not yet appended: a later rule at the */
  uint32_t pend_pc;     /* same pc replaces it */
  cprof__cfi_rule pend;
  uint64_t covered; /* rows describe everything below this */
  uint64_t clip;    /* the current FDE's rows start no lower */

  /* Instruction bytes left to interpret. Records may overlap, so a
   * crafted image could have far more bytes of programs than it has
   * bytes; real objects stay far below this. */
  uint64_t budget;

  size_t fdes_ok, fdes_bad;
  bool oom;
} builder;

struct cprof__cfi_table {
  uint32_t nrows, nrules;
  size_t bytes;
  size_t eh_bytes, fdes, fdes_bad;
  const uint32_t *pc;
  const uint16_t *rule;
  const cprof__cfi_rule *rules;
};

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
  const uint8_t *p = img_span(b->im, b->hdr, 4, &avail);
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

static void builder_reset(builder *b, const image *im, uint64_t hdr) {
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

static void builder_free(builder *b) {
  cprof__free(b->cies);
  cprof__free(b->cie_hash);
  cprof__free(b->fdes);
  cprof__free(b->pcs);
  cprof__free(b->ridx);
  cprof__free(b->rules);
  cprof__free(b->rule_hash);
  memset(b, 0, sizeof *b);
}

/* Builds the table of one image. Returns 0, CPROF_EINVAL or CPROF_ENOMEM;
 * a table may have no rows. */
static int build(builder *b, const image *im, uint64_t hdr,
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

  size_t bytes = sizeof(cprof__cfi_table) + b->nrules * sizeof *b->rules +
                 b->nrows * (sizeof *b->pcs + sizeof *b->ridx);
  cprof__cfi_table *t = cprof__malloc(bytes);
  if (!t) return CPROF_ENOMEM;
  cprof__cfi_rule *rules = (cprof__cfi_rule *)(t + 1);
  uint32_t *pcs = (uint32_t *)(rules + b->nrules);
  uint16_t *ridx = (uint16_t *)(pcs + b->nrows);
  memcpy(rules, b->rules, b->nrules * sizeof *rules);
  if (b->nrows) {
    memcpy(pcs, b->pcs, b->nrows * sizeof *pcs);
    memcpy(ridx, b->ridx, b->nrows * sizeof *ridx);
  }
  t->nrows = (uint32_t)b->nrows;
  t->nrules = (uint32_t)b->nrules;
  t->bytes = bytes;
  t->eh_bytes = b->eh_hi > b->eh_lo ? (size_t)(b->eh_hi - b->eh_lo) : 0;
  t->fdes = b->fdes_ok;
  t->fdes_bad = b->fdes_bad;
  t->pc = pcs;
  t->rule = ridx;
  t->rules = rules;
  *out = t;
  return 0;
}

int cprof__cfi_table_build(const uint8_t *img, size_t len, size_t hdr_off,
                           cprof__cfi_table **out) {
  *out = NULL;
  if (!img || hdr_off >= len) return CPROF_EINVAL;
  if ((uint64_t)len > UINT32_MAX) return CPROF_EUNSUPPORTED;
  image im = {.host = (uintptr_t)img, .nsegs = 1};
  im.segs[0].lo = 0;
  im.segs[0].hi = len;
  builder b = {0};
  int rc = build(&b, &im, hdr_off, out);
  builder_free(&b);
  return rc;
}

void cprof__cfi_table_free(cprof__cfi_table *t) { cprof__free(t); }

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
  *out = t->rules[t->rule[i]];
  return true;
}

/* Signal-safe: a branch-light binary search for the last row at or below
 * off. */
CPROF__SIGNAL_SAFE bool cprof__cfi_table_find(const cprof__cfi_table *t, uintptr_t off,
                           cprof__cfi_rule *out) {
  memset(out, 0, sizeof *out);
  if (!t || t->nrows == 0 || off > UINT32_MAX) return false;
  const uint32_t *pc = t->pc;
  uint32_t x = (uint32_t)off;
  if (x < pc[0]) return false;
  size_t lo = 0, n = t->nrows;
  while (n > 1) {
    size_t half = n / 2;
    if (pc[lo + half] <= x) lo += half;
    n -= half;
  }
  *out = t->rules[t->rule[lo]];
  return out->kind != CPROF__CFI_NONE;
}

/*
 * The published index.
 */

/* What a reader needs of one object. */
typedef struct {
  uintptr_t lo, hi; /* the executable span */
  uintptr_t base;   /* the load bias, which row pcs are relative to */
  const cprof__cfi_table *table; /* NULL: no usable CFI */
} index_entry;

/* The writer's record of one loaded object, shared by the indexes that
 * list it. */
typedef struct {
  uintptr_t base;
  const void *phdr;
  uint64_t fingerprint;
  uint64_t hdr; /* .eh_frame_hdr's vaddr, 0 without one */
  char *name;
  uintptr_t exec_lo, exec_hi;
  cprof__cfi_table *table;
  int status;
  size_t fdes_bad; /* also counted for objects without a table */
  int64_t build_ns;
  unsigned refs; /* indexes, published or retired, that list it */
} cfi_object;

struct cprof__cfi_index {
  size_t n;
  size_t bytes;
  cfi_object **objs; /* parallel to e, for the writer */
  struct cprof__cfi_index *next_retired;
  index_entry e[];
};

static _Atomic(cprof__cfi_index *) current_index;
static atomic_long readers;
static cprof__spin writer_lock;
CPROF__SPIN_FUNCTIONS()

/* The writer's state, under writer_lock. */
static struct {
  bool seen; /* adds/subs hold the counters current_index was built at */
  unsigned long long adds, subs;
  cprof__cfi_index *retired;
  uint64_t refreshes, rebuilds;
  int64_t last_build_ns;
} w;

CPROF__SIGNAL_SAFE const cprof__cfi_index *cprof__cfi_read_begin(void) {
  atomic_fetch_add_explicit(&readers, 1, memory_order_seq_cst);
  const cprof__cfi_index *idx =
      atomic_load_explicit(&current_index, memory_order_seq_cst);
  if (!idx) atomic_fetch_sub_explicit(&readers, 1, memory_order_seq_cst);
  return idx;
}

CPROF__SIGNAL_SAFE void cprof__cfi_read_end(const cprof__cfi_index *idx) {
  if (idx) atomic_fetch_sub_explicit(&readers, 1, memory_order_seq_cst);
}

/* The entry whose executable span holds pc, or NULL. Signal-safe. */
CPROF__SIGNAL_SAFE static const index_entry *index_lookup(const cprof__cfi_index *idx,
                                       uintptr_t pc) {
  if (!idx || idx->n == 0 || pc < idx->e[0].lo) return NULL;
  size_t lo = 0, n = idx->n;
  while (n > 1) {
    size_t half = n / 2;
    if (idx->e[lo + half].lo <= pc) lo += half;
    n -= half;
  }
  return pc < idx->e[lo].hi ? &idx->e[lo] : NULL;
}

CPROF__SIGNAL_SAFE bool cprof__cfi_find(const cprof__cfi_index *idx, uintptr_t pc,
                     cprof__cfi_rule *out) {
  memset(out, 0, sizeof *out);
#if defined(__x86_64__)
  const index_entry *e = index_lookup(idx, pc);
  if (!e || !e->table) return false;
  cprof__cfi_table_find(e->table, pc - e->base, out);
  return true;
#else
  (void)idx;
  (void)pc;
  return false;
#endif
}

CPROF__SIGNAL_SAFE bool cprof__cfi_code_range(const cprof__cfi_index *idx, uintptr_t pc,
                           uintptr_t *lo, uintptr_t *hi) {
  const index_entry *e = index_lookup(idx, pc);
  if (!e) return false;
  if (lo) *lo = e->lo;
  if (hi) *hi = e->hi;
  return true;
}

/* The first address of the function holding pc, by bisection of the
 * search table of the .eh_frame_hdr at hdr, read through rd. Only the
 * encoding every linker writes is understood (the table datarel sdata4). */
bool cprof__eh_hdr_table(uint64_t hdr,
                         bool (*rd)(uint64_t addr, void *out, size_t len),
                         uint64_t *table, uint32_t *count) {
  unsigned char h[4];
  if (!hdr || !rd(hdr, h, sizeof h) || h[0] != 1) return false;
  size_t ptr_size = (h[1] & 0x0f) == 0x03 || (h[1] & 0x0f) == 0x0b ? 4
                    : (h[1] & 0x0f) == 0x04 || (h[1] & 0x0f) == 0x0c || h[1] == 0
                        ? 8
                        : 0;
  if (!ptr_size || h[2] != 0x03 || h[3] != 0x3b ||
      !rd(hdr + 4 + ptr_size, count, sizeof *count) || *count == 0)
    return false;
  *table = hdr + 4 + ptr_size + 4;
  return true;
}

bool cprof__eh_hdr_fde_start(uint64_t hdr, uint64_t pc, uint64_t *start,
                             bool (*rd)(uint64_t addr, void *out,
                                        size_t len)) {
  uint64_t table;
  uint32_t count;
  if (!cprof__eh_hdr_table(hdr, rd, &table, &count)) return false;
  /* The last entry whose first address is at or below pc. */
  int64_t want = (int64_t)(pc - hdr);
  uint32_t lo = 0, hi = count;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    int32_t e[2];
    if (!rd(table + 8 * (uint64_t)mid, e, sizeof e)) return false;
    if (e[0] <= want)
      lo = mid;
    else
      hi = mid;
  }
  int32_t e[2];
  if (!rd(table + 8 * (uint64_t)lo, e, sizeof e) || e[0] > want) return false;
  uint64_t first = hdr + (uint64_t)(int64_t)e[0];
  /* The FDE's range, when its address is pcrel sdata4 as usual: pc must
   * lie inside it (not in a gap between functions). */
  uint64_t fde = hdr + (uint64_t)(int64_t)e[1];
  uint32_t f[4]; /* length, CIE pointer, first address, range */
  if (rd(fde, f, sizeof f) && f[0] != 0xffffffffu &&
      fde + 8 + (uint64_t)(int64_t)(int32_t)f[2] == first && pc - first >= f[3])
    return false;
  *start = first;
  return true;
}

static bool read_loaded(uint64_t addr, void *out, size_t len) {
  return addr >= PAGE && addr <= UINTPTR_MAX &&
         cprof__safe_read((uintptr_t)addr, out, len);
}

typedef struct {
  uintptr_t pc;
  uint64_t hdr;
} hdr_search;

/* dl_iterate_phdr's callback: the .eh_frame_hdr of the object whose
 * executable segment holds the pc. */
static int hdr_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  hdr_search *q = arg;
  uint64_t hdr = 0;
  bool holds = false;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t a = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->pc >= a &&
        q->pc - a < ph->p_memsz)
      holds = true;
    else if (ph->p_type == PT_GNU_EH_FRAME)
      hdr = a;
  }
  if (!holds) return 0;
  q->hdr = hdr;
  return 1;
}

/* Bumped by every refresh that publishes a new index. */
static _Atomic uint64_t generation;

/* Answers of cprof__cfi_fde_start by pc, for objects the index lists,
 * until the index changes (the generation is part of the key): a
 * bisection costs two system calls a step, and the goroutine profile asks
 * for the same few hundred pcs at every request (67% of its time). Taken
 * with a trylock only: a thread that finds it busy computes the answer
 * itself; a fork child starts with it free (atfork_child). */
#define FDE_CACHE 4096
typedef struct {
  uint64_t gen; /* generation + 1; 0: empty */
  uintptr_t pc, start;
  bool found;
} fde_entry;
/* Allocated by the first lookup (128 KiB): a program that never asks
 * keeps that much address space, which a ulimit -v may count. */
static fde_entry *fde_cache;
static pthread_mutex_t fde_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t fde_slot(uintptr_t pc) {
  return (size_t)(((uint64_t)pc * 0x9e3779b97f4a7c15ull) >> 52) % FDE_CACHE;
}

bool cprof__cfi_fde_start(uintptr_t pc, uintptr_t *start) {
  const uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
  const size_t slot = fde_slot(pc);
  if (cprof__trylock(&fde_cache_mu) == 0) {
    if (!fde_cache) fde_cache = cprof__calloc(FDE_CACHE, sizeof *fde_cache);
    bool hit = fde_cache && fde_cache[slot].gen == gen + 1 &&
               fde_cache[slot].pc == pc;
    bool found = hit && fde_cache[slot].found;
    uintptr_t first = hit ? fde_cache[slot].start : 0;
    cprof__unlock(&fde_cache_mu);
    if (hit) {
      if (found) *start = first;
      return found;
    }
  }
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  const index_entry *e = index_lookup(idx, pc);
  uint64_t hdr = 0, first = 0;
  if (e) {
    const cfi_object *o = idx->objs[e - idx->e];
    if (o->hdr) hdr = (uint64_t)o->base + o->hdr;
  }
  cprof__cfi_read_end(idx);
  if (!e) {
    /* No table lists it (frame-pointer mode builds none, and an object
     * loaded since the last refresh is not listed yet): ask the loader. */
    hdr_search q = {pc, 0};
    dl_iterate_phdr(hdr_cb, &q);
    hdr = q.hdr;
  }
  bool found = cprof__eh_hdr_fde_start(hdr, pc, &first, read_loaded);
  if (e && cprof__trylock(&fde_cache_mu) == 0) {
    if (fde_cache)
      fde_cache[slot] = (fde_entry){gen + 1, pc, (uintptr_t)first, found};
    cprof__unlock(&fde_cache_mu);
  }
  if (!found) return false;
  *start = (uintptr_t)first;
  return true;
}

static void lock_writer(void) { spin_lock(&writer_lock); }

static void unlock_writer(void) { spin_unlock(&writer_lock); }

static void object_free(cfi_object *o) {
  cprof__cfi_table_free(o->table);
  cprof__free(o->name);
  cprof__free(o);
}

static void index_free(cprof__cfi_index *idx) {
  for (size_t i = 0; i < idx->n; i++)
    if (--idx->objs[i]->refs == 0) object_free(idx->objs[i]);
  cprof__free(idx);
}

/* Frees the retired indexes once no reader can hold them: immediately
 * when the reader count reads zero, else after waiting up to max_ns. */
static void reclaim(int64_t max_ns) {
  if (!w.retired) return;
  int64_t deadline = 0;
  for (int spins = 0;
       atomic_load_explicit(&readers, memory_order_seq_cst) != 0; spins++) {
    if (max_ns <= 0) return;
    if (spins == 0) deadline = cprof__mono_ns() + max_ns;
    if (spins < 100) {
      sched_yield();
    } else {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
      if (cprof__mono_ns() > deadline) return;
    }
  }
  while (w.retired) {
    cprof__cfi_index *idx = w.retired;
    w.retired = idx->next_retired;
    index_free(idx);
  }
}

/* Unpublishes the current index (replacing it by next) and retires it. */
static void publish(cprof__cfi_index *next) {
  cprof__cfi_index *old =
      atomic_exchange_explicit(&current_index, next, memory_order_seq_cst);
  if (old) {
    old->next_retired = w.retired;
    w.retired = old;
  }
}

#if defined(__x86_64__)
/* A child must not inherit the writer lock taken, nor a count of readers
 * on threads it does not have. */
static atomic_flag atfork_registered = ATOMIC_FLAG_INIT;

static void atfork_prepare(void) { lock_writer(); }

static void atfork_parent(void) { unlock_writer(); }

static void atfork_child(void) {
  atomic_store_explicit(&readers, 0, memory_order_seq_cst);
  pthread_mutex_init(&fde_cache_mu, NULL);
  spin_release_stale(&writer_lock);
}

/* Everything dl_iterate_phdr tells about one object, checked. */
typedef struct {
  image im;
  uint64_t hdr;
  bool has_hdr;
  bool large;
  uintptr_t exec_lo, exec_hi; /* exec_hi == 0: no executable segment */
  uint64_t fingerprint;
} object_desc;

/* Copies n bytes of this process's memory at addr into out, page by page:
 * through process_vm_readv, COPY_PAGES pages a call, or where that call is
 * refused (a seccomp filter), each page proved readable by a probe before
 * it is copied. Stops at the first page that cannot be read, and returns
 * the bytes copied: what can be read from addr on. Never faults. */
static size_t copy_memory(uintptr_t addr, uint8_t *out, size_t n) {
  static atomic_int refused;
  const uintptr_t page = PAGE;
  size_t done = 0;
  if (n > 0 && !atomic_load_explicit(&refused, memory_order_relaxed)) {
    /* Nearly always all of it is readable: one call for the whole. */
    struct iovec local = {out, n}, remote = {(void *)addr, n};
    long got = cprof__sys6(SYS_process_vm_readv, (long)getpid(),
                           (long)&local, 1L, (long)&remote, 1L, 0L);
    if (got == (long)n) return n;
  }
  while (done < n && !atomic_load_explicit(&refused, memory_order_relaxed)) {
    struct iovec local[COPY_PAGES], remote[COPY_PAGES];
    size_t want = 0;
    long nv = 0;
    for (uintptr_t a = addr + done; nv < COPY_PAGES && done + want < n;
         nv++) {
      size_t len = (size_t)(((a & ~(page - 1)) + page) - a);
      if (len > n - done - want) len = n - done - want;
      local[nv] = (struct iovec){out + done + want, len};
      remote[nv] = (struct iovec){(void *)a, len};
      want += len;
      a += len;
    }
    long got = cprof__sys6(SYS_process_vm_readv, (long)getpid(), (long)local,
                           nv, (long)remote, nv, 0L);
    if (got < 0 && got != -EFAULT) {
      atomic_store_explicit(&refused, 1, memory_order_relaxed);
      break;
    }
    if (got > 0) done += (size_t)got;
    if (got != (long)want) return done;
  }
  while (done < n) {
    uintptr_t a = addr + done;
    size_t len = (size_t)(((a & ~(page - 1)) + page) - a);
    if (len > n - done) len = n - done;
    if (!cprof__stack_readable(a & ~(page - 1))) break;
    memcpy(out + done, (const void *)a, len);
    done += len;
  }
  return done;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}

static void describe(const struct dl_phdr_info *info, object_desc *d) {
  memset(d, 0, sizeof *d);
  d->im.host = (uintptr_t)info->dlpi_addr;
  /* The program headers change with any relink, so a library rebuilt and
   * reloaded at the same address is not mistaken for the old one. */
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    h = fnv(h, ph, sizeof *ph);
    if (ph->p_type == PT_LOAD && ph->p_memsz > 0) {
      uint64_t lo = ph->p_vaddr, hi = lo + ph->p_memsz;
      if (hi < lo || hi > UINT32_MAX) d->large = true;
      if ((ph->p_flags & PF_R) && d->im.nsegs < MAX_SEGS) {
        d->im.segs[d->im.nsegs].lo = lo;
        d->im.segs[d->im.nsegs].hi = hi;
        d->im.nsegs++;
      }
      if (ph->p_flags & PF_X) {
        uintptr_t a = (uintptr_t)info->dlpi_addr + (uintptr_t)lo;
        uintptr_t z = a + (uintptr_t)ph->p_memsz;
        if (d->exec_hi == 0 || a < d->exec_lo) d->exec_lo = a;
        if (z > d->exec_hi) d->exec_hi = z;
      }
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      d->hdr = ph->p_vaddr;
      d->has_hdr = true;
    }
  }
  uint64_t avail;
  uint8_t head[16];
  if (d->has_hdr && img_span(&d->im, d->hdr, 1, &avail)) {
    size_t n = avail < sizeof head ? (size_t)avail : sizeof head;
    n = copy_memory(d->im.host + (uintptr_t)d->hdr, head, n);
    h = fnv(h, head, n);
  }
  d->fingerprint = h;
}

typedef struct {
  cprof__cfi_index *old;
  cfi_object **objs;
  size_t n, cap;
  bool seen;
  unsigned long long adds, subs;
  int err;
  builder b;
  uint8_t *copy; /* the unwind data of the object being built */
  size_t copy_cap;
} scan_ctx;

/* The smallest copy buffer; it grows to twice what it held at least, so
 * that a refresh maps a few at most. */
#define COPY_MIN ((size_t)64 << 10)

/* Replaces ctx->copy by a buffer of at least n bytes: a mapping whose
 * pages are all populated by the one call (MAP_POPULATE), cheaper than
 * the page faults of a fresh buffer; unmapped when the refresh ends. */
static bool grow_copy(scan_ctx *ctx, size_t n) {
  size_t cap = n < 2 * ctx->copy_cap ? 2 * ctx->copy_cap : n;
  if (cap < COPY_MIN) cap = COPY_MIN;
  cap = (cap + PAGE - 1) & ~(size_t)(PAGE - 1);
  if (ctx->copy) munmap(ctx->copy, ctx->copy_cap);
  ctx->copy = NULL;
  ctx->copy_cap = 0;
  void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return false;
  ctx->copy = p;
  ctx->copy_cap = cap;
  return true;
}

/*
 * The object's unwind data, copied out of its memory (copy_memory) into
 * ctx->copy, and *im set to parse the copy: from .eh_frame_hdr, or from
 * .eh_frame when it comes first, to the end of the segment holding the
 * later of the two (linkers put both at the end of a read-only segment,
 * so that is about all the copy holds). What cannot be read is left out:
 * records that lie in it are dropped as malformed ones are. False when not
 * even the header can be read, or memory ran out (ctx->err says which).
 */
static bool copy_unwind(scan_ctx *ctx, const object_desc *d, image *im) {
  const image *live = &d->im;
  uint64_t avail;
  uint8_t h[16];
  if (!img_span(live, d->hdr, 4, &avail)) return false;
  size_t hn = avail < sizeof h ? (size_t)avail : sizeof h;
  if (copy_memory(live->host + (uintptr_t)d->hdr, h, hn) != hn) return false;
  cursor c = {h, h + hn, (uintptr_t)h - (uintptr_t)d->hdr, false};
  uint8_t version = rd_u8(&c), eh_enc = rd_u8(&c);
  cur_skip(&c, 2);
  uint64_t eh = d->hdr;
  if (version == 1 && eh_enc != DW_EH_PE_omit) {
    uint64_t v = rd_enc(&c, eh_enc, d->hdr);
    if (!c.bad && img_span(live, v, 1, NULL)) eh = v;
  }
  uint64_t lo = eh < d->hdr ? eh : d->hdr, far = eh < d->hdr ? d->hdr : eh;
  img_span(live, far, 1, &avail);
  uint64_t n = far - lo + avail;
  if (n > MAX_UNWIND_COPY) n = MAX_UNWIND_COPY;
  if (n > ctx->copy_cap && !grow_copy(ctx, (size_t)n)) {
    ctx->err = CPROF_ENOMEM;
    return false;
  }
  size_t got = copy_memory(live->host + (uintptr_t)lo, ctx->copy, (size_t)n);
  memset(im, 0, sizeof *im);
  im->host = (uintptr_t)ctx->copy - (uintptr_t)lo;
  im->nsegs = 1;
  im->segs[0].lo = lo;
  im->segs[0].hi = lo + got;
  return got >= hn;
}

static bool has_counters(size_t size) {
  return size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                     sizeof(((struct dl_phdr_info *)0)->dlpi_subs);
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  scan_ctx *ctx = arg;
  if (has_counters(size)) {
    ctx->seen = true;
    ctx->adds = info->dlpi_adds;
    ctx->subs = info->dlpi_subs;
  }
  return 1; /* the counters are the same in every call */
}

/* The old index's object with the same identity, or NULL. */
/*
 * The loader's names of its objects are written by the thread that loaded
 * them, under the loader's lock, which dl_iterate_phdr holds while its
 * callback runs but which ThreadSanitizer cannot see (the loader is not
 * instrumented). They are read here byte by byte through volatile
 * pointers, so that the compiler makes no strlen or memcpy of the loops
 * (which the sanitizer would intercept), and uninstrumented.
 */
__attribute__((no_sanitize("thread"))) static size_t loader_strlen(
    const char *s) {
  const volatile char *v = s;
  size_t n = 0;
  while (v[n]) n++;
  return n;
}

__attribute__((no_sanitize("thread"))) static char *loader_strdup(
    const char *s) {
  size_t n = loader_strlen(s);
  char *d = cprof__malloc(n + 1);
  if (!d) return NULL;
  const volatile char *v = s;
  for (size_t i = 0; i <= n; i++) d[i] = v[i];
  return d;
}

__attribute__((no_sanitize("thread"))) static bool loader_streq(
    const char *mine, const char *theirs) {
  const volatile char *v = theirs;
  size_t i = 0;
  for (; mine[i] && mine[i] == v[i]; i++) {
  }
  return mine[i] == v[i];
}

static cfi_object *find_old(const cprof__cfi_index *old,
                            const struct dl_phdr_info *info,
                            const object_desc *d) {
  const index_entry *e = index_lookup(old, d->exec_lo);
  if (!e || e->lo != d->exec_lo) return NULL;
  cfi_object *o = old->objs[e - old->e];
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (o->base != (uintptr_t)info->dlpi_addr || o->phdr != info->dlpi_phdr ||
      o->fingerprint != d->fingerprint || o->exec_hi != d->exec_hi ||
      !loader_streq(o->name, name))
    return NULL;
  return o;
}

/* Runs with the loader's lock held, so no object can be unmapped while
 * its CFI is read. */
static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  scan_ctx *ctx = arg;
  if (!ctx->seen) counters_cb(info, size, arg);
  object_desc d;
  describe(info, &d);
  if (d.exec_hi == 0) return 0; /* no code, nothing to unwind */
  cfi_object *o = find_old(ctx->old, info, &d);
  bool fresh = !o;
  if (fresh) {
    o = cprof__calloc(1, sizeof *o);
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (!o || !(o->name = loader_strdup(name))) goto oom;
    o->base = (uintptr_t)info->dlpi_addr;
    o->phdr = info->dlpi_phdr;
    o->fingerprint = d.fingerprint;
    o->hdr = d.has_hdr ? d.hdr : 0;
    o->exec_lo = d.exec_lo;
    o->exec_hi = d.exec_hi;
    if (!d.has_hdr) {
      o->status = CPROF__CFI_OBJ_NO_EH;
    } else if (d.large) {
      o->status = CPROF__CFI_OBJ_LARGE;
    } else {
      int64_t t0 = cprof__mono_ns();
      image copy;
      int rc = copy_unwind(ctx, &d, &copy)
                   ? build(&ctx->b, &copy, d.hdr, &o->table)
                   : ctx->err ? ctx->err : CPROF_EINVAL;
      ctx->err = 0;
      o->build_ns = cprof__mono_ns() - t0;
      o->fdes_bad = ctx->b.fdes_bad;
      if (rc == CPROF_ENOMEM) goto oom;
      if (rc != 0) {
        o->status = CPROF__CFI_OBJ_BAD;
      } else if (o->table->nrows == 0) {
        o->status = CPROF__CFI_OBJ_EMPTY;
        cprof__cfi_table_free(o->table);
        o->table = NULL;
      }
    }
  }
  if (ctx->n == ctx->cap) {
    size_t cap = ctx->cap ? ctx->cap * 2 : 64;
    cfi_object **v = cprof__realloc(ctx->objs, cap * sizeof *v);
    if (!v) goto oom;
    ctx->objs = v;
    ctx->cap = cap;
  }
  ctx->objs[ctx->n++] = o;
  return 0;
oom:
  if (fresh && o) object_free(o);
  ctx->err = CPROF_ENOMEM;
  return 1;
}

/* Frees the scanned objects no index holds. */
static void drop_unlisted(scan_ctx *ctx) {
  for (size_t i = 0; i < ctx->n; i++)
    if (ctx->objs[i]->refs == 0) object_free(ctx->objs[i]);
}

/* The new index over the scanned objects, in address order; an object
 * whose span overlaps the one before it is left out, so the search stays
 * sound. */
static cprof__cfi_index *make_index(scan_ctx *ctx) {
  cfi_object **v = ctx->objs;
  for (size_t i = 1; i < ctx->n; i++) {
    cfi_object *o = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1]->exec_lo > o->exec_lo; j--) v[j] = v[j - 1];
    v[j] = o;
  }
  size_t bytes = sizeof(cprof__cfi_index) + ctx->n * sizeof(index_entry) +
                 ctx->n * sizeof(cfi_object *);
  cprof__cfi_index *idx = cprof__calloc(1, bytes);
  if (!idx) return NULL;
  idx->bytes = bytes;
  idx->objs = (cfi_object **)&idx->e[ctx->n];
  for (size_t i = 0; i < ctx->n; i++) {
    cfi_object *o = v[i];
    if (idx->n > 0 && o->exec_lo < idx->e[idx->n - 1].hi) continue;
    idx->e[idx->n] = (index_entry){o->exec_lo, o->exec_hi, o->base, o->table};
    idx->objs[idx->n] = o;
    o->refs++;
    idx->n++;
  }
  return idx;
}
#endif

uint64_t cprof__cfi_generation(void) {
  return atomic_load_explicit(&generation, memory_order_acquire);
}

#if defined(__x86_64__)
/* The refresh, with the writer lock held; grace_ns bounds the wait for
 * readers of the index it replaces. */
static int refresh_held(int64_t grace_ns) {
  w.refreshes++;
  scan_ctx ctx = {0};
  dl_iterate_phdr(counters_cb, &ctx);
  cprof__cfi_index *old =
      atomic_load_explicit(&current_index, memory_order_relaxed);
  if (old && w.seen && ctx.seen && ctx.adds == w.adds && ctx.subs == w.subs) {
    reclaim(0);
    return 0;
  }
  int64_t t0 = cprof__mono_ns();
  memset(&ctx, 0, sizeof ctx);
  ctx.old = old;
  dl_iterate_phdr(scan_cb, &ctx);
  builder_free(&ctx.b);
  if (ctx.copy) munmap(ctx.copy, ctx.copy_cap);
  cprof__cfi_index *idx = ctx.err ? NULL : make_index(&ctx);
  drop_unlisted(&ctx);
  cprof__free(ctx.objs);
  if (!idx) return CPROF_ENOMEM;
  publish(idx);
  atomic_fetch_add_explicit(&generation, 1, memory_order_release);
  w.seen = ctx.seen;
  w.adds = ctx.adds;
  w.subs = ctx.subs;
  w.rebuilds++;
  w.last_build_ns = cprof__mono_ns() - t0;
  reclaim(grace_ns);
  return 0;
}

/* 1 once the fork handlers are registered. */
static atomic_int atfork_done;
#endif

void cprof__cfi_init(void) {
#if defined(__x86_64__)
  /* Registered outside the lock: fork runs the handlers holding the
   * lock pthread_atfork takes. */
  if (!atomic_flag_test_and_set(&atfork_registered)) {
    cprof__atfork(CPROF__FORK_UNWIND, atfork_prepare, atfork_parent, atfork_child);
    atomic_store(&atfork_done, 1);
  }
#endif
}

int cprof__cfi_refresh(void) {
#if defined(__x86_64__)
  cprof__cfi_init();
  lock_writer();
  int err = refresh_held(GRACE_NS);
  unlock_writer();
  return err;
#else
  return CPROF_EUNSUPPORTED;
#endif
}

int cprof__cfi_refresh_try(void) {
#if defined(__x86_64__)
  /* pthread_atfork is not called here: this may run inside a fork
   * handler, which holds the lock pthread_atfork takes. Without the
   * handlers a fork in mid-refresh would leave the child's lock taken. */
  if (!atomic_load(&atfork_done)) return CPROF_EBUSY;
  if (!spin_trylock(&writer_lock)) return CPROF_EBUSY;
  int err = refresh_held(0);
  unlock_writer();
  return err;
#else
  return CPROF_EUNSUPPORTED;
#endif
}

void cprof__cfi_shutdown(void) {
  lock_writer();
  publish(NULL);
  reclaim(GRACE_NS);
  w.seen = false;
  unlock_writer();
}

void cprof__cfi_stats(cprof__cfi_stats_t *out) {
  memset(out, 0, sizeof *out);
  lock_writer();
  const cprof__cfi_index *idx =
      atomic_load_explicit(&current_index, memory_order_relaxed);
  for (size_t i = 0; idx && i < idx->n; i++) {
    const cfi_object *o = idx->objs[i];
    const cprof__cfi_table *t = o->table;
    out->fdes_bad += o->fdes_bad;
    out->tables_build_ns += o->build_ns;
    switch (o->status) {
      case CPROF__CFI_OBJ_OK:
        out->objects++;
        out->fdes += t->fdes;
        out->rows += t->nrows;
        out->table_bytes += t->bytes;
        out->eh_frame_bytes += t->eh_bytes;
        break;
      case CPROF__CFI_OBJ_NO_EH:
        out->skipped_no_eh++;
        break;
      case CPROF__CFI_OBJ_LARGE:
        out->skipped_large++;
        break;
      case CPROF__CFI_OBJ_EMPTY:
        out->skipped_empty++;
        break;
      default:
        out->skipped_bad++;
        break;
    }
  }
  if (idx) out->index_bytes = idx->bytes;
  out->last_build_ns = w.last_build_ns;
  out->refreshes = w.refreshes;
  out->rebuilds = w.rebuilds;
  for (const cprof__cfi_index *r = w.retired; r; r = r->next_retired)
    out->retired++;
  unlock_writer();
}

int cprof__cfi_objects(int (*fn)(const cprof__cfi_object_info *, void *),
                       void *ctx) {
  int rc = 0;
  lock_writer();
  const cprof__cfi_index *idx =
      atomic_load_explicit(&current_index, memory_order_relaxed);
  for (size_t i = 0; idx && i < idx->n && rc == 0; i++) {
    const cfi_object *o = idx->objs[i];
    const cprof__cfi_table *t = o->table;
    cprof__cfi_object_info info = {
        .name = o->name,
        .base = o->base,
        .exec_lo = o->exec_lo,
        .exec_hi = o->exec_hi,
        .status = o->status,
        .fdes = t ? t->fdes : 0,
        .fdes_bad = o->fdes_bad,
        .rows = t ? t->nrows : 0,
        .table_bytes = t ? t->bytes : 0,
        .eh_frame_bytes = t ? t->eh_bytes : 0,
        .build_ns = o->build_ns,
    };
    rc = fn(&info, ctx);
  }
  unlock_writer();
  return rc;
}
