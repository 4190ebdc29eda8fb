/*
 * Raw system calls for signal handlers. A handler that calls libc's
 * syscall() goes through the PLT, and the first call of a lazily bound
 * symbol enters the dynamic linker's resolver, which saves the whole
 * vector state on the stack (over a kilobyte): too much for a handler that
 * runs on a nearly exhausted stack or a small alternate one, and not
 * async-signal-safe in spirit. These inline the instruction instead. They
 * return the kernel's result: a negative errno value on failure, and never
 * touch errno.
 */
#ifndef CPROF_SYS_H
#define CPROF_SYS_H

#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Always inlined, so that each takes its caller's sanitizer attributes:
 * the heap sampler's callers run before a sanitizer is set up. */
#define CPROF__SYS_INLINE static inline __attribute__((always_inline))

CPROF__SYS_INLINE long cprof__sys6(long n, long a, long b, long c, long d,
                                   long e, long f) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
                     "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
#else
  int saved = errno;
  long r = syscall(n, a, b, c, d, e, f);
  if (r == -1) r = -errno;
  errno = saved;
  return r;
#endif
}

CPROF__SYS_INLINE long cprof__sys4(long n, long a, long b, long c, long d) {
  return cprof__sys6(n, a, b, c, d, 0, 0);
}

/* A zero-filled private anonymous mapping of len bytes (MAP_NORESERVE:
 * pages cost memory only once touched, but address space at once, as
 * `ulimit -v` counts it), or NULL when the kernel refuses. For tables that
 * grow from a signal handler or an allocation path: errno is kept. A
 * sanitized build maps through libc, so that the runtime hears of the
 * mapping (TSan keeps shadow state per address). */
CPROF__SYS_INLINE void *cprof__sys_map(size_t len) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  int saved = errno;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  return p == MAP_FAILED ? NULL : p;
#else
  long r = cprof__sys6(SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return r < 0 && r > -4096 ? NULL : (void *)r;
#endif
}

/* Gives back a mapping cprof__sys_map made (a chunk that lost the race to
 * be published); errno is kept. */
CPROF__SYS_INLINE void cprof__sys_unmap(void *p, size_t len) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  int saved = errno;
  munmap(p, len);
  errno = saved;
#else
  cprof__sys6(SYS_munmap, (long)p, (long)len, 0, 0, 0, 0);
#endif
}

/* The calling thread's id, without libc or errno: for handlers. */
CPROF__SYS_INLINE pid_t cprof__sys_gettid(void) {
  return (pid_t)cprof__sys4(SYS_gettid, 0, 0, 0, 0);
}

#endif
