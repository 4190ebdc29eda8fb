/*
 * The CFI tables: the buffer builder on hand-assembled CFI (the opcodes
 * and pointer encodings it claims, malformed and overlapping FDEs, the
 * linear walk without a search table, every truncation), the rows of libc,
 * of this very executable and of libstdc++, libgcc_s, ld.so and libm
 * against readelf's own interpretation (`readelf
 * --debug-dump=frames-interp`, so binutils must be installed), functions
 * whose rules are known (gcc's -O2 -fomit-frame-pointer code for a
 * function with pushes, __restore_rt, _start), whole unwinds by the tables
 * alone from a thread (down to clone3's END) and from a signal handler
 * (through __restore_rt down to _start's END), refresh (cheap when nothing
 * changed, finding a dlopened library, forgetting a dlclosed one without a
 * leak), readers racing refreshes on other threads, and fork.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "capture/cfi.h"
#include "capture/cfi_build.h"
#include "capture/cfi_index.h"
#include "capture/stack.h"
#include "testutil.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

static const char *kind_name(int k) {
  static const char *names[] = {"NONE", "RSP", "RBP", "PLT",
                                "SIGNAL", "END", "UNSUPPORTED"};
  return k >= 0 && k < (int)(sizeof names / sizeof names[0]) ? names[k]
                                                             : "?";
}

static void print_rule(const char *what, uintptr_t pc,
                       const cprof__cfi_rule *r) {
  fprintf(stderr, "  %s %#lx: %s cfa_off=%d fp_saved=%d fp_off=%d split=%d\n",
          what, (unsigned long)pc, kind_name(r->kind), r->cfa_off,
          r->fp_saved, r->fp_off, r->plt_split);
}

static cprof__cfi_rule mk(int kind, int cfa_off, int fp_saved, int fp_off) {
  cprof__cfi_rule r = {0};
  r.kind = (uint8_t)kind;
  r.cfa_off = cfa_off;
  r.fp_saved = (uint8_t)fp_saved;
  r.fp_off = fp_off;
  return r;
}

static bool same_rule(const cprof__cfi_rule *a, const cprof__cfi_rule *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

/*
 * (a) Hand-assembled CFI. The image's vaddr 0 is img[0]; .eh_frame_hdr is
 * at HDR and .eh_frame at EH.
 */

#define IMG_SIZE 0x2000
#define HDR 0x1000
#define EH 0x1100

typedef struct {
  uint8_t img[IMG_SIZE];
  size_t at;
  struct {
    uint64_t pc;
    size_t at;
  } fdes[32];
  size_t nfdes;
} asmb;

static void b8(asmb *a, unsigned v) { a->img[a->at++] = (uint8_t)v; }
static void bn(asmb *a, uint64_t v, size_t n) {
  memcpy(a->img + a->at, &v, n); /* little-endian */
  a->at += n;
}
static void uleb(asmb *a, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    b8(a, b | (v ? 0x80 : 0));
  } while (v);
}
static void sleb(asmb *a, int64_t v) {
  for (;;) {
    uint8_t b = v & 0x7f;
    v >>= 7;
    bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
    b8(a, b | (done ? 0 : 0x80));
    if (done) return;
  }
}

/* A pointer of encoding enc at the current position. */
static void enc_ptr(asmb *a, uint8_t enc, uint64_t v, bool range) {
  if (!range && (enc & 0x70) == 0x10) v -= a->at;
  if (!range && (enc & 0x70) == 0x30) v -= HDR;
  switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: bn(a, v, 8); break;
    case 0x01: uleb(a, v); break;
    case 0x02: case 0x0a: bn(a, v, 2); break;
    case 0x03: case 0x0b: bn(a, v, 4); break;
    case 0x09: sleb(a, (int64_t)v); break;
  }
}

static size_t rec_begin(asmb *a, bool len64) {
  size_t at = a->at;
  bn(a, len64 ? 0xffffffffu : 0, 4);
  if (len64) bn(a, 0, 8);
  return at;
}

static void rec_end(asmb *a, size_t at) {
  while ((a->at - at) % 4) b8(a, 0); /* DW_CFA_nop */
  uint32_t l32;
  memcpy(&l32, a->img + at, 4);
  if (l32 == 0xffffffffu) {
    uint64_t len = a->at - at - 12;
    memcpy(a->img + at + 4, &len, 8);
  } else {
    uint32_t len = (uint32_t)(a->at - at - 4);
    memcpy(a->img + at, &len, 4);
  }
}

/* A CIE with x86-64's usual initial rules (CFA = rsp + 8, RA at CFA-8). */
static size_t cie(asmb *a, int version, const char *aug, uint8_t fde_enc) {
  size_t at = rec_begin(a, false);
  bn(a, 0, 4);
  b8(a, (unsigned)version);
  for (const char *s = aug;; s++) {
    b8(a, (uint8_t)*s);
    if (!*s) break;
  }
  uleb(a, 1);
  sleb(a, -8);
  if (version == 1) {
    b8(a, 16);
  } else {
    uleb(a, 16);
  }
  if (aug[0] == 'z') {
    size_t len_at = a->at++;
    for (const char *s = aug + 1; *s; s++) {
      if (*s == 'R') b8(a, fde_enc);
      if (*s == 'L') b8(a, 0x1b);
      if (*s == 'P') {
        b8(a, 0x9b); /* indirect pcrel sdata4 */
        enc_ptr(a, 0x1b, 0x1ff0, false);
      }
    }
    a->img[len_at] = (uint8_t)(a->at - len_at - 1);
  }
  b8(a, 0x0c), b8(a, 7), b8(a, 8);   /* def_cfa rsp 8 */
  b8(a, 0x80 | 16), b8(a, 1);        /* offset ra at cfa-8 */
  rec_end(a, at);
  return at;
}

/* Starts an FDE of [pc, pc + len); zaug: the CIE has 'z', lsda: and 'L'. */
static size_t fde(asmb *a, size_t cie_at, uint8_t enc, uint64_t pc,
                  uint64_t len, bool zaug, bool lsda, bool len64) {
  size_t at = rec_begin(a, len64);
  bn(a, (uint32_t)(a->at - cie_at), 4);
  enc_ptr(a, enc, pc, false);
  enc_ptr(a, enc, len, true);
  if (zaug) {
    uleb(a, lsda ? 4 : 0);
    if (lsda) bn(a, 0, 4);
  }
  a->fdes[a->nfdes].pc = pc;
  a->fdes[a->nfdes].at = at;
  a->nfdes++;
  return at;
}

/* Writes .eh_frame_hdr: with a search table, or (table == false) with
 * only the .eh_frame pointer, so the builder walks .eh_frame. */
static void hdr(asmb *a, bool table) {
  size_t save = a->at;
  a->at = HDR;
  b8(a, 1);
  b8(a, 0x1b);
  b8(a, table ? 0x03 : 0xff);
  b8(a, table ? 0x3b : 0xff);
  enc_ptr(a, 0x1b, EH, false);
  if (table) {
    bn(a, a->nfdes, 4);
    /* Sorted by pc, as ld writes it. */
    size_t order[32];
    for (size_t i = 0; i < a->nfdes; i++) order[i] = i;
    for (size_t i = 1; i < a->nfdes; i++)
      for (size_t j = i;
           j > 0 && a->fdes[order[j - 1]].pc > a->fdes[order[j]].pc; j--) {
        size_t t = order[j];
        order[j] = order[j - 1];
        order[j - 1] = t;
      }
    for (size_t i = 0; i < a->nfdes; i++) {
      bn(a, (uint32_t)(a->fdes[order[i]].pc - HDR), 4);
      bn(a, (uint32_t)(a->fdes[order[i]].at - HDR), 4);
    }
  }
  a->at = save;
}

static const uint8_t plt_expr[] = {0x0f, 11,   0x77, 8,    0x80, 0x00, 0x3f,
                                   0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};

/* The image every builder test starts from, and the rows it must give. */
static void assemble(asmb *a) {
  memset(a, 0, sizeof *a);
  a->at = EH;
  size_t c0 = cie(a, 1, "zR", 0x1b);
  size_t f;

  /* A frame set up with rbp, torn down in one step. */
  f = fde(a, c0, 0x1b, 0x100, 0x40, true, false, false);
  b8(a, 0x41), b8(a, 0x0e), b8(a, 16), b8(a, 0x86), b8(a, 2);
  b8(a, 0x43), b8(a, 0x0d), b8(a, 6);
  b8(a, 0x02), b8(a, 0x30), b8(a, 0x0c), b8(a, 7), b8(a, 8), b8(a, 0xc6);
  rec_end(a, f);

  /* Right after it: remember/restore and the other operand forms. */
  f = fde(a, c0, 0x1b, 0x140, 0x40, true, false, false);
  b8(a, 0x44), b8(a, 0x0e), b8(a, 32);
  b8(a, 0x0a), b8(a, 0x44), b8(a, 0x0e), b8(a, 8);
  b8(a, 0x44), b8(a, 0x0b);
  b8(a, 0x03), bn(a, 0x10, 2), b8(a, 0x12), b8(a, 7), sleb(a, -3);
  b8(a, 0x04), bn(a, 4, 4), b8(a, 0x13), sleb(a, -2);
  b8(a, 0x42), b8(a, 0x11), b8(a, 6), sleb(a, 2);
  b8(a, 0x2e), uleb(a, 16), b8(a, 0x00);
  b8(a, 0x42), b8(a, 0x08), b8(a, 6);
  b8(a, 0x42), b8(a, 0x2f), b8(a, 6), uleb(a, 3);
  b8(a, 0x42), b8(a, 0x05), b8(a, 6), uleb(a, 4);
  b8(a, 0x42), b8(a, 0x06), b8(a, 6), b8(a, 0x0c), b8(a, 7), b8(a, 8);
  b8(a, 0x01), enc_ptr(a, 0x1b, 0x170, false), b8(a, 0x09), b8(a, 6), b8(a, 3);
  b8(a, 0x44), b8(a, 0x08), b8(a, 6), b8(a, 0x10), b8(a, 3), b8(a, 2),
      b8(a, 0x77), b8(a, 0);
  b8(a, 0x44), b8(a, 0x10), b8(a, 6), b8(a, 2), b8(a, 0x77), b8(a, 0);
  rec_end(a, f);

  /* The PLT. */
  f = fde(a, c0, 0x1b, 0x200, 0x30, true, false, false);
  b8(a, 0x0e), b8(a, 16), b8(a, 0x46), b8(a, 0x0e), b8(a, 24), b8(a, 0x4a);
  for (size_t i = 0; i < sizeof plt_expr; i++) b8(a, plt_expr[i]);
  rec_end(a, f);

  /* An outermost frame, then a signal frame right after it. */
  f = fde(a, c0, 0x1b, 0x300, 0x10, true, false, false);
  b8(a, 0x07), b8(a, 16);
  rec_end(a, f);
  size_t cs = cie(a, 1, "zRS", 0x1b);
  f = fde(a, cs, 0x1b, 0x310, 0x8, true, false, false);
  rec_end(a, f);

  /* Rules no row can express, and one it can again. */
  f = fde(a, c0, 0x1b, 0x400, 0x20, true, false, false);
  b8(a, 0x0c), b8(a, 3), b8(a, 16);
  b8(a, 0x44), b8(a, 0x0c), b8(a, 6), b8(a, 16);
  b8(a, 0x44), b8(a, 0x0f), b8(a, 3), b8(a, 0x77), b8(a, 8), b8(a, 0x06);
  b8(a, 0x44), b8(a, 0x90), b8(a, 2), b8(a, 0x0c), b8(a, 7), b8(a, 8);
  b8(a, 0x44), b8(a, 0x90), b8(a, 1);
  rec_end(a, f);

  /* Malformed (an unknown opcode): dropped whole. */
  f = fde(a, c0, 0x1b, 0x500, 0x20, true, false, false);
  b8(a, 0x44), b8(a, 0x0e), b8(a, 16), b8(a, 0x44), b8(a, 0x20);
  rec_end(a, f);

  /* Overlaps: the second is clipped, the third lies inside the first. */
  f = fde(a, c0, 0x1b, 0x600, 0x40, true, false, false);
  b8(a, 0x50), b8(a, 0x0e), b8(a, 16);
  rec_end(a, f);
  f = fde(a, c0, 0x1b, 0x620, 0x40, true, false, false);
  b8(a, 0x0e), b8(a, 24), b8(a, 0x02), b8(a, 0x30), b8(a, 0x0e), b8(a, 32);
  rec_end(a, f);
  f = fde(a, c0, 0x1b, 0x610, 0x8, true, false, false);
  b8(a, 0x0e), b8(a, 64);
  rec_end(a, f);

  /* A 64-bit length. */
  f = fde(a, c0, 0x1b, 0x700, 0x10, true, false, true);
  b8(a, 0x0e), b8(a, 16);
  rec_end(a, f);

  /* Personality and LSDA. */
  size_t cp = cie(a, 1, "zPLR", 0x1b);
  f = fde(a, cp, 0x1b, 0x800, 0x10, true, true, false);
  b8(a, 0x41), b8(a, 0x0e), b8(a, 16);
  rec_end(a, f);

  /* Every other pointer encoding, version 3 and a CIE without 'z'. */
  static const struct {
    uint8_t enc;
    int version;
  } encs[] = {{0x04, 1}, {0x3c, 1}, {0x01, 3}, {0x1a, 1},
              {0x19, 3}, {0x02, 1}, {0x0b, 3}, {0x1c, 1}};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(encs); i++) {
    size_t ce = cie(a, encs[i].version, "zR", encs[i].enc);
    f = fde(a, ce, encs[i].enc, 0x900 + 8 * i, 8, true, false, false);
    b8(a, 0x0e), b8(a, (unsigned)(16 + 8 * i));
    rec_end(a, f);
  }
  size_t cn = cie(a, 1, "", 0);
  f = fde(a, cn, 0x00, 0xa00, 8, false, false, false);
  b8(a, 0x0e), b8(a, 16);
  rec_end(a, f);

  bn(a, 0, 4); /* the terminator */
}

typedef struct {
  uint32_t pc;
  cprof__cfi_rule r;
} want_row;

static const want_row *expected_rows(size_t *n) {
  static want_row rows[64];
  size_t i = 0;
#define ROW(p, k, off, fs, fo) \
  rows[i].pc = (p), rows[i].r = mk(CPROF__CFI_##k, off, fs, fo), i++
  ROW(0x100, RSP, 8, 0, 0);
  ROW(0x101, RSP, 16, 1, -16);
  ROW(0x104, RBP, 16, 1, -16);
  ROW(0x134, RSP, 8, 0, 0); /* and the next FDE's first row merges in */
  ROW(0x144, RSP, 32, 0, 0);
  ROW(0x148, RSP, 8, 0, 0);
  ROW(0x14c, RSP, 32, 0, 0);
  ROW(0x15c, RSP, 24, 0, 0);
  ROW(0x160, RSP, 16, 0, 0);
  ROW(0x162, RSP, 16, 1, -16);
  ROW(0x164, RSP, 16, 0, 0);
  ROW(0x166, RSP, 16, 1, 24);
  ROW(0x168, RSP, 16, 1, -32);
  ROW(0x16a, RSP, 8, 0, 0);
  ROW(0x170, UNSUPPORTED, 0, 0, 0);
  ROW(0x174, RSP, 8, 0, 0);
  ROW(0x178, UNSUPPORTED, 0, 0, 0);
  ROW(0x180, NONE, 0, 0, 0);
  ROW(0x200, RSP, 16, 0, 0);
  ROW(0x206, RSP, 24, 0, 0);
  ROW(0x210, PLT, 8, 0, 0);
  rows[i - 1].r.plt_split = 11;
  ROW(0x230, NONE, 0, 0, 0);
  ROW(0x300, END, 0, 0, 0);
  ROW(0x310, SIGNAL, 0, 0, 0);
  ROW(0x318, NONE, 0, 0, 0);
  ROW(0x400, UNSUPPORTED, 0, 0, 0);
  ROW(0x404, RBP, 16, 0, 0);
  ROW(0x408, UNSUPPORTED, 0, 0, 0);
  ROW(0x410, RSP, 8, 0, 0);
  ROW(0x420, NONE, 0, 0, 0);
  ROW(0x600, RSP, 8, 0, 0);
  ROW(0x610, RSP, 16, 0, 0);
  ROW(0x640, RSP, 24, 0, 0);
  ROW(0x650, RSP, 32, 0, 0);
  ROW(0x660, NONE, 0, 0, 0);
  ROW(0x700, RSP, 16, 0, 0);
  ROW(0x710, NONE, 0, 0, 0);
  ROW(0x800, RSP, 8, 0, 0);
  ROW(0x801, RSP, 16, 0, 0);
  ROW(0x810, NONE, 0, 0, 0);
  for (int e = 0; e < 8; e++) ROW(0x900 + 8 * e, RSP, 16 + 8 * e, 0, 0);
  ROW(0x940, NONE, 0, 0, 0);
  ROW(0xa00, RSP, 16, 0, 0);
  ROW(0xa08, NONE, 0, 0, 0);
#undef ROW
  *n = i;
  return rows;
}

static void check_rows(const cprof__cfi_table *t, const char *what) {
  size_t n;
  const want_row *want = expected_rows(&n);
  size_t got = cprof__cfi_table_rows(t);
  if (got != n) fprintf(stderr, "%s: %zu rows, want %zu\n", what, got, n);
  CHECK_EQ_INT(got, n);
  for (size_t i = 0; i < n; i++) {
    uint32_t pc;
    cprof__cfi_rule r;
    bool ok = cprof__cfi_table_row(t, i, &pc, &r) && pc == want[i].pc &&
              same_rule(&r, &want[i].r);
    if (!ok) {
      fprintf(stderr, "%s: row %zu\n", what, i);
      print_rule("got ", pc, &r);
      print_rule("want", want[i].pc, &want[i].r);
    }
    CHECK(ok);
    /* The rule holds from its pc to just before the next row. */
    uint32_t last = i + 1 < n ? want[i + 1].pc - 1 : want[i].pc + 100;
    cprof__cfi_rule f1, f2;
    bool in1 = cprof__cfi_table_find(t, want[i].pc, &f1);
    bool in2 = cprof__cfi_table_find(t, last, &f2);
    CHECK(same_rule(&f1, &want[i].r) && same_rule(&f2, &want[i].r));
    CHECK(in1 == (want[i].r.kind != CPROF__CFI_NONE) && in2 == in1);
  }
  cprof__cfi_rule r;
  CHECK(!cprof__cfi_table_find(t, 0x50, &r) && r.kind == CPROF__CFI_NONE);
  CHECK(!cprof__cfi_table_find(t, 0x500, &r)); /* the malformed FDE */
  CHECK(!cprof__cfi_table_find(t, (uintptr_t)1 << 33, &r));
}

static void test_builder(void) {
  static asmb a;
  cprof__cfi_table *t = NULL;
  assemble(&a);
  hdr(&a, true);
  CHECK_EQ_INT(cprof__cfi_table_build(a.img, sizeof a.img, HDR, &t), 0);
  if (t) check_rows(t, "search table");
  CHECK(cprof__cfi_table_bytes(t) < 1024);
  cprof__cfi_table_free(t);

  /* Without the search table, the walk of .eh_frame finds the same. */
  hdr(&a, false);
  t = NULL;
  CHECK_EQ_INT(cprof__cfi_table_build(a.img, sizeof a.img, HDR, &t), 0);
  if (t) check_rows(t, "linear walk");
  cprof__cfi_table_free(t);

  /* Bad headers and bounds: refused, never read past the buffer. */
  hdr(&a, true);
  CHECK_EQ_INT(cprof__cfi_table_build(a.img, sizeof a.img, sizeof a.img, &t),
               CPROF_EINVAL);
  CHECK(t == NULL);
  a.img[HDR] = 2;
  CHECK_EQ_INT(cprof__cfi_table_build(a.img, sizeof a.img, HDR, &t),
               CPROF_EINVAL);
  a.img[HDR] = 1;
  /* Every truncation of the image (the CFI cut anywhere) still builds
   * without reading past the end (ASan checks the copy's bounds). */
  for (size_t len = HDR + 1; len <= a.at; len += 7) {
    uint8_t *copy = malloc(len);
    memcpy(copy, a.img, len);
    t = NULL;
    int rc = cprof__cfi_table_build(copy, len, HDR, &t);
    CHECK(rc == 0 || rc == CPROF_EINVAL);
    if (t) {
      uint32_t pc, prev = 0;
      cprof__cfi_rule r;
      for (size_t i = 0; cprof__cfi_table_row(t, i, &pc, &r); prev = pc, i++)
        CHECK(i == 0 || pc > prev);
    }
    cprof__cfi_table_free(t);
    free(copy);
  }
}

#if defined(__x86_64__)
/*
 * (b) readelf's interpretation of a whole object against its table.
 */

typedef struct {
  char cfa[24], rbp[24], rsp[24], ra[24];
  uint64_t loc;
} oracle_row;

typedef struct {
  uint64_t lo, hi;
  bool signal;
  size_t first, n; /* rows */
  bool overlaps;
} oracle_fde;

typedef struct {
  oracle_row *rows;
  size_t nrows, rows_cap;
  oracle_fde *fdes;
  size_t nfdes, fdes_cap;
} oracle;

typedef struct {
  uint64_t off;
  bool signal;
  oracle_row init; /* the CIE's own row */
} oracle_cie;

static void *grow_array(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  *cap = *cap ? *cap * 2 : 1024;
  if (*cap < need) *cap = need;
  p = realloc(p, *cap * elem);
  if (!p) abort();
  return p;
}

/* Parses one row line under the column names in cols. */
static void parse_row(char *line, char cols[][16], size_t ncols,
                      oracle_row *r) {
  memset(r, 0, sizeof *r);
  strcpy(r->rbp, "u");
  strcpy(r->rsp, "u");
  strcpy(r->ra, "absent");
  /* A register rule reads "r10 (r10)": join it into one token. */
  for (char *q; (q = strstr(line, " ("));) memmove(q, q + 1, strlen(q));
  char *save = NULL, *tok = strtok_r(line, " \t\n", &save);
  r->loc = strtoull(tok ? tok : "0", NULL, 16);
  for (size_t i = 0; i < ncols; i++) {
    tok = strtok_r(NULL, " \t\n", &save);
    if (!tok) break;
    char *dst = !strcmp(cols[i], "CFA")   ? r->cfa
                : !strcmp(cols[i], "rbp") ? r->rbp
                : !strcmp(cols[i], "rsp") ? r->rsp
                : !strcmp(cols[i], "ra")  ? r->ra
                                          : NULL;
    if (dst) snprintf(dst, sizeof r->cfa, "%s", tok);
  }
}

/* Reads `readelf --debug-dump=frames-interp` of path (.eh_frame only). */
static bool oracle_load(const char *path, oracle *o) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd,
           "readelf --debug-dump=frames-interp -W '%s' 2>/dev/null", path);
  FILE *f = popen(cmd, "r");
  if (!f) return false;
  memset(o, 0, sizeof *o);
  static oracle_cie cies[256];
  size_t ncies = 0;
  char line[4096], cols[64][16];
  size_t ncols = 0;
  bool in_eh = false;
  oracle_cie *cur_cie = NULL;
  oracle_fde *cur = NULL;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "Contents of the ", 16)) {
      /* Only the object's own .eh_frame, the first one shown. */
      in_eh = o->nfdes == 0 && strstr(line, ".eh_frame section") != NULL;
      cur = NULL;
      cur_cie = NULL;
      continue;
    }
    if (!in_eh) continue;
    unsigned long long off, len, id, lo, hi, cieoff;
    const char *aug = strstr(line, " CIE \"");
    if (aug && sscanf(line, "%llx %llx %llx", &off, &len, &id) == 3) {
      const char *end = strchr(aug + 6, '"');
      cur = NULL;
      cur_cie = ncies < 256 ? &cies[ncies++] : NULL;
      if (cur_cie) {
        memset(cur_cie, 0, sizeof *cur_cie);
        cur_cie->off = off;
        cur_cie->signal = end && memchr(aug + 6, 'S', (size_t)(end - aug - 6));
      }
      continue;
    }
    if (sscanf(line, "%llx %llx %llx FDE cie=%llx pc=%llx..%llx", &off, &len,
               &id, &cieoff, &lo, &hi) == 6) {
      cur_cie = NULL;
      o->fdes = grow_array(o->fdes, &o->fdes_cap, o->nfdes + 1,
                           sizeof *o->fdes);
      cur = &o->fdes[o->nfdes++];
      memset(cur, 0, sizeof *cur);
      cur->lo = lo;
      cur->hi = hi;
      cur->first = o->nrows;
      const oracle_cie *c = NULL;
      for (size_t i = 0; i < ncies; i++)
        if (cies[i].off == cieoff) c = &cies[i];
      if (c) {
        cur->signal = c->signal;
        /* An FDE without instructions has no table: the CIE's row. */
        o->rows = grow_array(o->rows, &o->rows_cap, o->nrows + 1,
                             sizeof *o->rows);
        o->rows[o->nrows] = c->init;
        o->rows[o->nrows].loc = lo;
      }
      continue;
    }
    if (!strncmp(line, "   LOC", 6)) {
      ncols = 0;
      char *save = NULL, *tok = strtok_r(line + 6, " \t\n", &save);
      for (; tok && ncols < 64; tok = strtok_r(NULL, " \t\n", &save))
        snprintf(cols[ncols++], sizeof cols[0], "%s", tok);
      continue;
    }
    if (line[0] >= '0' && line[0] <= '9' && strlen(line) > 17 &&
        line[16] == ' ') {
      oracle_row r;
      parse_row(line, cols, ncols, &r);
      if (cur_cie) {
        cur_cie->init = r;
      } else if (cur) {
        o->rows = grow_array(o->rows, &o->rows_cap, o->nrows + 1,
                             sizeof *o->rows);
        o->rows[o->nrows++] = r;
        cur->n++;
      }
    }
  }
  /* readelf exits with 1 when a separate debug file it follows has no
   * .eh_frame contents, after printing the object's own. */
  pclose(f);
  /* Mark FDEs whose range another FDE shares: which one a pc gets is
   * then a choice, not a fact to check. */
  for (size_t i = 0; i < o->nfdes; i++)
    for (size_t j = 0; j < o->nfdes; j++)
      if (i != j && o->fdes[i].lo < o->fdes[j].hi &&
          o->fdes[j].lo < o->fdes[i].hi && o->fdes[i].lo < o->fdes[i].hi &&
          o->fdes[j].lo < o->fdes[j].hi)
        o->fdes[i].overlaps = true;
  return o->nfdes > 0;
}

static void oracle_free(oracle *o) {
  free(o->rows);
  free(o->fdes);
}

static bool parse_off(const char *s, const char *prefix, int *off) {
  size_t n = strlen(prefix);
  if (strncmp(s, prefix, n) != 0) return false;
  char *end;
  long v = strtol(s + n, &end, 10);
  if (*end) return false;
  *off = (int)v;
  return true;
}

/* Whether a readelf register column says rbp is saved, and where; false
 * when no row can say it. */
static bool expect_fp(const char *col, cprof__cfi_rule *r) {
  int off;
  if (!strcmp(col, "u") || !strcmp(col, "s")) return true;
  if (!parse_off(col, "c", &off)) return false;
  r->fp_saved = 1;
  r->fp_off = off;
  return true;
}

/* What a readelf row says our rule must be, in to_rule()'s order. When
 * the CFA is an expression, *plt gets the rule a PLT match must have, and
 * UNSUPPORTED passes too. */
static cprof__cfi_rule expect(const oracle_fde *f, const oracle_row *r,
                              bool *exp, cprof__cfi_rule *plt) {
  cprof__cfi_rule want = {0};
  int off;
  *exp = false;
  if (f->signal) return mk(CPROF__CFI_SIGNAL, 0, 0, 0);
  if (!strcmp(r->ra, "u")) return mk(CPROF__CFI_END, 0, 0, 0);
  if (strcmp(r->ra, "c-8") != 0) goto unsupported;
  if (strcmp(r->rsp, "u") != 0) goto unsupported;
  if (!strcmp(r->cfa, "exp")) {
    *exp = true;
    *plt = mk(CPROF__CFI_PLT, 0, 0, 0);
    if (!expect_fp(r->rbp, plt)) plt->kind = CPROF__CFI_UNSUPPORTED;
    goto unsupported;
  }
  if (parse_off(r->cfa, "rsp+", &off)) {
    want = mk(CPROF__CFI_RSP, off, 0, 0);
  } else if (parse_off(r->cfa, "rbp+", &off)) {
    want = mk(CPROF__CFI_RBP, off, 0, 0);
  } else {
    goto unsupported;
  }
  if (expect_fp(r->rbp, &want)) return want;
unsupported:
  return mk(CPROF__CFI_UNSUPPORTED, 0, 0, 0);
}

typedef struct {
  size_t checked, mismatches, exp_plt, exp_unsupported, skipped_overlap;
  size_t kinds[8];
} compare_counts;

static void compare_pc(const cprof__cfi_index *idx, uintptr_t base,
                       const oracle_fde *f, const oracle_row *r, uint64_t pc,
                       compare_counts *cc) {
  bool exp;
  cprof__cfi_rule plt, want = expect(f, r, &exp, &plt), got;
  bool found = cprof__cfi_find(idx, base + pc, &got);
  bool ok;
  if (exp) {
    /* readelf does not show the expression: any PLT rule's own offsets
     * pass, as long as rbp agrees. */
    ok = found && (got.kind == CPROF__CFI_UNSUPPORTED ||
                   (got.kind == CPROF__CFI_PLT &&
                    plt.kind == CPROF__CFI_PLT &&
                    got.fp_saved == plt.fp_saved && got.fp_off == plt.fp_off));
    if (ok && got.kind == CPROF__CFI_PLT) cc->exp_plt++;
    if (ok && got.kind == CPROF__CFI_UNSUPPORTED) cc->exp_unsupported++;
  } else {
    ok = found && same_rule(&got, &want);
  }
  cc->checked++;
  if (found && got.kind < 8) cc->kinds[got.kind]++;
  if (!ok) {
    if (cc->mismatches++ < 10) {
      fprintf(stderr, "  mismatch at vaddr %#llx (FDE %#llx..%#llx): readelf "
              "cfa=%s rbp=%s rsp=%s ra=%s\n", (unsigned long long)pc,
              (unsigned long long)f->lo, (unsigned long long)f->hi, r->cfa,
              r->rbp, r->rsp, r->ra);
      print_rule("got ", base + pc, &got);
    }
  }
}

/* Every row's first and last pc, and one inside it. */
static void compare_object(const char *path, uintptr_t base,
                           const char *what, size_t min_checked) {
  oracle o;
  if (!oracle_load(path, &o)) {
    fprintf(stderr, "%s: readelf gave nothing for %s\n", what, path);
    CHECK(0);
    oracle_free(&o);
    return;
  }
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  CHECK(idx != NULL);
  compare_counts cc = {0};
  size_t ends = 0;
  for (size_t i = 0; i < o.nfdes; i++) {
    const oracle_fde *f = &o.fdes[i];
    if (f->lo >= f->hi) continue;
    if (f->overlaps) {
      cc.skipped_overlap++;
      continue;
    }
    for (size_t k = 0; k < f->n; k++) {
      const oracle_row *r = &o.rows[f->first + k];
      uint64_t lo = r->loc;
      uint64_t hi = k + 1 < f->n ? o.rows[f->first + k + 1].loc : f->hi;
      if (lo >= hi) continue; /* readelf prints rows a set_loc skipped */
      compare_pc(idx, base, f, r, lo, &cc);
      compare_pc(idx, base, f, r, lo + (hi - lo) / 2, &cc);
      compare_pc(idx, base, f, r, hi - 1, &cc);
    }
    /* No FDE starts where this one ends: the rule there is NONE. */
    bool next = false;
    for (size_t j = 0; j < o.nfdes && !next; j++)
      next = o.fdes[j].lo <= f->hi && f->hi < o.fdes[j].hi;
    cprof__cfi_rule r;
    if (!next && ends++ < 2000) {
      bool found = cprof__cfi_find(idx, base + f->hi, &r);
      if (found && r.kind != CPROF__CFI_NONE) {
        fprintf(stderr, "  %s: no NONE at the end %#llx of an FDE\n", what,
                (unsigned long long)f->hi);
        cc.mismatches++;
      }
    }
  }
  cprof__cfi_read_end(idx);
  fprintf(stderr,
          "%s: %zu FDEs, %zu pcs checked, %zu mismatches; readelf \"exp\": "
          "%zu PLT, %zu UNSUPPORTED; %zu overlapping FDEs skipped; rows by "
          "kind: RSP %zu RBP %zu PLT %zu SIGNAL %zu END %zu UNSUPPORTED %zu\n",
          what, o.nfdes, cc.checked, cc.mismatches, cc.exp_plt,
          cc.exp_unsupported, cc.skipped_overlap, cc.kinds[1], cc.kinds[2],
          cc.kinds[3], cc.kinds[4], cc.kinds[5], cc.kinds[6]);
  CHECK(cc.checked >= min_checked);
  CHECK_EQ_INT(cc.mismatches, 0);
  oracle_free(&o);
}

typedef struct {
  const char *want; /* a substring of dlpi_name, or "" for the program */
  uintptr_t base;
  char path[4096];
  bool found;
} find_obj;

static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_obj *f = arg;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (f->found) return 0;
  if (f->want[0] ? strstr(name, f->want) != NULL : name[0] == 0) {
    f->found = true;
    f->base = (uintptr_t)info->dlpi_addr;
    snprintf(f->path, sizeof f->path, "%s", name);
  }
  return 0;
}

static void test_oracle(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  find_obj libc = {.want = "libc.so.6"};
  dl_iterate_phdr(find_obj_cb, &libc);
  CHECK(libc.found);
  if (libc.found) compare_object(libc.path, libc.base, "libc.so.6", 3000);
  find_obj self = {.want = ""};
  dl_iterate_phdr(find_obj_cb, &self);
  CHECK(self.found);
  ssize_t n = readlink("/proc/self/exe", self.path, sizeof self.path - 1);
  CHECK(n > 0);
  if (self.found && n > 0) {
    self.path[n] = 0;
    compare_object(self.path, self.base, "test executable", 100);
  }
  /* And whatever else is loaded by now (test_refresh loaded libstdc++):
   * C++ personalities and LSDAs, the loader's hand-written assembly. */
  static const char *more[] = {"libstdc++.so.6", "libgcc_s.so.1",
                               "ld-linux-x86-64.so.2", "libm.so.6"};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(more); i++) {
    find_obj o = {.want = more[i]};
    dl_iterate_phdr(find_obj_cb, &o);
    if (o.found) compare_object(o.path, o.base, more[i], 100);
  }
}

/* The row of off in t by bisection over its rows alone, without the page
 * index: the last row at or below off, or -1. */
static long row_of(const cprof__cfi_table *t, uint32_t off) {
  size_t lo = 0, hi = cprof__cfi_table_rows(t);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t pc;
    cprof__cfi_rule r;
    cprof__cfi_table_row(t, mid, &pc, &r);
    if (pc <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (long)lo - 1;
}

/* off's rule by the lookup (through the page index) is the one of its
 * row; counts the offsets checked and those that differ. */
static void check_page_lookup(const cprof__cfi_table *t, uint32_t off,
                              size_t *checked, size_t *wrong) {
  cprof__cfi_rule got, want;
  memset(&want, 0, sizeof want);
  long i = row_of(t, off);
  uint32_t pc;
  if (i >= 0) cprof__cfi_table_row(t, (size_t)i, &pc, &want);
  bool found = cprof__cfi_table_find(t, off, &got);
  (*checked)++;
  if (!same_rule(&got, &want) || found != (want.kind != CPROF__CFI_NONE))
    (*wrong)++;
}

typedef struct {
  size_t tables, indexed, checked, wrong;
  bool libc_indexed;
} page_check;

static int page_index_cb(const cprof__cfi_object_info *info, void *arg) {
  page_check *c = arg;
  const cprof__cfi_table *t = info->table;
  size_t n = cprof__cfi_table_rows(t);
  if (!t || n < 2) return 0;
  c->tables++;
  if (t->npages) c->indexed++;
  if (t->npages && strstr(info->name, "libc.so.6")) c->libc_indexed = true;
  uint32_t pc;
  cprof__cfi_rule r;
  uint32_t last = 0;
  for (size_t i = 0; i < n; i++) {
    cprof__cfi_table_row(t, i, &pc, &r);
    check_page_lookup(t, pc, &c->checked, &c->wrong);
    if (pc) check_page_lookup(t, pc - 1, &c->checked, &c->wrong);
    /* Page starts between this row and the one before it, and the
     * offsets next to them. */
    for (uint32_t p = (last | 4095u) + 1; i > 0 && p > last && p < pc;
         p += 4096) {
      check_page_lookup(t, p, &c->checked, &c->wrong);
      check_page_lookup(t, p - 1, &c->checked, &c->wrong);
    }
    last = pc;
  }
  check_page_lookup(t, last + 4096, &c->checked, &c->wrong);
  return 0;
}

/* Every loaded object's table, looked up through its page index at each
 * row, the offset before it and each page start, finds what a bisection
 * over its rows finds; libc's has an index. */
static void test_page_index(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  page_check c = {0};
  cprof__cfi_objects(page_index_cb, &c);
  fprintf(stderr, "  %zu tables, %zu with a page index, %zu lookups\n",
          c.tables, c.indexed, c.checked);
  CHECK(c.tables >= 2);
  CHECK(c.libc_indexed);
  CHECK(c.checked > 10000);
  CHECK_EQ_INT(c.wrong, 0);
}

/*
 * (c) Functions whose rules are known.
 */

/* What gcc 12 -O2 -fomit-frame-pointer makes of
 *   long cfi_omit_fp(long (*cb)(long), long x) {
 *     long a = cb(x); long b = cb(a ^ x); return a * 3 + b + x; }
 * kept as assembly so that both compilers test the same code: it pushes
 * three registers and uses rbp as a plain register. The labels mark where
 * each push and pop ends. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cfi_omit_fp\n"
        ".hidden cfi_omit_fp\n"
        ".type cfi_omit_fp, @function\n"
        "cfi_omit_fp:\n"
        ".cfi_startproc\n"
        "pushq %r12\n"
        "cfi_ofp_push1:\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 12, -16\n"
        "movq %rdi, %r12\n"
        "movq %rsi, %rdi\n"
        "pushq %rbp\n"
        "cfi_ofp_push2:\n"
        ".cfi_def_cfa_offset 24\n"
        ".cfi_offset 6, -24\n"
        "pushq %rbx\n"
        "cfi_ofp_push3:\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 3, -32\n"
        "movq %rsi, %rbx\n"
        "call *%r12\n"
        "movq %rbx, %rdi\n"
        "movq %rax, %rbp\n"
        "xorq %rax, %rdi\n"
        "call *%r12\n"
        "movq %rax, %rdx\n"
        "leaq 0(%rbp,%rbp,2), %rax\n"
        "addq %rdx, %rax\n"
        "addq %rbx, %rax\n"
        "popq %rbx\n"
        "cfi_ofp_pop1:\n"
        ".cfi_def_cfa_offset 24\n"
        "popq %rbp\n"
        "cfi_ofp_pop2:\n"
        ".cfi_def_cfa_offset 16\n"
        "popq %r12\n"
        "cfi_ofp_pop3:\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size cfi_omit_fp, .-cfi_omit_fp\n");
#define HIDDEN_SYM __attribute__((visibility("hidden")))
HIDDEN_SYM long cfi_omit_fp(long (*cb)(long), long x);
HIDDEN_SYM extern const char cfi_ofp_push1[], cfi_ofp_push2[], cfi_ofp_push3[],
    cfi_ofp_pop1[], cfi_ofp_pop2[], cfi_ofp_pop3[];

static void check_at(uintptr_t pc, cprof__cfi_rule want, const char *what) {
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  cprof__cfi_rule got;
  bool found = cprof__cfi_find(idx, pc, &got);
  cprof__cfi_read_end(idx);
  if (!found || !same_rule(&got, &want)) {
    fprintf(stderr, "%s:\n", what);
    print_rule("got ", pc, &got);
    print_rule("want", pc, &want);
  }
  CHECK(found && same_rule(&got, &want));
}

/* __restore_rt, as the kernel holds it for a handler glibc installed. */
static uintptr_t restorer(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGURG, &sa, NULL);
  struct {
    uintptr_t handler;
    unsigned long flags;
    uintptr_t restorer;
    uint64_t mask;
  } k;
  memset(&k, 0, sizeof k);
  if (syscall(SYS_rt_sigaction, SIGURG, NULL, &k, sizeof k.mask) != 0)
    return 0;
  sa.sa_handler = SIG_DFL;
  sigaction(SIGURG, &sa, NULL);
  return (k.flags & 0x04000000 /* SA_RESTORER */) ? k.restorer : 0;
}

static void test_known(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  uintptr_t f = (uintptr_t)cfi_omit_fp;
  check_at(f, mk(CPROF__CFI_RSP, 8, 0, 0), "omit_fp entry");
  check_at((uintptr_t)cfi_ofp_push1, mk(CPROF__CFI_RSP, 16, 0, 0),
           "omit_fp after push r12");
  check_at((uintptr_t)cfi_ofp_push2, mk(CPROF__CFI_RSP, 24, 1, -24),
           "omit_fp after push rbp");
  check_at((uintptr_t)cfi_ofp_push3 + 5, mk(CPROF__CFI_RSP, 32, 1, -24),
           "omit_fp body");
  check_at((uintptr_t)cfi_ofp_pop1, mk(CPROF__CFI_RSP, 24, 1, -24),
           "omit_fp after pop rbx");
  check_at((uintptr_t)cfi_ofp_pop2, mk(CPROF__CFI_RSP, 16, 1, -24),
           "omit_fp after pop rbp");
  check_at((uintptr_t)cfi_ofp_pop3, mk(CPROF__CFI_RSP, 8, 1, -24),
           "omit_fp at ret");

  uintptr_t rt = restorer();
  CHECK(rt != 0);
  if (rt) {
    check_at(rt, mk(CPROF__CFI_SIGNAL, 0, 0, 0), "__restore_rt");
    /* Its FDE starts one byte early, for lookups of a return address - 1. */
    check_at(rt - 1, mk(CPROF__CFI_SIGNAL, 0, 0, 0), "__restore_rt - 1");
  }
  uintptr_t entry = (uintptr_t)getauxval(AT_ENTRY);
  CHECK(entry != 0);
  check_at(entry, mk(CPROF__CFI_END, 0, 0, 0), "_start");

  /* Outside any object: no rule at all; the code ranges agree. */
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  cprof__cfi_rule r;
  uintptr_t lo = 0, hi = 0;
  CHECK(!cprof__cfi_find(idx, 4096, &r));
  CHECK(!cprof__cfi_code_range(idx, 4096, &lo, &hi));
  CHECK(cprof__cfi_code_range(idx, f, &lo, &hi) && lo <= f && f < hi);
  CHECK(!cprof__cfi_code_range(idx, (uintptr_t)&r, NULL, NULL));
  cprof__cfi_read_end(idx);
}

/*
 * (d) Whole unwinds by the tables alone.
 */

typedef struct {
  uintptr_t pc, sp, fp;
} regs;

#define CAPTURE(r)                                                    \
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" \
                   : "=r"((r).pc), "=r"((r).sp), "=r"((r).fp))

typedef struct {
  uintptr_t pcs[64];
  int n;
  int last_kind; /* the rule the walk stopped at */
  int signals;   /* signal frames crossed */
  uintptr_t lo, hi; /* the stack */
} walk;

/* Reads the stack directly: the rules under test say where, and each
 * address is checked against the thread's stack first. */
__attribute__((no_sanitize("address", "thread"))) static bool
load(const walk *w, uintptr_t at, uintptr_t *v) {
  if (at < w->lo || at + 8 > w->hi || (at & 7)) return false;
  *v = *(const uintptr_t *)at;
  return true;
}

__attribute__((no_sanitize("address", "thread"))) static void
unwind(regs r, walk *w) {
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  bool exact = true; /* pc is not a return address */
  w->n = 0;
  w->signals = 0;
  w->last_kind = -1;
  while (w->n < 64) {
    w->pcs[w->n++] = r.pc;
    cprof__cfi_rule rule;
    if (!cprof__cfi_find(idx, exact ? r.pc : r.pc - 1, &rule)) {
      w->last_kind = -2; /* in no object with CFI */
      break;
    }
    uintptr_t cfa, ra, fp = r.fp;
    if (rule.kind == CPROF__CFI_SIGNAL) {
      const ucontext_t *uc = (const ucontext_t *)r.sp;
      if (r.sp < w->lo || r.sp + sizeof *uc > w->hi) break;
      r.pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
      r.sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
      r.fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
      w->signals++;
      exact = true;
      continue;
    }
    if (rule.kind == CPROF__CFI_RSP) {
      cfa = r.sp + (uintptr_t)(intptr_t)rule.cfa_off;
    } else if (rule.kind == CPROF__CFI_RBP) {
      cfa = r.fp + (uintptr_t)(intptr_t)rule.cfa_off;
    } else if (rule.kind == CPROF__CFI_PLT) {
      cfa = r.sp + (uintptr_t)(intptr_t)rule.cfa_off +
            ((r.pc & 15) >= rule.plt_split ? 8 : 0);
    } else if (rule.kind == CPROF__CFI_NONE) {
      cfa = r.fp + 16; /* a frame-pointer frame */
      if (!load(w, cfa - 16, &fp)) break;
    } else {
      w->last_kind = rule.kind;
      break;
    }
    if (cfa <= r.sp || !load(w, cfa - 8, &ra)) {
      w->last_kind = -3;
      break;
    }
    if (rule.fp_saved && !load(w, cfa + (uintptr_t)(intptr_t)rule.fp_off, &fp))
      break;
    r.pc = ra;
    r.sp = cfa;
    r.fp = fp;
    exact = false;
  }
  cprof__cfi_read_end(idx);
}

static void stack_bounds(walk *w) {
  pthread_attr_t attr;
  void *addr = NULL;
  size_t size = 0;
  w->lo = w->hi = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  w->lo = (uintptr_t)addr;
  w->hi = (uintptr_t)addr + size;
}

static bool has_pc_in(const walk *w, uintptr_t fn, size_t span) {
  for (int i = 0; i < w->n; i++)
    if (w->pcs[i] >= fn && w->pcs[i] < fn + span) return true;
  return false;
}

static walk thread_walk;
static volatile int calls;

/* Called twice by cfi_omit_fp; the second time rbp holds a plain value, so
 * only the CFI can say where the caller's rbp went. */
NOINLINE static long walk_cb(long x) {
  if (++calls == 2) {
    regs r;
    CAPTURE(r);
    unwind(r, &thread_walk);
  }
  return x + 1;
}

NOINLINE static void *walk_thread(void *arg) {
  (void)arg;
  stack_bounds(&thread_walk);
  calls = 0;
  long v = cfi_omit_fp(walk_cb, 0x1234567);
  __asm__ volatile("" ::"r"(v));
  return NULL;
}

static walk signal_walk;

NOINLINE static void walk_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)si, (void)uc;
  regs r;
  CAPTURE(r);
  unwind(r, &signal_walk);
}

NOINLINE static void raise_here(void) {
  raise(SIGUSR2);
  __asm__ volatile("");
}

static void print_walk(const char *what, const walk *w) {
  fprintf(stderr, "%s: %d frames, %d signal frames, stopped at %d (%s)\n",
          what, w->n, w->signals, w->last_kind,
          w->last_kind >= 0 ? kind_name(w->last_kind) : "-");
  for (int i = 0; i < w->n; i++) {
    Dl_info di;
    const char *sym = dladdr((void *)w->pcs[i], &di) && di.dli_sname
                          ? di.dli_sname : "?";
    const char *obj = di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
    fprintf(stderr, "  #%d %#lx %s (%s)\n", i, (unsigned long)w->pcs[i], sym,
            obj ? obj + 1 : "?");
  }
}

static void test_unwind(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  pthread_t t;
  CHECK_EQ_INT(pthread_create(&t, NULL, walk_thread, NULL), 0);
  pthread_join(t, NULL);
  bool ok = thread_walk.last_kind == CPROF__CFI_END &&
            has_pc_in(&thread_walk, (uintptr_t)cfi_omit_fp, 64) &&
            has_pc_in(&thread_walk, (uintptr_t)walk_thread, 256);
  /* The outermost frame is libc's clone3 (or clone). */
  Dl_info di;
  uintptr_t last = thread_walk.pcs[thread_walk.n - 1];
  ok = ok && dladdr((void *)last, &di) && di.dli_fname &&
       strstr(di.dli_fname, "libc.so.6");
  if (!ok) print_walk("thread walk", &thread_walk);
  CHECK(ok);

  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = walk_handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  stack_bounds(&signal_walk);
  sigaction(SIGUSR2, &sa, &old);
  raise_here();
  sigaction(SIGUSR2, &old, NULL);
  /* It ends in _start, at the return address of its one call. */
  uintptr_t entry = (uintptr_t)getauxval(AT_ENTRY);
  last = signal_walk.pcs[signal_walk.n - 1];
  ok = signal_walk.last_kind == CPROF__CFI_END && signal_walk.signals == 1 &&
       has_pc_in(&signal_walk, (uintptr_t)raise_here, 64) && last > entry &&
       last <= entry + 64;
  if (!ok) print_walk("signal walk", &signal_walk);
  CHECK(ok);
}

/*
 * (e) Refresh.
 */

typedef struct {
  const char *name;
  bool found;
} named;

static int has_object_cb(const cprof__cfi_object_info *o, void *arg) {
  named *n = arg;
  if (strstr(o->name, n->name)) n->found = true;
  return 0;
}

static bool indexed(const char *name) {
  named n = {name, false};
  cprof__cfi_objects(has_object_cb, &n);
  return n.found;
}

static int loaded_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  named *n = arg;
  if (info->dlpi_name && strstr(info->dlpi_name, n->name)) n->found = true;
  return 0;
}

static bool loaded(const char *name) {
  named n = {name, false};
  dl_iterate_phdr(loaded_cb, &n);
  return n.found;
}

/* A library not loaded yet that dlclose really unloads (libstdc++ has
 * STB_GNU_UNIQUE symbols, which make it stay): the test library next to
 * this executable when there is one, else a small system library. */
static void *open_unloadable(char *path, size_t size) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    static const char *rel[] = {"progs/libdlo.so", "../progs/libdlo.so",
                                "libdlo.so"};
    for (size_t i = 0; i < CPROF__ARRAY_LEN(rel); i++) {
      snprintf(path, size, "%s/%s", exe, rel[i]);
      void *h = access(path, R_OK) == 0 ? dlopen(path, RTLD_NOW) : NULL;
      if (h) return h;
    }
  }
  static const char *sys[] = {"libz.so.1", "libbz2.so.1.0", "libexpat.so.1",
                              "libuuid.so.1", "libffi.so.8"};
  for (size_t i = 0; i < CPROF__ARRAY_LEN(sys); i++) {
    void *h = dlopen(sys[i], RTLD_NOW | RTLD_NOLOAD);
    if (h) {
      dlclose(h); /* loaded already: it would not go away */
      continue;
    }
    snprintf(path, size, "%s", sys[i]);
    h = dlopen(sys[i], RTLD_NOW);
    if (h) return h;
  }
  return NULL;
}

static void test_refresh(void) {
  cprof__cfi_stats_t s0, s1, s2, s3;
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  cprof__cfi_stats(&s0);
  CHECK(s0.objects >= 2 && s0.rows > 1000 && s0.table_bytes > 0);
  CHECK(s0.eh_frame_bytes > 0 && s0.skipped_bad == 0);
  /* Nothing changed: no rebuild. */
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  cprof__cfi_stats(&s1);
  CHECK_EQ_INT(s1.rebuilds, s0.rebuilds);
  CHECK_EQ_INT(s1.refreshes, s0.refreshes + 1);
  CHECK_EQ_INT(s1.rows, s0.rows);

  /* A new object is found, and the others' tables are kept. */
  bool had = loaded("libstdc++.so.6");
  void *cxx = dlopen("libstdc++.so.6", RTLD_NOW);
  CHECK(cxx != NULL);
  if (cxx && !had) {
    CHECK_EQ_INT(cprof__cfi_refresh(), 0);
    cprof__cfi_stats(&s2);
    CHECK_EQ_INT(s2.rebuilds, s1.rebuilds + 1);
    CHECK(s2.objects > s1.objects && s2.rows > s1.rows);
    CHECK(indexed("libstdc++.so.6"));
    void *fn = dlsym(cxx, "__cxa_throw");
    const cprof__cfi_index *idx = cprof__cfi_read_begin();
    cprof__cfi_rule r;
    CHECK(fn && cprof__cfi_find(idx, (uintptr_t)fn, &r) &&
          r.kind == CPROF__CFI_RSP && r.cfa_off == 8);
    cprof__cfi_read_end(idx);
    fprintf(stderr, "libstdc++ and its dependencies: %zu objects, %zu rows, "
            "%zu bytes of tables from %zu bytes of .eh_frame\n",
            s2.objects - s1.objects, s2.rows - s1.rows,
            s2.table_bytes - s1.table_bytes,
            s2.eh_frame_bytes - s1.eh_frame_bytes);
  }

  /* An object unloaded is forgotten (ASan's leak check sees its table
   * freed). */
  char path[4200];
  void *h = open_unloadable(path, sizeof path);
  CHECK(h != NULL);
  if (h) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    CHECK_EQ_INT(cprof__cfi_refresh(), 0);
    CHECK(indexed(base));
    cprof__cfi_stats(&s2);
    dlclose(h);
    if (loaded(base)) {
      fprintf(stderr, "%s stayed loaded after dlclose\n", path);
      CHECK(0);
    }
    CHECK_EQ_INT(cprof__cfi_refresh(), 0);
    cprof__cfi_stats(&s3);
    CHECK(!indexed(base));
    CHECK_EQ_INT(s3.rebuilds, s2.rebuilds + 1);
    CHECK(s3.objects == s2.objects - 1 && s3.rows < s2.rows);
    CHECK_EQ_INT(s3.retired, 0);
  }
}

/*
 * (f) Readers on other threads while the index changes under them.
 */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static atomic_int stop_readers, readers_started;
static atomic_long reader_hits;

/* Like a profiler's handlers: a walk's few lookups, then a pause. */
static void *reader(void *arg) {
  uintptr_t pcs[] = {(uintptr_t)raise, (uintptr_t)malloc,
                     (uintptr_t)test_refresh, (uintptr_t)arg};
  long hits = 0;
  atomic_fetch_add(&readers_started, 1);
  while (!atomic_load(&stop_readers)) {
    const cprof__cfi_index *idx = cprof__cfi_read_begin();
    for (size_t i = 0; i < CPROF__ARRAY_LEN(pcs); i++) {
      cprof__cfi_rule r;
      if (cprof__cfi_find(idx, pcs[i], &r) && r.kind != CPROF__CFI_NONE)
        hits++;
    }
    cprof__cfi_read_end(idx);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_add(&reader_hits, hits);
  return NULL;
}

static void test_concurrent(void) {
  char path[4200];
  pthread_t t[4];
  atomic_store(&stop_readers, 0);
  atomic_store(&readers_started, 0);
  for (size_t i = 0; i < 4; i++)
    CHECK_EQ_INT(pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)i), 0);
  while (atomic_load(&readers_started) < 4) sched_yield();
  int64_t t0 = now_ns();
  for (int round = 0; round < 30; round++) {
    void *h = open_unloadable(path, sizeof path);
    CHECK_EQ_INT(cprof__cfi_refresh(), 0);
    if (h) dlclose(h);
    CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  }
  int64_t took = now_ns() - t0;
  atomic_store(&stop_readers, 1);
  for (size_t i = 0; i < 4; i++) pthread_join(t[i], NULL);
  cprof__cfi_stats_t s;
  cprof__cfi_stats(&s);
  CHECK(atomic_load(&reader_hits) > 0);
  /* Readers that pause let every grace period end quickly. */
  fprintf(stderr, "60 refreshes under 4 readers: %.1f ms, %zu retired\n",
          (double)took / 1e6, s.retired);
  CHECK(took < 10 * 1000000000ll);
  CHECK_EQ_INT(s.retired, 0);
  cprof__cfi_shutdown();
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  CHECK(idx == NULL);
  cprof__cfi_read_end(idx);
}

/* Readers that hold the index on several threads (each counted in its
 * thread's shard of the reader count) keep it from being freed: a refresh
 * that replaces it waits out its grace period and retires it, and the
 * next refresh after they let go frees it. */
static atomic_int holders_go;

static void *holder(void *arg) {
  const cprof__cfi_index **out = arg;
  *out = cprof__cfi_read_begin();
  atomic_fetch_add(&readers_started, 1);
  while (!atomic_load(&holders_go)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  cprof__cfi_read_end(*out);
  return NULL;
}

static void test_held(void) {
  enum { N = 6 };
  pthread_t t[N];
  const cprof__cfi_index *held[N];
  char path[4200];
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  cprof__cfi_stats_t s0, s1, s2;
  cprof__cfi_stats(&s0);
  CHECK_EQ_INT(s0.retired, 0);
  atomic_store(&readers_started, 0);
  atomic_store(&holders_go, 0);
  for (int i = 0; i < N; i++)
    CHECK_EQ_INT(pthread_create(&t[i], NULL, holder, &held[i]), 0);
  while (atomic_load(&readers_started) < N) sched_yield();
  void *h = open_unloadable(path, sizeof path);
  CHECK(h != NULL);
  int64_t t0 = now_ns();
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  int64_t waited = now_ns() - t0;
  cprof__cfi_stats(&s1);
  CHECK_EQ_INT(s1.rebuilds, s0.rebuilds + 1);
  CHECK_EQ_INT(s1.retired, 1);
  /* The grace period is about a second. */
  CHECK(waited > 500000000ll);
  atomic_store(&holders_go, 1);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < N; i++) CHECK(held[i] != NULL && held[i] == held[0]);
  if (h) dlclose(h);
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  cprof__cfi_stats(&s2);
  CHECK_EQ_INT(s2.retired, 0);
}

/*
 * (f) The walker's memory of each thread's last walk (capture/stack.c): a
 * frame whose stack pointer and pc the last walk had takes that walk's
 * rule, and only then. memo_a and memo_b push three words each, so they
 * call at one stack pointer when memo_outer calls either from its one
 * call site, but they keep rbp in different slots and call with a plain
 * value in rbp. memo_outer finds its CFA from rbp, so only memo_b's own
 * rule (rbp at CFA - 16, the word below it 8) gets a walk through
 * memo_outer after a walk through memo_a (rbp at CFA - 24): a walker that
 * matched the stack pointer alone would take rbp = 8 and stop there.
 */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl memo_outer\n"
        ".hidden memo_outer\n"
        ".type memo_outer, @function\n"
        "memo_outer:\n" /* long memo_outer(fn, cb, x): fn(cb, x) */
        ".cfi_startproc\n"
        "pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 6, -16\n"
        "movq %rsp, %rbp\n"
        ".cfi_def_cfa_register 6\n"
        "movq %rdi, %rax\n"
        "movq %rsi, %rdi\n"
        "movq %rdx, %rsi\n"
        "call *%rax\n"
        "memo_outer_ret:\n"
        "popq %rbp\n"
        ".cfi_def_cfa 7, 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size memo_outer, .-memo_outer\n"
        ".p2align 4\n"
        ".globl memo_a\n"
        ".hidden memo_a\n"
        ".type memo_a, @function\n"
        "memo_a:\n" /* long memo_a(cb, x): cb(x), rbp saved at CFA - 24 */
        ".cfi_startproc\n"
        "pushq %r12\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 12, -16\n"
        "pushq %rbp\n"
        ".cfi_def_cfa_offset 24\n"
        ".cfi_offset 6, -24\n"
        "pushq %rbx\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 3, -32\n"
        "movq %rdi, %r12\n"
        "movq %rsi, %rdi\n"
        "movq $1, %rbp\n"
        "call *%r12\n"
        "popq %rbx\n"
        ".cfi_def_cfa_offset 24\n"
        "popq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        "popq %r12\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size memo_a, .-memo_a\n"
        ".p2align 4\n"
        ".globl memo_b\n"
        ".hidden memo_b\n"
        ".type memo_b, @function\n"
        "memo_b:\n" /* long memo_b(cb, x): cb(x), rbp saved at CFA - 16 */
        ".cfi_startproc\n"
        "pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 6, -16\n"
        "pushq $8\n"
        ".cfi_def_cfa_offset 24\n"
        "pushq %rbx\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 3, -32\n"
        "movq %rdi, %rax\n"
        "movq %rsi, %rdi\n"
        "movq $1, %rbp\n"
        "call *%rax\n"
        "popq %rbx\n"
        ".cfi_def_cfa_offset 24\n"
        "addq $8, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "popq %rbp\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size memo_b, .-memo_b\n");
typedef long (*memo_cb)(long);
HIDDEN_SYM long memo_outer(long (*fn)(memo_cb, long), memo_cb cb, long x);
HIDDEN_SYM long memo_a(memo_cb cb, long x);
HIDDEN_SYM long memo_b(memo_cb cb, long x);
HIDDEN_SYM extern const char memo_outer_ret[];

static uintptr_t memo_pcs[CPROF__STACK_BUF];
static size_t memo_n;

NOINLINE static long memo_walk_cb(long x) {
  memo_n = cprof__stack_walk_here(memo_pcs, CPROF__STACK_BUF, 0);
  return x + 1;
}

static bool memo_has(uintptr_t lo, uintptr_t hi) {
  for (size_t i = 0; i < memo_n; i++)
    if (memo_pcs[i] >= lo && memo_pcs[i] < hi) return true;
  return false;
}

NOINLINE static void test_memo(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  uintptr_t me = (uintptr_t)test_memo, ret = (uintptr_t)memo_outer_ret;
  uintptr_t first[CPROF__STACK_BUF];
  size_t nfirst = 0;
  for (int on = 1; on >= 0; on--) {
    cprof__stack_memo_set_for_tests(on);
    for (int i = 0; i < 8; i++) {
      long (*fn)(memo_cb, long) = (i & 2) ? memo_b : memo_a;
      memo_n = 0;
      CHECK_EQ_INT(memo_outer(fn, memo_walk_cb, i), i + 1);
      /* cb, memo_a or memo_b, memo_outer, this function, ... main */
      bool ok = memo_n > 4 &&
                memo_has((uintptr_t)fn, (uintptr_t)fn + 64) &&
                memo_has(ret - 1, ret) && memo_has(me, me + 2048);
      if (!ok)
        fprintf(stderr, "memo %s, walk %d through %s: %zu frames\n",
                on ? "on" : "off", i, (i & 2) ? "memo_b" : "memo_a", memo_n);
      CHECK(ok);
      /* A walk the memory served is the walk without it. */
      if (i == 6 && on) {
        nfirst = memo_n;
        memcpy(first, memo_pcs, sizeof first);
      }
      if (i == 6 && !on) {
        CHECK_EQ_INT(memo_n, nfirst);
        CHECK(memcmp(first, memo_pcs, nfirst * sizeof first[0]) == 0);
      }
    }
  }
  cprof__stack_memo_set_for_tests(true);
}

/* A child forked while another thread is mid-walk starts with no readers
 * (else its first rebuild would wait out the whole grace period) and with
 * the writer lock free. */
static void *busy_reader(void *arg) {
  (void)arg;
  atomic_fetch_add(&readers_started, 1);
  while (!atomic_load(&stop_readers)) {
    const cprof__cfi_index *idx = cprof__cfi_read_begin();
    cprof__cfi_rule r;
    for (int i = 0; i < 1000; i++) cprof__cfi_find(idx, (uintptr_t)raise, &r);
    cprof__cfi_read_end(idx);
  }
  return NULL;
}

static void test_fork(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  pthread_t t;
  atomic_store(&stop_readers, 0);
  atomic_store(&readers_started, 0);
  CHECK_EQ_INT(pthread_create(&t, NULL, busy_reader, NULL), 0);
  while (atomic_load(&readers_started) < 1) sched_yield();
  pid_t pid = fork();
  if (pid == 0) {
    char path[4200];
    int64_t t0 = now_ns();
    void *h = open_unloadable(path, sizeof path);
    bool ok = h && cprof__cfi_refresh() == 0;
    const cprof__cfi_index *idx = cprof__cfi_read_begin();
    cprof__cfi_rule r;
    ok = ok && cprof__cfi_find(idx, (uintptr_t)raise, &r) &&
         r.kind != CPROF__CFI_NONE;
    cprof__cfi_read_end(idx);
    cprof__cfi_stats_t s;
    cprof__cfi_stats(&s);
    ok = ok && s.retired == 0 && now_ns() - t0 < 500000000;
    _exit(ok ? 0 : 1);
  }
  atomic_store(&stop_readers, 1);
  pthread_join(t, NULL);
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Forks while another thread refreshes the tables for a library loaded
 * and unloaded over and over, which allocates from
 * cprof's own heap under the writer lock: fork must take the writer lock
 * before the heap's (base/own_heap.h, cprof__atfork), or it waits on the
 * heap's lock held by a fork handler while the refresher, holding the
 * writer lock, waits on the same. Each fork here must come back. */
static void *refresher(void *arg) {
  (void)arg;
  atomic_fetch_add(&readers_started, 1);
  while (!atomic_load(&stop_readers)) {
    /* A library that comes and goes: each refresh allocates. */
    char path[4200];
    void *h = open_unloadable(path, sizeof path);
    cprof__cfi_refresh();
    if (h) dlclose(h);
    cprof__cfi_refresh();
  }
  return NULL;
}

static void test_fork_refreshing(void) {
  atomic_store(&stop_readers, 0);
  atomic_store(&readers_started, 0);
  pthread_t t;
  CHECK_EQ_INT(pthread_create(&t, NULL, refresher, NULL), 0);
  while (atomic_load(&readers_started) < 1) sched_yield();
  /* A fork that never returns ends the test here, with its name. */
  alarm(60);
  int forks = 0, bad = 0;
  for (int64_t end = now_ns() + 1500000000; now_ns() < end; forks++) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
      bad++;
  }
  alarm(0);
  atomic_store(&stop_readers, 1);
  pthread_join(t, NULL);
  printf("  %d forks during refreshes, %d failed\n", forks, bad);
  CHECK(forks > 10 && bad == 0);
}

#else
/* Elsewhere the builder still works; nothing is ever published. */
static void test_unsupported(void) {
  CHECK_EQ_INT(cprof__cfi_refresh(), CPROF_EUNSUPPORTED);
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  cprof__cfi_rule r;
  CHECK(idx == NULL && !cprof__cfi_find(idx, (uintptr_t)test_unsupported, &r));
  cprof__cfi_read_end(idx);
}
#endif

int main(void) {
  RUN(test_builder);
#if defined(__x86_64__)
  RUN(test_refresh);
  RUN(test_oracle);
  RUN(test_page_index);
  RUN(test_known);
  RUN(test_unwind);
  RUN(test_concurrent);
  RUN(test_held);
  RUN(test_memo);
  RUN(test_fork);
  RUN(test_fork_refreshing);
#else
  RUN(test_unsupported);
#endif
  cprof__cfi_shutdown();
  return TEST_RESULT();
}
