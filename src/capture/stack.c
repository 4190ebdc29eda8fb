/*
 * The stack walker. It owns each thread's cached stack bounds, the page
 * probe, the fault-free reader, the walk's cache of unwind rules by pc and
 * the unwind mode (CPROF_UNWIND). Everything but
 * cprof__stack_register_thread(), cprof__stack_init() and the refreshes
 * runs in signal context: it must never take a lock, allocate, touch
 * memory it has not validated, or leave errno changed. It may call
 * memcpy, make raw system calls (base/sys.h: the page probe,
 * process_vm_readv, sigaltstack), look up the unwind tables
 * (capture/cfi.h, between one read_begin and read_end a walk), and read
 * its own thread-local bounds, which use the initial-exec TLS model so
 * that reading them never enters the dynamic loader.
 *
 * Each frame is stepped by the CFI row of its loaded object's unwind table
 * where there is one (x86-64): the CFA from rsp or rbp plus an offset, the
 * return address at CFA - 8, the caller's rbp where the row saved it; a
 * signal trampoline's row leads to the interrupted registers, and an
 * undefined return address (_start, clone) ends the walk. Where no row
 * exists (code without CFI, a JIT's, AArch64, or CPROF_UNWIND=fp) the step
 * is by the frame record {saved frame pointer, return address} at the
 * frame pointer; an interrupted frame without a row first tries the return
 * address at the stack pointer, trusted only after a call to the function
 * holding the pc (a leaf that has not set up its frame). Each step is
 * validated before anything is read: a CFA must lie above the stack
 * pointer and within CPROF__STACK_MAX_STEP of it; a frame pointer must be
 * aligned, no lower than the stack pointer or the end of the previous
 * frame record (so the chain strictly increases and cannot loop), and
 * within CPROF__STACK_MAX_STEP of the previous frame; every word must lie
 * inside the thread's stack when its bounds are known. When they are not
 * (a thread cprof never saw, or a stack pointer outside the cached bounds,
 * such as an alternate signal stack or a coroutine's stack), every page is
 * probed before it is read.
 */
#include <linux/futex.h>
#include <limits.h>
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "capture/cfi.h"
#include "capture/cfi_index.h"
#include "base/env.h"
#include "base/mem.h"
#include "capture/saferead.h"
#include "capture/stack.h"
#include "base/rng.h"
#include "base/sys.h"

/*
 * The largest distance between two consecutive frame records. A frame holds
 * a function's locals, so this caps the stack buffer one function may keep:
 * 1 MiB leaves room for the large on-stack I/O and parsing buffers real code
 * keeps (64-512 KiB is not rare) while still being an eighth of the default
 * 8 MiB stack, so a garbage frame pointer that happens to be aligned and
 * above the last frame is rejected unless it lands close by.
 */
#define CPROF__STACK_MAX_STEP ((uintptr_t)1 << 20)

/* Return addresses below this lie in the never-mapped first page. */
#define CPROF__MIN_RETURN ((uintptr_t)4096)


/*
 * The calling thread's stack, [lo, hi); hi == 0 when unknown. A signal can
 * arrive on this very thread while the bounds are being written, so hi is
 * cleared first and set last, with signal fences keeping the order.
 */
static __thread uintptr_t tls_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t tls_hi __attribute__((tls_model("initial-exec")));

void cprof__stack_register_thread(void) {
  pthread_attr_t attr;
  void *addr = NULL;
  size_t size = 0;
  int ok;

  /* pthread_getattr_np allocates (and, for the main thread, reads
   * /proc/self/maps), so it runs guarded from the heap sampler. */
  cprof__guard_enter();
  ok = pthread_getattr_np(pthread_self(), &attr) == 0;
  if (ok) {
    ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
  }
  cprof__guard_exit();

  tls_hi = 0;
  atomic_signal_fence(memory_order_seq_cst);
  if (!ok || !addr || size == 0) return;
  tls_lo = (uintptr_t)addr;
  atomic_signal_fence(memory_order_seq_cst);
  tls_hi = (uintptr_t)addr + size;
}

void cprof__stack_unregister_thread(void) {
  tls_hi = 0;
  atomic_signal_fence(memory_order_seq_cst);
  tls_lo = 0;
}


CPROF__SIGNAL_SAFE size_t cprof__stack_room(void) {
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  uintptr_t hi = tls_hi;
  atomic_signal_fence(memory_order_seq_cst);
  uintptr_t lo = tls_lo;
  if (hi != 0 && sp > lo && sp < hi) return sp - lo;
  stack_t ss;
  if (cprof__sys4(SYS_sigaltstack, 0L, (long)&ss, 0L, 0L) == 0 &&
      (ss.ss_flags & SS_ONSTACK)) {
    uintptr_t a = (uintptr_t)ss.ss_sp;
    return sp > a && sp - a <= ss.ss_size ? sp - a : 0;
  }
  /* A stack whose bounds cprof does not know (a coroutine's, a raw
   * clone's): only what is proved mapped below counts, page by page down
   * to the handler's need. A guard page, or the end of the mapping,
   * stops it. */
  int saved = errno;
  uintptr_t need = CPROF__HANDLER_STACK;
  uintptr_t low = sp > need ? sp - need : 0;
  uintptr_t page = sp & ~(CPROF__PAGE - 1);
  size_t room = 0;
  while (page > CPROF__PAGE) {
    uintptr_t below = page - CPROF__PAGE;
    if (!cprof__probe8(below)) {
      room = sp - page;
      break;
    }
    page = below;
    if (page <= low) {
      room = need;
      break;
    }
  }
  errno = saved;
  return room;
}

/* The generation of the rule cache (below): bumped by every refresh that
 * publishes a new index. */
static _Atomic uint64_t rule_gen = 1;

void cprof__stack_init(void) {
  /* Binds errno's accessor now: handlers save and restore errno, and a
   * first, lazily bound call from a handler would run the dynamic
   * linker's resolver on whatever stack the signal landed on. */
  int e = errno;
  errno = e;
  const char *v = cprof__env_str("CPROF_UNWIND");
  if (v) {
    if (strcmp(v, "auto") == 0) {
      cprof__stack_set_mode(CPROF__UNWIND_AUTO);
    } else if (strcmp(v, "fp") == 0) {
      cprof__stack_set_mode(CPROF__UNWIND_FP);
    } else if (strcmp(v, "cfi") == 0) {
      cprof__stack_set_mode(CPROF__UNWIND_CFI);
    } else {
      char q[CPROF__QUOTED_SIZE];
      cprof__warn("CPROF_UNWIND=%s: not auto, fp or cfi; using auto",
                  cprof__quoted(q, sizeof q, v));
    }
  }
  if (cprof__stack_mode() != CPROF__UNWIND_FP) cprof__cfi_init();
  /* The tables are built on first need (a profile started or written, a
   * heap sample, a thread created), not here: start-up stays as cheap as
   * it was for programs that never take a sample. */
}

static bool refresh(bool wait) {
  if (cprof__stack_mode() == CPROF__UNWIND_FP) return false;
  cprof__guard_enter();
  /* Not cprof__cfi_stats, which takes the writer lock: the try path must
   * never wait (a fork child's first allocation, inside the loader). */
  uint64_t before = cprof__cfi_generation();
  if (wait)
    cprof__cfi_refresh();
  else
    cprof__cfi_refresh_try();
  uint64_t after = cprof__cfi_generation();
  /* A new index may place other code at the cached pcs. A walk that read
   * the old generation may still store an old rule under it, which no
   * reader of the new generation accepts. */
  if (after != before)
    atomic_fetch_add_explicit(&rule_gen, 1, memory_order_relaxed);
  cprof__guard_exit();
  return after != before;
}

void cprof__stack_refresh(void) { (void)refresh(true); }

bool cprof__stack_refresh_try(void) { return refresh(false); }

/* A walk's memory of the last page found readable: one page, one probe. */
typedef struct {
  uintptr_t page; /* 0 when none yet: page 0 is never readable anyway */
} probe_cache;

CPROF__SIGNAL_SAFE static int page_readable(probe_cache *c, uintptr_t addr) {
  uintptr_t page = addr & ~(CPROF__PAGE - 1);
  if (page == 0) return 0;
  if (page == c->page) return 1;
  if (!cprof__probe8(page)) return 0;
  c->page = page;
  return 1;
}

/* Where the chain is read: the frames gathered so far, skip and truncation
 * handled in one place for every entry point. */
typedef struct {
  uintptr_t *pcs;
  size_t max;
  size_t n;
  size_t skip;
} walk_out;

/* Appends one frame; returns 0 when the walk must stop (the buffer is full
 * and the truncation mark is written). */
CPROF__SIGNAL_SAFE static int emit(walk_out *o, uintptr_t pc) {
  if (o->skip > 0) {
    o->skip--;
    return 1;
  }
  if (o->n + 1 >= o->max) {
    o->pcs[o->n++] = CPROF__PC_TRUNCATED;
    return 0;
  }
  o->pcs[o->n++] = pc;
  return 1;
}

CPROF__SIGNAL_SAFE static inline uintptr_t strip_return(uintptr_t ret) {
#if defined(__aarch64__)
  /* Pointer authentication keeps a signature in the top bits of a saved
   * link register; user addresses fit in 48 bits. */
  return ret & (((uintptr_t)1 << 48) - 1);
#else
  return ret;
#endif
}

/* How walks step from frame to frame (CPROF_UNWIND). */
static _Atomic int unwind_mode = CPROF__UNWIND_AUTO;

void cprof__stack_set_mode(int mode) { atomic_store(&unwind_mode, mode); }
CPROF__SIGNAL_SAFE int cprof__stack_mode(void) { return atomic_load(&unwind_mode); }

/*
 * What a walk knows of the stack it reads: the thread's cached bounds and
 * whether the current stack pointer lies inside them (it does not on an
 * alternate signal stack or a coroutine's stack, where every page is
 * probed instead).
 */
typedef struct {
  uintptr_t lo, hi;
  int known;
  probe_cache cache;
  /* Another thread's stack (cprof__stack_walk_remote): words inside the
   * copy come from it, every other word through cprof__safe_read. */
  cprof__stack_copy *remote;
  int is_remote;
} stack_view;

CPROF__SIGNAL_SAFE static void view_init(stack_view *v, uintptr_t sp) {
  /* hi is read first and written last, so a nonzero hi has its lo. */
  v->hi = tls_hi;
  atomic_signal_fence(memory_order_seq_cst);
  v->lo = tls_lo;
  v->known = !v->is_remote && v->hi != 0 && sp >= v->lo && sp < v->hi;
  v->cache.page = 0;
}

/* Extends a remote stack copy to cover [lo, upto) and a page more (one
 * process_vm_readv, one element per page, so the mapped part comes back
 * when the rest is not); on failure no more is tried. Returns whether
 * upto is covered. */
CPROF__SIGNAL_SAFE static int copy_more(cprof__stack_copy *c, uintptr_t upto) {
  enum { MAXV = 4 };
  struct iovec local[MAXV], remote[MAXV];
  uintptr_t from = c->lo + c->len;
  uintptr_t end = ((upto + CPROF__PAGE - 1) & ~(CPROF__PAGE - 1)) + CPROF__PAGE;
  if (end > c->lo + c->cap) end = c->lo + c->cap;
  long nv = 0;
  for (uintptr_t a = from; a < end && nv < MAXV; nv++) {
    uintptr_t next = (a & ~(CPROF__PAGE - 1)) + CPROF__PAGE;
    if (next > end) next = end;
    local[nv] =
        (struct iovec){(unsigned char *)c->data + (a - c->lo), next - a};
    remote[nv] = (struct iovec){(void *)a, next - a};
    a = next;
  }
  long pid = c->pid ? c->pid : cprof__sys4(SYS_getpid, 0, 0, 0, 0);
  long n = nv ? cprof__sys6(SYS_process_vm_readv, pid, (long)local, nv,
                            (long)remote, nv, 0L)
              : 0;
  if (n > 0) c->len += (size_t)n;
  if (c->lo + c->len < upto) {
    /* Cut short by an unreadable page (not by the end of the copy's
     * room): a word there is not worth a system call of its own. */
    if ((n >= 0 && (uintptr_t)n < end - from) || n == -EFAULT)
      c->bad_page = (c->lo + c->len) & ~(CPROF__PAGE - 1);
    c->cap = c->len;
    return 0;
  }
  return 1;
}

/* Reads the aligned word at addr, which must lie at or above floor (the
 * current frame's stack pointer: nothing below it belongs to a live
 * frame). Returns 0 when the word is outside the stack or unreadable. */
CPROF__NO_SANITIZE_MEM static inline __attribute__((always_inline)) int
view_read(stack_view *v, uintptr_t floor, uintptr_t addr, uintptr_t *out) {
  if ((addr & 7) || addr < floor || addr + 8 < addr) return 0;
  if (v->is_remote) {
    cprof__stack_copy *c = v->remote;
    if (c && addr >= c->lo && addr + 8 <= c->lo + c->cap &&
        (addr + 8 <= c->lo + c->len || copy_more(c, addr + 8))) {
      memcpy(out, (const unsigned char *)c->data + (addr - c->lo), 8);
      return 1;
    }
    if (c && c->bad_page && (addr & ~(CPROF__PAGE - 1)) == c->bad_page)
      return 0;
    return cprof__safe_read_in(c ? c->pid : 0, addr, out, 8);
  }
  if (v->known) {
    if (addr + 8 > v->hi) return 0;
  } else if (!page_readable(&v->cache, addr)) {
    return 0;
  }
  *out = *(const uintptr_t *)addr;
  return 1;
}

/* One frame's registers: its pc (as emitted: exact for an interrupted
 * frame, a return address minus one for every other), stack pointer and
 * frame pointer. */
typedef struct {
  uintptr_t pc, sp, fp;
  int interrupted;
  int fp_unknown; /* a walk from /proc's pc and sp: fp not known yet */
} regs;

/* The frame-pointer step: the record {caller's fp, return address} at fp,
 * validated as it always was: aligned, at or above sp and within
 * CPROF__STACK_MAX_STEP of it, on the stack. */
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static int fp_step(stack_view *v, const regs *r, regs *next) {
  uintptr_t fp = r->fp, rec_fp, ret;
  if (fp < r->sp || fp - r->sp > CPROF__STACK_MAX_STEP) return 0;
  if (!view_read(v, r->sp, fp, &rec_fp) ||
      !view_read(v, r->sp, fp + 8, &ret))
    return 0;
  ret = strip_return(ret);
  next->pc = ret;
  next->sp = fp + 16;
  next->fp = rec_fp;
  next->fp_unknown = 0;
  return 1;
}

#if defined(__x86_64__)
static uintptr_t leaf_return(uintptr_t pc, uintptr_t sp);

/* The CFI step: CFA from the row's register, the return address at
 * CFA - 8, the caller's rbp where the row saved it. The CFA must lie above
 * the stack pointer (so a walk strictly climbs and cannot loop) and within
 * CPROF__STACK_MAX_STEP of it. */
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static int cfi_step(stack_view *v, const regs *r, const cprof__cfi_rule *rule,
                    regs *next) {
  uintptr_t cfa;
  switch (rule->kind) {
    case CPROF__CFI_RSP: cfa = r->sp + (uintptr_t)(intptr_t)rule->cfa_off; break;
    case CPROF__CFI_RBP: cfa = r->fp + (uintptr_t)(intptr_t)rule->cfa_off; break;
    case CPROF__CFI_PLT:
      cfa = r->sp + (uintptr_t)(intptr_t)rule->cfa_off +
            ((r->pc & 15) >= rule->plt_split ? 8 : 0);
      break;
    default: return 0;
  }
  if (cfa <= r->sp || cfa - r->sp > CPROF__STACK_MAX_STEP) return 0;
  uintptr_t ret, fp = r->fp;
  if (!view_read(v, r->sp, cfa - 8, &ret)) return 0;
  /* In an epilogue, after the pops, the rows of gcc's code still name the
   * save slots, which now lie below the stack pointer: the register then
   * already holds the caller's value. */
  uintptr_t slot = cfa + (uintptr_t)(intptr_t)rule->fp_off;
  int fp_unknown = r->fp_unknown;
  if (rule->fp_saved && slot >= r->sp) {
    if (!view_read(v, r->sp, slot, &fp)) return 0;
    fp_unknown = 0;
  }
  next->pc = ret;
  next->sp = cfa;
  next->fp = fp;
  next->fp_unknown = fp_unknown;
  return 1;
}

/* A signal frame (the trampoline a handler returns into): the registers
 * the signal interrupted, from the ucontext_t the kernel left at sp. */
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static int signal_step(stack_view *v, const regs *r, regs *next) {
  const uintptr_t base = r->sp + offsetof(ucontext_t, uc_mcontext.gregs);
  uintptr_t pc, sp, fp;
  if (!view_read(v, r->sp, base + REG_RIP * 8, &pc) ||
      !view_read(v, r->sp, base + REG_RSP * 8, &sp) ||
      !view_read(v, r->sp, base + REG_RBP * 8, &fp))
    return 0;
  next->pc = pc;
  next->sp = sp;
  next->fp = fp;
  next->fp_unknown = 0;
  return 1;
}
#endif

/*
 * A cache of rules by pc, in front of the tables' binary search: stacks
 * repeat, so most lookups are of a pc seen before. Direct-mapped, shared by
 * every thread and lock-free: a slot is two words written one after the
 * other, {pc ^ generation ^ check(rule), rule packed in 64 bits}, so a
 * reader that sees a torn pair (or another pc's) fails the check and
 * searches the tables instead. The generation changes whenever a refresh
 * publishes a new index, which retires every slot at once.
 */
#define RULE_CACHE_SLOTS 4096
#define RULE_ABSENT 15 /* a pc in no object with a table */

typedef struct {
  _Atomic uint64_t key, val;
} rule_slot;
static rule_slot rule_cache[RULE_CACHE_SLOTS];

CPROF__SIGNAL_SAFE static inline uint64_t rule_check(uint64_t val) {
  return (val ^ (val >> 29)) * 0xbf58476d1ce4e5b9ull;
}

CPROF__SIGNAL_SAFE static inline size_t rule_slot_of(uintptr_t pc) {
  return cprof__hash_word((uint64_t)pc, 12) & (RULE_CACHE_SLOTS - 1);
}

/* Packs a rule in 64 bits: kind 4, fp_saved 1, plt_split 5, cfa_off and
 * fp_off 27 bits each, signed. False when an offset does not fit (such a
 * rule is simply not cached). */
CPROF__SIGNAL_SAFE static int rule_pack(int have, const cprof__cfi_rule *r, uint64_t *out) {
  if (!have) {
    *out = RULE_ABSENT;
    return 1;
  }
  const int32_t lim = 1 << 26;
  if (r->cfa_off >= lim || r->cfa_off < -lim || r->fp_off >= lim ||
      r->fp_off < -lim || r->kind >= RULE_ABSENT || r->plt_split > 31)
    return 0;
  *out = (uint64_t)r->kind | (uint64_t)(r->fp_saved & 1) << 4 |
         (uint64_t)r->plt_split << 5 |
         ((uint64_t)(uint32_t)r->cfa_off & 0x7ffffff) << 10 |
         ((uint64_t)(uint32_t)r->fp_off & 0x7ffffff) << 37;
  return 1;
}

CPROF__SIGNAL_SAFE static inline int32_t sext27(uint64_t v) {
  return (int32_t)((uint32_t)(v << 5)) >> 5;
}

CPROF__SIGNAL_SAFE static int rule_unpack(uint64_t v, cprof__cfi_rule *r) {
  if ((v & 15) == RULE_ABSENT) return 0;
  r->kind = (uint8_t)(v & 15);
  r->fp_saved = (uint8_t)((v >> 4) & 1);
  r->plt_split = (uint8_t)((v >> 5) & 31);
  r->reserved = 0;
  r->cfa_off = sext27((v >> 10) & 0x7ffffff);
  r->fp_off = sext27((v >> 37) & 0x7ffffff);
  return 1;
}

/* cprof__cfi_find through the cache. */
CPROF__SIGNAL_SAFE static int find_rule(const cprof__cfi_index *idx, uintptr_t pc,
                     cprof__cfi_rule *r) {
  rule_slot *slot = &rule_cache[rule_slot_of(pc)];
  uint64_t gen = atomic_load_explicit(&rule_gen, memory_order_relaxed);
  uint64_t key = atomic_load_explicit(&slot->key, memory_order_relaxed);
  uint64_t val = atomic_load_explicit(&slot->val, memory_order_relaxed);
  if (key == ((uint64_t)pc ^ gen ^ rule_check(val))) return rule_unpack(val, r);
  int have = cprof__cfi_find(idx, pc, r);
  if (rule_pack(have, r, &val)) {
    atomic_store_explicit(&slot->val, val, memory_order_relaxed);
    atomic_store_explicit(&slot->key, (uint64_t)pc ^ gen ^ rule_check(val),
                          memory_order_relaxed);
  }
  return have;
}

/*
 * Each thread's last walk, in front of the rule cache. A heap or CPU
 * sample's stack shares most of its outer frames with the sample before it
 * on the same thread, but by the next sample the program has pushed the
 * rule cache's slots out of the processor's caches: one slot a frame, at a
 * random place, is a miss a frame (by perf, nine in ten of find_rule's
 * samples in a compiler sat on that load). The last walk's frames, {stack
 * pointer, pc, packed rule} in walk order, are read in order instead, which
 * the processor prefetches: a frame whose stack pointer and pc the last
 * walk had gets that walk's rule. A rule depends only on the pc and the
 * tables, so a frame found there is right whatever thread walked it, as
 * long as the rule cache's generation has not changed since.
 *
 * A walk takes the record of its slot (chosen by thread pointer) by
 * compare-and-swap and gives it back at its end; a walk that finds it
 * taken (a signal's walk that interrupted a walk on the same thread, or
 * another thread on the same slot) uses the rule cache alone. A record
 * holds two buffers, the last walk and the one being written, which swap
 * at the walk's end. A fork child whose parent had a walk running on
 * another thread finds that slot taken for ever, and walks without it.
 * Another thread's copied stack (a goroutine profile's) is never
 * remembered: the stacks of many threads in turn would only evict each
 * other.
 */
#define MEMO_SLOTS 64
#define MEMO_FRAMES 128

typedef struct {
  uintptr_t sp, pc;
  uint64_t rule; /* rule_pack's */
} memo_frame;

typedef struct {
  _Atomic int busy;
  unsigned cur;  /* the buffer holding the last walk */
  uint32_t n[2]; /* frames in each buffer */
  uint64_t gen;  /* rule_gen the last walk read */
  memo_frame f[2][MEMO_FRAMES];
} memo_slot;

static memo_slot memo_slots[MEMO_SLOTS];
static atomic_bool memo_on = true;

void cprof__stack_memo_set_for_tests(bool on) { atomic_store(&memo_on, on); }

/* One walk's use of its record. */
typedef struct {
  memo_slot *m; /* NULL: no record this walk */
  const memo_frame *old;
  uint32_t nold, j; /* the last walk's frames; the next one to look at */
  uint32_t nnew;
  uintptr_t last_sp;
  uint64_t gen;
} memo_walk;

CPROF__SIGNAL_SAFE static void memo_begin(memo_walk *w) {
  memo_slot *m = &memo_slots[cprof__hash_word(
      (uint64_t)(uintptr_t)__builtin_thread_pointer(), 6)];
  int expected = 0;
  w->m = NULL;
  if (!atomic_load_explicit(&memo_on, memory_order_relaxed)) return;
  if (!atomic_compare_exchange_strong_explicit(&m->busy, &expected, 1,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    return;
  w->m = m;
  w->gen = atomic_load_explicit(&rule_gen, memory_order_relaxed);
  w->old = m->f[m->cur & 1];
  w->nold = m->gen == w->gen ? m->n[m->cur & 1] : 0;
  w->j = 0;
  w->nnew = 0;
  w->last_sp = 0;
}

/* find_rule for the frame at sp with pc, through the last walk first; the
 * frame is remembered for the next walk. */
CPROF__SIGNAL_SAFE static int memo_rule(memo_walk *w,
                                        const cprof__cfi_index *idx,
                                        uintptr_t sp, uintptr_t pc,
                                        cprof__cfi_rule *r) {
  if (!w->m) return find_rule(idx, pc, r);
  /* Stack pointers climb along a walk; one that drops (a signal frame's
   * interrupted context, on another stack) starts the search again. */
  if (sp < w->last_sp) w->j = 0;
  w->last_sp = sp;
  while (w->j < w->nold && w->old[w->j].sp < sp) w->j++;
  uint64_t packed;
  int have;
  if (w->j < w->nold && w->old[w->j].sp == sp && w->old[w->j].pc == pc) {
    packed = w->old[w->j].rule;
    have = rule_unpack(packed, r);
  } else {
    have = find_rule(idx, pc, r);
    if (!rule_pack(have, r, &packed)) return have;
  }
  if (w->nnew < MEMO_FRAMES)
    w->m->f[(w->m->cur & 1) ^ 1][w->nnew++] = (memo_frame){sp, pc, packed};
  return have;
}

CPROF__SIGNAL_SAFE static void memo_end(memo_walk *w) {
  memo_slot *m = w->m;
  if (!m) return;
  m->cur = (m->cur & 1) ^ 1;
  m->n[m->cur] = w->nnew;
  m->gen = w->gen;
  atomic_store_explicit(&m->busy, 0, memory_order_release);
}

/* How far above the stack pointer a walk that does not know the frame
 * pointer looks for the frame record of the function it is in. */
#define RECOVER_SCAN ((uintptr_t)32 << 10)

#if defined(__x86_64__)
CPROF__SIGNAL_SAFE static uintptr_t call_target(pid_t pid, uintptr_t ret,
                                                const unsigned char *b,
                                                uintptr_t *slot);
CPROF__SIGNAL_SAFE static int read_word(pid_t pid, uintptr_t addr,
                                        uintptr_t *out);

/* Whether ret is a return address: inside a loaded object's code (when
 * there are tables to say so) and right after a call instruction, direct
 * (E8 rel32, or FF 15 through a pointer slot: *target gets what it calls)
 * or indirect (FF /2, 2 to 7 bytes: *target = 0). The code is read by the
 * fault-free reader; a remote walk's answers are cached (stacks repeat).
 * *lasting says whether the answer was read whole from a loaded object's
 * code (it holds until the tables change), *slot where the target was
 * read from (0 when not from a pointer slot). */
CPROF__SIGNAL_SAFE static int after_call_read(pid_t pid,
                                              const cprof__cfi_index *idx,
                                              uintptr_t ret, uintptr_t *target,
                                              uintptr_t *slot, int *lasting);

CPROF__SIGNAL_SAFE static int after_call(const stack_view *v, const cprof__cfi_index *idx,
                      uintptr_t ret, uintptr_t *target) {
  cprof__call_cache *cc = v->is_remote && v->remote ? v->remote->calls : NULL;
  pid_t pid = v->is_remote && v->remote ? v->remote->pid : 0;
  uintptr_t slot;
  int lasting;
  if (!cc) return after_call_read(pid, idx, ret, target, &slot, &lasting);
  /* Answers about code hold while the tables do: a new generation means
   * objects were loaded or unloaded, and other code may lie at ret. */
  uint64_t gen = cprof__cfi_generation();
  if (cc->gen != gen) {
    memset(cc->kind, 0, sizeof cc->kind);
    cc->gen = gen;
  }
  size_t i = (size_t)((ret * 0x9e3779b97f4a7c15ull) >> 55) &
             (CPROF__CALL_CACHE - 1);
  if (cc->kind[i] && cc->ret[i] == ret) {
    if (cc->round_of[i] == cc->round) {
      *target = cc->target[i];
      return cc->kind[i] == 2;
    }
    /* From an earlier round: the code's answer stands; a target read
     * through a pointer slot is read again (the program may rebind it). */
    uintptr_t t;
    if (cc->lasting[i] && (!cc->slot[i] || read_word(pid, cc->slot[i], &t))) {
      if (cc->slot[i]) cc->target[i] = t;
      cc->round_of[i] = cc->round;
      *target = cc->target[i];
      return cc->kind[i] == 2;
    }
  }
  /* A word that is no return address by where it points (most of those a
   * frame-record search meets) costs no read: it is not stored over one
   * that did. */
  if (ret < CPROF__MIN_RETURN ||
      (idx && !cprof__cfi_code_range(idx, ret - 1, NULL, NULL)))
    return 0;
  int ok = after_call_read(pid, idx, ret, target, &slot, &lasting);
  cc->ret[i] = ret;
  cc->target[i] = ok ? *target : 0;
  cc->slot[i] = ok ? slot : 0;
  cc->lasting[i] = (uint8_t)lasting;
  cc->round_of[i] = cc->round;
  cc->kind[i] = ok ? 2 : 1;
  return ok;
}

CPROF__SIGNAL_SAFE static int after_call_read(pid_t pid,
                                              const cprof__cfi_index *idx,
                                              uintptr_t ret, uintptr_t *target,
                                              uintptr_t *slot, int *lasting) {
  unsigned char c[8]; /* c[8 - k] is the byte at ret - k */
  *slot = 0;
  *lasting = 0;
  if (ret < CPROF__MIN_RETURN) return 0;
  if (idx && !cprof__cfi_code_range(idx, ret - 1, NULL, NULL)) return 0;
  if (!cprof__safe_read_in(pid, ret - 8, c, sizeof c)) return 0;
  *target = 0;
  *lasting = idx != NULL;
  /* call rel32, or call *disp32(%rip) (through the GOT, -fno-plt): both
   * name their target. */
  if (c[8 - 5] == 0xe8 || (c[8 - 6] == 0xff && c[8 - 5] == 0x15)) {
    *target = call_target(pid, ret, c, slot);
    /* A PLT stub that could not be read whole: its target is not final. */
    if (*target == 0 || (c[8 - 5] == 0xe8 && *slot == 1)) *lasting = 0;
    if (*slot == 1) *slot = 0;
    return *target != 0;
  }
  for (int len = 2; len <= 7; len++)
    if (c[8 - len] == 0xff && ((c[8 - len + 1] >> 3) & 7) == 2) return 1;
  return 0;
}

/* Whether a frame record found at x, {f, ret}, leads one frame further:
 * the caller's row at ret (or, without one, its frame record at f) gives
 * a CFA above the record whose slot holds another return address. A stale
 * record left in a frame's locals rarely does (its saved frame pointer
 * has long been reused). */
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static int record_leads_on(stack_view *v,
                                                  const cprof__cfi_index *idx,
                                                  uintptr_t floor, uintptr_t x,
                                                  uintptr_t f, uintptr_t ret) {
  cprof__cfi_rule rule;
  uintptr_t sp = x + 16, cfa, ret2, t2;
  int have = idx && find_rule(idx, ret - 1, &rule);
  if (have && (rule.kind == CPROF__CFI_END || rule.kind == CPROF__CFI_SIGNAL))
    return 1;
  if (have && rule.kind == CPROF__CFI_RSP)
    cfa = sp + (uintptr_t)(intptr_t)rule.cfa_off;
  else if (have && rule.kind == CPROF__CFI_RBP)
    cfa = f + (uintptr_t)(intptr_t)rule.cfa_off;
  else if (have && rule.kind == CPROF__CFI_PLT)
    return 1;
  else
    cfa = f + 16;
  if (cfa <= sp || cfa - sp > CPROF__STACK_MAX_STEP) return 0;
  return view_read(v, floor, cfa - 8, &ret2) && after_call(v, idx, ret2, &t2);
}

/*
 * The frame pointer of the frame r is in, for a walk that starts from a pc
 * and a stack pointer alone (/proc/self/task/TID/syscall gives no other
 * register): an aligned word x above sp that holds the frame record
 * {saved frame pointer, return address} of the function holding r->pc.
 * The function's locals lie between sp and its record, and they can hold
 * stale records of frames that used that memory before the function was
 * called, so candidates are ranked: the first whose return address follows
 * a direct call to the very first address of the function (fs, when the
 * caller supplied it for this pc) wins at once; otherwise the direct call
 * whose target is nearest pc (within 64 KiB: a function's split-off part,
 * .part.0 or .cold, may lie on either side of the entry a call names);
 * otherwise the first that follows an indirect call (the scan stops 4 KiB
 * past the first direct candidate). Every candidate but the first kind
 * must lead one frame further (record_leads_on). Words below sp are never
 * read. Returns 0 when there is no candidate within RECOVER_SCAN bytes.
 */
#define RECOVER_NEAR ((uintptr_t)64 << 10)
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static int recover_fp(stack_view *v,
                                             const cprof__cfi_index *idx,
                                             regs *r) {
  uintptr_t sp = r->sp, lim = sp + RECOVER_SCAN;
  if (lim < sp) return 0;
  cprof__stack_copy *c = v->is_remote ? v->remote : NULL;
  uintptr_t fs = c && c->fs_pc == r->pc ? c->fs : 0;
  if (c && !fs) {
    c->want_pc = r->pc;
    if (c->first_pass) return 0;
  }
  uintptr_t near = 0, near_d = RECOVER_NEAR + 1, indirect = 0;
  for (uintptr_t x = (sp + 7) & ~(uintptr_t)7; x + 16 <= lim; x += 8) {
    uintptr_t f, ret, target;
    if (!view_read(v, sp, x, &f) || !view_read(v, sp, x + 8, &ret)) break;
    /* A direct candidate found: only a little further is worth a look. */
    if (near && x - near > 4096) break;
    if (!after_call(v, idx, ret, &target)) continue;
    if (target && target == fs) {
      near = x;
      break;
    }
    uintptr_t d = target > r->pc ? target - r->pc : r->pc - target;
    if (target ? d >= near_d : indirect != 0) continue;
    if (!record_leads_on(v, idx, sp, x, f, ret)) continue;
    if (target) {
      near = x;
      near_d = d;
    } else {
      indirect = x;
    }
  }
  uintptr_t x = near ? near : indirect;
  if (!x) return 0;
  r->fp = x;
  r->fp_unknown = 0;
  return 1;
}
#else
CPROF__SIGNAL_SAFE static int recover_fp(stack_view *v, const cprof__cfi_index *idx, regs *r) {
  (void)v;
  (void)idx;
  (void)r;
  return 0;
}
#endif

/* CPROF__FOREIGN_* bits, set by a walk that meets code outside every
 * object the tables know; written only when a bit is clear, so walks
 * through JIT code do not all write one cache line. */
static atomic_uint foreign_seen;
#define FOREIGN_ALL \
  (CPROF__FOREIGN_TABLES | CPROF__FOREIGN_NAMES | CPROF__FOREIGN_HEAP)

static _Atomic(_Atomic int *) foreign_word;

void cprof__stack_foreign_wake(_Atomic int *word) {
  atomic_store(&foreign_word, word);
}

CPROF__SIGNAL_SAFE static inline void note_foreign(void) {
  if (atomic_load_explicit(&foreign_seen, memory_order_relaxed) == FOREIGN_ALL)
    return;
  unsigned old = atomic_fetch_or_explicit(&foreign_seen, FOREIGN_ALL,
                                          memory_order_relaxed);
  _Atomic int *w = atomic_load_explicit(&foreign_word, memory_order_relaxed);
  if (!(old & CPROF__FOREIGN_NAMES) && w) {
    atomic_fetch_add(w, 1);
    cprof__sys4(SYS_futex, (long)(uintptr_t)w, FUTEX_WAKE_PRIVATE, INT_MAX, 0);
  }
}

/* At most this many signal frames in one stack: each moves the stack
 * pointer wherever the interrupted code was, so it is the one step that
 * does not climb. */
#define MAX_SIGNAL_FRAMES 8

/*
 * The walk. Each frame is stepped by its CFI row where the loaded object's
 * table has one, by the frame-pointer record otherwise (and, in an
 * interrupted frame, by the leaf rule first). The loop runs at most
 * max + skip + MAX_SIGNAL_FRAMES times, since every iteration but a signal
 * frame's emits a frame or stops.
 */
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static void walk_regs(walk_out *o, regs r,
                                             const stack_view *remote) {
  int mode = atomic_load_explicit(&unwind_mode, memory_order_relaxed);
  const cprof__cfi_index *idx =
      mode == CPROF__UNWIND_FP ? NULL : cprof__cfi_read_begin();
  stack_view v;
  v.is_remote = remote ? remote->is_remote : 0;
  v.remote = remote ? remote->remote : NULL;
  view_init(&v, r.sp);
  memo_walk memo = {0};
  if (idx && !remote) memo_begin(&memo);
  int signals = 0, first = 1;
  for (;;) {
    cprof__cfi_rule rule;
    int have = idx && memo_rule(&memo, idx, r.sp, r.pc, &rule);
    /* With tables, a frame outside every loaded object is code no file
     * backs (a JIT compiler's, or a file's code mapped a second time, as
     * V8 maps its builtins) only when its return address follows a call
     * instruction; anything else is a data word followed as a frame
     * pointer, and the walk ends before it. Such code keeps frame
     * pointers (it has no CFI to be walked by), so the walk goes on by
     * its frame record, as perf's does. The first frame is kept: it is the
     * pc the thread was at, or the interposer's own call site. */
    if (idx && !have && !cprof__cfi_code_range(idx, r.pc, NULL, NULL)) {
      note_foreign();
#if defined(__x86_64__)
      uintptr_t target;
      if (!first && !r.interrupted && !after_call(&v, NULL, r.pc + 1, &target))
        break;
#else
      if (!first && !r.interrupted) break;
#endif
    }
#if defined(__x86_64__)
    if (have && rule.kind == CPROF__CFI_SIGNAL) {
      regs next;
      if (++signals > MAX_SIGNAL_FRAMES || !signal_step(&v, &r, &next)) break;
      next.interrupted = 1;
      r = next;
      view_init(&v, r.sp);
      continue;
    }
#endif
    if (!emit(o, r.pc)) break;
    first = 0;
    if (have && rule.kind == CPROF__CFI_END) break;
    regs next = {0, 0, 0, 0, 0};
    int stepped = 0;
    /* A frame that needs the frame pointer, in a walk that does not know
     * it: found on the stack (when it is not, the step below fails, but
     * for an interrupted frame's leaf rule). */
    if (r.fp_unknown &&
        (!have || (rule.kind != CPROF__CFI_RSP && rule.kind != CPROF__CFI_PLT &&
                   rule.kind != CPROF__CFI_END)))
      recover_fp(&v, idx, &r);
#if defined(__x86_64__)
    if (have && (rule.kind == CPROF__CFI_RSP || rule.kind == CPROF__CFI_RBP ||
                 rule.kind == CPROF__CFI_PLT)) {
      stepped = cfi_step(&v, &r, &rule, &next);
      if (!stepped) break;
    } else if (r.interrupted && mode != CPROF__UNWIND_CFI) {
      uintptr_t ret = leaf_return(r.pc, r.sp);
      if (ret) {
        next = (regs){ret, r.sp + 8, r.fp, 0, r.fp_unknown};
        stepped = 1;
      }
    }
    if (!stepped && have && mode == CPROF__UNWIND_CFI) break;
#endif
    if (!stepped && !fp_step(&v, &r, &next)) break;
    if (next.pc < CPROF__MIN_RETURN) break;
    r = (regs){next.pc - 1, next.sp, next.fp, 0, next.fp_unknown};
  }
  memo_end(&memo);
  if (idx) cprof__cfi_read_end(idx);
}

bool cprof__stack_foreign_take(unsigned who) {
  return (atomic_load_explicit(&foreign_seen, memory_order_relaxed) & who) &&
         (atomic_fetch_and_explicit(&foreign_seen, ~who,
                                    memory_order_relaxed) & who);
}

CPROF__SIGNAL_SAFE size_t cprof__stack_walk_from(uintptr_t pc, uintptr_t fp, uintptr_t sp,
                              uintptr_t *pcs, size_t max) {
  if (max == 0) return 0;
  int saved = errno;
  walk_out o = {pcs, max, 0, 0};
  walk_regs(&o, (regs){pc, sp, fp, 0, 0}, NULL);
  errno = saved;
  return o.n;
}

size_t cprof__stack_walk_remote(uintptr_t pc, uintptr_t sp, uintptr_t fp,
                                int after_syscall,
                                cprof__stack_copy *copy, uintptr_t *pcs,
                                size_t max) {
  if (max == 0) return 0;
  int saved = errno;
  walk_out o = {pcs, max, 0, 0};
  stack_view remote;
  memset(&remote, 0, sizeof remote);
  remote.is_remote = 1;
  remote.remote = copy;
  /* A thread in a system call resumes after the instruction that made it:
   * that pc is recorded (and its rule looked up) as pc - 1, as a return
   * address is, so it names the system call's own instruction. */
  regs r = {after_syscall && pc ? pc - 1 : pc, sp, fp, !after_syscall,
            fp == 0};
  walk_regs(&o, r, &remote);
  errno = saved;
  return o.n;
}

#if defined(__x86_64__)
/* Reads the 8 bytes at addr, which may be code of a library another thread
 * is unloading: cprof__safe_read copies it or fails, never faults. pid is
 * the process's, or 0 (see cprof__safe_read_in). */
CPROF__SIGNAL_SAFE static int read_word(pid_t pid, uintptr_t addr,
                                        uintptr_t *out) {
  return cprof__safe_read_in(pid, addr, out, sizeof *out);
}

/* The function a call instruction ending at ret calls: a direct call
 * (E8 rel32, through a PLT stub when the stub's jump can be read) or a call
 * through a rip-relative pointer (FF 15 disp32, as -fno-plt emits). b is
 * the 8 bytes before ret. *slot is where a target read from a pointer slot
 * came from (its value may change: a lazily bound or rebound GOT entry),
 * 0 when the target is in the code itself, 1 when a PLT stub's bytes could
 * not be read (the target named is the stub). 0 when the bytes before ret
 * are not such a call. */
CPROF__SIGNAL_SAFE static uintptr_t call_target(pid_t pid, uintptr_t ret,
                                                const unsigned char *b,
                                                uintptr_t *slot) {
  uintptr_t target;
  int32_t disp;
  *slot = 0;
  if (b[3] == 0xe8) {
    memcpy(&disp, b + 4, 4);
    target = ret + (uintptr_t)(intptr_t)disp;
    /* A PLT stub: [endbr64] [bnd] jmp *disp32(%rip), at most 12 bytes,
     * read at once (or 8, then the rest, at the end of a mapping). */
    unsigned char c[16];
    size_t got = 16;
    if (!cprof__safe_read_in(pid, target, c, got)) {
      got = 8;
      if (!cprof__safe_read_in(pid, target, c, got)) {
        *slot = 1;
        return target;
      }
    }
    size_t at = 0;
    if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) at = 4;
    if (c[at] == 0xf2) at++;
    if (at + 2 <= 8 && c[at] == 0xff && c[at + 1] == 0x25) {
      uintptr_t tail, value;
      if (at + 6 <= got) {
        memcpy(&disp, c + at + 2, 4);
      } else if (read_word(pid, target + at + 2, &tail)) {
        memcpy(&disp, &tail, 4);
      } else {
        *slot = 1;
        return target;
      }
      uintptr_t where = target + at + 6 + (uintptr_t)(intptr_t)disp;
      if (read_word(pid, where, &value)) {
        *slot = where;
        return value;
      }
      *slot = 1;
    }
    return target;
  }
  /* FF 15 disp32: six bytes, the opcode at ret - 6 (b[2]). */
  if (b[2] == 0xff && b[3] == 0x15) {
    memcpy(&disp, b + 4, 4);
    uintptr_t where = ret + (uintptr_t)(intptr_t)disp, value;
    if (!read_word(pid, where, &value)) return 0;
    *slot = where;
    return value;
  }
  return 0;
}

/*
 * A sample that lands in a function that has not set up a frame (gcc omits
 * the frame pointer in leaf functions even with -fno-omit-frame-pointer,
 * and every function lacks one at its first instruction) finds rbp still
 * naming the caller's caller, so the chain would skip the caller. Its
 * return address is then at [sp]. That word is trusted only when the
 * instruction before it is a call whose target is the function holding pc
 * (at most 1 MiB below it), which a local variable will not imitate.
 * Returns the return address, or 0.
 */
CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM static uintptr_t leaf_return(uintptr_t pc,
                                                    uintptr_t sp) {
  uintptr_t hi = tls_hi, lo = tls_lo, ret;
  if (sp & 7) return 0;
  if (hi != 0 && sp >= lo && sp + 8 <= hi) {
    ret = *(const uintptr_t *)sp;
  } else if (!read_word(0, sp, &ret)) {
    return 0;
  }
  if (ret < CPROF__MIN_RETURN) return 0;
  unsigned char b[8];
  uintptr_t slot;
  if (!cprof__safe_read(ret - 8, b, sizeof b)) return 0;
  uintptr_t target = call_target(0, ret, b, &slot);
  if (target == 0 || target > pc || pc - target > CPROF__STACK_MAX_STEP)
    return 0;
  return ret;
}
#endif

CPROF__SIGNAL_SAFE size_t cprof__stack_walk_ucontext(const void *ucontext, uintptr_t *pcs,
                                  size_t max) {
  const ucontext_t *uc = ucontext;
  if (!uc || max == 0) return 0;
  int saved = errno;
  walk_out o = {pcs, max, 0, 0};
#if defined(__x86_64__)
  walk_regs(&o, (regs){(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                       (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                       (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], 1, 0},
            NULL);
#elif defined(__aarch64__)
  walk_regs(&o, (regs){(uintptr_t)uc->uc_mcontext.pc,
                       (uintptr_t)uc->uc_mcontext.sp,
                       (uintptr_t)uc->uc_mcontext.regs[29], 1, 0},
            NULL);
#endif
  errno = saved;
  return o.n;
}

CPROF__SIGNAL_SAFE size_t cprof__stack_walk_here(uintptr_t *pcs, size_t max, size_t skip) {
  if (max == 0) return 0;
  int saved = errno;
  /* Our own record's return address is the call site in our caller, so
   * walking from our frame starts with the caller, as promised. A skip
   * larger than the deepest stack cprof keeps would only burn time. */
  const uintptr_t *frame = __builtin_frame_address(0);
  walk_out o = {pcs, max, 0, skip > CPROF__MAX_DEPTH ? CPROF__MAX_DEPTH : skip};
  walk_regs(&o,
            (regs){strip_return(frame[1]) - 1, (uintptr_t)(frame + 2),
                   frame[0], 0, 0},
            NULL);
  errno = saved;
  return o.n;
}
