/*
 * The frame-pointer walker. It owns each thread's cached stack bounds and the
 * page probe. Everything but cprof__stack_register_thread() runs in signal
 * context: it must never take a lock, allocate, touch memory it has not
 * validated, or leave errno changed. It may call only syscall() (for the
 * probe) and read its own thread-local bounds, which use the initial-exec TLS
 * model so that reading them never enters the dynamic loader.
 *
 * A frame is the pair {saved frame pointer, return address} at the frame
 * pointer, on x86-64 and on AArch64 alike. Each step is validated before the
 * pair is read: the frame pointer must be aligned, no lower than the stack
 * pointer or the end of the previous frame record (so the chain strictly
 * increases and cannot loop), within CPROF__STACK_MAX_STEP of the previous
 * frame, and inside the thread's stack when its bounds are known. When they
 * are not (a thread cprof never saw, or a stack pointer outside the cached
 * bounds, such as an alternate signal stack or a coroutine's stack), every
 * page is probed before it is read.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "mem.h"
#include "stack.h"

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

/* The smallest page size Linux uses. Probing at this granularity stays
 * correct where pages are larger (AArch64 with 16 or 64 KiB pages); it only
 * probes more often than needed. */
#define CPROF__PAGE ((uintptr_t)4096)

/*
 * The walker reads words it has validated as mapped but which belong to
 * other functions' frames (or, given a garbage chain, to anything mapped):
 * AddressSanitizer would report the redzones and fake stacks it passes
 * through, and ThreadSanitizer the reads of memory other threads write,
 * although no such read can fault or change what the walker trusts.
 */
#define CPROF__NO_SANITIZE_MEM __attribute__((no_sanitize("address", "thread")))

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

/*
 * One probe: the kernel copies the 8-byte signal set at addr before it looks
 * at `how`, so an invalid `how` turns the call into a pure read check that
 * fails with EFAULT when addr is unreadable and EINVAL otherwise, without
 * ever changing the signal mask. Any other outcome (a seccomp filter, say)
 * counts as unreadable. The caller saves errno.
 */
static int probe8(uintptr_t addr) {
  long r = syscall(SYS_rt_sigprocmask, ~0, (void *)addr, (void *)0,
                   (size_t)8);
  return r == -1 && errno == EINVAL;
}

int cprof__stack_readable(uintptr_t addr) {
  int saved = errno;
  int ok = probe8(addr);
  /* [addr, addr + 16) may straddle a page boundary. */
  if (ok && (addr & ~(CPROF__PAGE - 1)) != ((addr + 15) & ~(CPROF__PAGE - 1)))
    ok = addr + 8 > addr && probe8(addr + 8);
  errno = saved;
  return ok;
}

/* A walk's memory of the last page found readable: one page, one probe. */
typedef struct {
  uintptr_t page; /* 0 when none yet: page 0 is never readable anyway */
} probe_cache;

static int page_readable(probe_cache *c, uintptr_t addr) {
  uintptr_t page = addr & ~(CPROF__PAGE - 1);
  if (page == 0) return 0;
  if (page == c->page) return 1;
  if (!probe8(page)) return 0;
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
static int emit(walk_out *o, uintptr_t pc) {
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

static inline uintptr_t strip_return(uintptr_t ret) {
#if defined(__aarch64__)
  /* Pointer authentication keeps a signature in the top bits of a saved
   * link register; user addresses fit in 48 bits. */
  return ret & (((uintptr_t)1 << 48) - 1);
#else
  return ret;
#endif
}

/*
 * Follows the chain from fp, no frame lower than sp. The loop runs at most
 * max + skip times, since every iteration either emits a frame or stops.
 */
CPROF__NO_SANITIZE_MEM static void walk_chain(walk_out *o, uintptr_t fp,
                                              uintptr_t sp) {
  const uintptr_t word = sizeof(void *);
  /* hi is read first and written last, so a nonzero hi has its lo. */
  uintptr_t hi = tls_hi;
  atomic_signal_fence(memory_order_seq_cst);
  uintptr_t lo = tls_lo;
  int known = hi != 0 && sp >= lo && sp < hi;
  probe_cache cache = {0};
  uintptr_t lower = sp; /* the lowest address the next record may be at */
  uintptr_t prev = sp;  /* where the step is measured from */

  for (;;) {
    if (fp & (word - 1)) return;
    if (fp < lower) return;
    if (fp - prev > CPROF__STACK_MAX_STEP) return;
    if (fp + 2 * word < fp) return;
    if (known) {
      /* The stack is mapped from the stack pointer to its top. */
      if (fp + 2 * word > hi) return;
    } else {
      if (!page_readable(&cache, fp)) return;
      if (!page_readable(&cache, fp + word)) return;
    }
    const uintptr_t *frame = (const uintptr_t *)fp;
    uintptr_t next = frame[0];
    uintptr_t ret = strip_return(frame[1]);
    if (ret < CPROF__MIN_RETURN) return;
    if (!emit(o, ret - 1)) return;
    lower = fp + 2 * word;
    prev = fp;
    fp = next;
  }
}

size_t cprof__stack_walk_from(uintptr_t pc, uintptr_t fp, uintptr_t sp,
                              uintptr_t *pcs, size_t max) {
  if (max == 0) return 0;
  int saved = errno;
  walk_out o = {pcs, max, 0, 0};
  if (emit(&o, pc)) walk_chain(&o, fp, sp);
  errno = saved;
  return o.n;
}

#if defined(__x86_64__)
/* Reads the 8 bytes at addr if they can be read; a probe costs one system
 * call, so callers use it only for the few words outside the stack. */
CPROF__NO_SANITIZE_MEM static int read_word(uintptr_t addr, uintptr_t *out) {
  if (addr < CPROF__PAGE || !cprof__stack_readable(addr)) return 0;
  memcpy(out, (const void *)addr, sizeof *out);
  return 1;
}

/* The function a call instruction ending at ret calls: a direct call
 * (E8 rel32, through a PLT stub when the stub's jump can be read) or a call
 * through a rip-relative pointer (FF 15 disp32, as -fno-plt emits). 0 when
 * the bytes before ret are not such a call. */
static uintptr_t call_target(uintptr_t ret) {
  uintptr_t before, target;
  if (!read_word(ret - 8, &before)) return 0;
  const unsigned char *b = (const unsigned char *)&before; /* b[7] = ret-1 */
  int32_t disp;
  if (b[3] == 0xe8) {
    memcpy(&disp, b + 4, 4);
    target = ret + (uintptr_t)(intptr_t)disp;
    /* A PLT stub: [endbr64] [bnd] jmp *disp32(%rip). */
    uintptr_t stub;
    if (!read_word(target, &stub)) return target;
    const unsigned char *c = (const unsigned char *)&stub;
    size_t at = 0;
    if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) at = 4;
    if (c[at] == 0xf2) at++;
    if (at + 2 <= 8 && c[at] == 0xff && c[at + 1] == 0x25) {
      uintptr_t tail, slot;
      if (!read_word(target + at + 2, &tail)) return target;
      memcpy(&disp, &tail, 4);
      if (read_word(target + at + 6 + (uintptr_t)(intptr_t)disp, &slot))
        return slot;
    }
    return target;
  }
  if (b[1] == 0xff && b[2] == 0x15) {
    memcpy(&disp, b + 3, 4);
    uintptr_t slot;
    return read_word(ret + (uintptr_t)(intptr_t)disp, &slot) ? slot : 0;
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
CPROF__NO_SANITIZE_MEM static uintptr_t leaf_return(uintptr_t pc,
                                                    uintptr_t sp) {
  uintptr_t hi = tls_hi, lo = tls_lo, ret;
  if (sp & 7) return 0;
  if (hi != 0 && sp >= lo && sp + 8 <= hi) {
    ret = *(const uintptr_t *)sp;
  } else if (!read_word(sp, &ret)) {
    return 0;
  }
  if (ret < CPROF__MIN_RETURN) return 0;
  uintptr_t target = call_target(ret);
  if (target == 0 || target > pc || pc - target > CPROF__STACK_MAX_STEP)
    return 0;
  return ret;
}
#endif

size_t cprof__stack_walk_ucontext(const void *ucontext, uintptr_t *pcs,
                                  size_t max) {
  const ucontext_t *uc = ucontext;
  if (!uc || max == 0) return 0;
#if defined(__x86_64__)
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
  uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  int saved = errno;
  walk_out o = {pcs, max, 0, 0};
  uintptr_t ret = leaf_return(pc, sp);
  if (emit(&o, pc) && (!ret || emit(&o, ret - 1)))
    walk_chain(&o, fp, ret ? sp + 8 : sp);
  errno = saved;
  return o.n;
#elif defined(__aarch64__)
  return cprof__stack_walk_from((uintptr_t)uc->uc_mcontext.pc,
                                (uintptr_t)uc->uc_mcontext.regs[29],
                                (uintptr_t)uc->uc_mcontext.sp, pcs, max);
#else
  (void)pcs;
  return 0;
#endif
}

size_t cprof__stack_walk_here(uintptr_t *pcs, size_t max, size_t skip) {
  if (max == 0) return 0;
  int saved = errno;
  /* Our own record's return address is the call site in our caller, so
   * walking from our frame starts with the caller, as promised. A skip
   * larger than the deepest stack cprof keeps would only burn time. */
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  walk_out o = {pcs, max, 0, skip > CPROF__MAX_DEPTH ? CPROF__MAX_DEPTH : skip};
  walk_chain(&o, fp, fp);
  errno = saved;
  return o.n;
}
