/*
 * The fault-free reader: bytes at any address copied or refused, never a
 * fault, even while another thread unmaps the memory. The stack walker,
 * the unwind tables' lookup and every handler that must look at memory it
 * does not own read through it. Async-signal-safe; preserves errno.
 */
#ifndef CPROF_SAFEREAD_H
#define CPROF_SAFEREAD_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include "base/internal.h"
#include "base/sys.h"

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
 * One probe: the kernel copies the 8-byte signal set at addr before it looks
 * at `how`, so an invalid `how` turns the call into a pure read check that
 * fails with EFAULT when addr is unreadable and EINVAL otherwise, without
 * ever changing the signal mask. Any other outcome (a seccomp filter, say)
 * counts as unreadable. The caller saves errno.
 */
__attribute__((always_inline)) static inline int cprof__probe8(uintptr_t addr) {
  return cprof__sys4(SYS_rt_sigprocmask, ~0L, (long)addr, 0L, 8L) == -EINVAL;
}

/* Copies len (at most 64) bytes at addr into out, or returns 0 when they
 * cannot be read; never faults, even when another thread unmaps the
 * memory meanwhile (process_vm_readv, or page probes where that call is
 * refused). For code and other memory outside the thread's own stack.
 * Async-signal-safe; preserves errno. */
CPROF__HIDDEN int cprof__safe_read(uintptr_t addr, void *out, size_t len);

/* The same, for a caller that knows the process's id (pid; 0 when it does
 * not): a collector that fork cannot copy midway saves the getpid system
 * call every read would make. */
CPROF__HIDDEN int cprof__safe_read_in(pid_t pid, uintptr_t addr, void *out,
                                      size_t len);

/* True when [addr, addr + 16) can be read without faulting. Signal-safe;
 * preserves errno. Costs one system call. */
CPROF__HIDDEN int cprof__stack_readable(uintptr_t addr);

#endif
