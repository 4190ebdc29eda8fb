/*
 * The fault-free reader (saferead.h): process_vm_readv on the process
 * itself where the kernel allows it, page probes and a copy where it does
 * not. Calls nothing but raw system calls; async-signal-safe.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/sys.h"
#include "capture/saferead.h"

CPROF__SIGNAL_SAFE int cprof__stack_readable(uintptr_t addr) {
  int saved = errno;
  int ok = cprof__probe8(addr);
  /* [addr, addr + 16) may straddle a page boundary. */
  if (ok && (addr & ~(CPROF__PAGE - 1)) != ((addr + 15) & ~(CPROF__PAGE - 1)))
    ok = addr + 8 > addr && cprof__probe8(addr + 8);
  errno = saved;
  return ok;
}

/* 0 until process_vm_readv is known to work on this system, 1 when it
 * does, -1 when it does not (a seccomp filter, an old kernel). */
static _Atomic int vm_read_state;

CPROF__SIGNAL_SAFE int cprof__safe_read(uintptr_t addr, void *out,
                                        size_t len) {
  return cprof__safe_read_in(0, addr, out, len);
}

CPROF__SIGNAL_SAFE CPROF__NO_SANITIZE_MEM int cprof__safe_read_in(
    pid_t pid, uintptr_t addr, void *out, size_t len) {
  if (addr < CPROF__PAGE || addr + len < addr || len > 64) return 0;
  int saved = errno;
  int ok = 0;
  int state = atomic_load_explicit(&vm_read_state, memory_order_relaxed);
  if (state >= 0) {
    /* The kernel copies the bytes or reports EFAULT: a library unmapped
     * between any check and the copy cannot fault the handler. */
    struct iovec local = {out, len}, remote = {(void *)addr, len};
    long n = cprof__sys6(SYS_process_vm_readv,
                         pid ? pid : cprof__sys4(SYS_getpid, 0, 0, 0, 0),
                         (long)&local, 1L, (long)&remote, 1L, 0L);
    if (n == (long)len) {
      ok = 1;
      if (state == 0)
        atomic_store_explicit(&vm_read_state, 1, memory_order_relaxed);
    } else if (n < 0 && n != -EFAULT && state == 0) {
      atomic_store_explicit(&vm_read_state, -1, memory_order_relaxed);
      state = -1;
    }
  }
  if (state < 0) {
    /* Without it: probe every page the bytes touch, then copy. */
    uintptr_t last = addr + len - 1;
    ok = cprof__probe8(addr & ~(uintptr_t)7) &&
         ((addr & ~(CPROF__PAGE - 1)) == (last & ~(CPROF__PAGE - 1)) ||
          cprof__probe8(last & ~(uintptr_t)7));
    if (ok) memcpy(out, (const void *)addr, len);
  }
  errno = saved;
  return ok;
}
