/*
 * Perf-event samples of running threads (tasksample.h). The event is a
 * software task clock with a 20 us period, enabled for one overflow
 * (PERF_EVENT_IOC_REFRESH 1), user space only
 * (exclude_kernel, which kernel.perf_event_paranoid 2 allows for the
 * process's own threads), sampling the thread id, the user registers
 * bp, sp and ip, and CPROF__TASK_SAMPLE_STACK bytes of stack. Its ring is
 * four data pages: the first record lies at offset 0 and never wraps.
 * Every length the kernel wrote is checked against the ring before it is
 * used.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/env.h"
#include "base/proc.h"
#include "capture/tasksample.h"

#define PERIOD_NS 20000
#define DATA_PAGES 4
/* perf's register numbers on x86-64 (asm/perf_regs.h). */
#define REG_BP 6
#define REG_SP 7
#define REG_IP 8

static _Atomic int refused; /* 1: perf events are off for the process */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static pthread_once_t seccomp_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  long long on = 1;
  if (cprof__env_int("CPROF_PERF_EVENTS", 0, 1, "using 1", &on) && on == 0)
    atomic_store(&refused, 1);
}

static void read_seccomp(void) {
  if (cprof__seccomp_filtered()) atomic_store(&refused, 1);
}

void cprof__task_sample_env_init(void) { pthread_once(&env_once, read_env); }

bool cprof__task_sample_enabled(void) {
#if defined(__x86_64__)
  cprof__task_sample_env_init();
  pthread_once(&seccomp_once, read_seccomp);
  return !atomic_load(&refused);
#else
  return false;
#endif
}

int cprof__task_sample_open(pid_t tid, cprof__task_sampler *s) {
  s->fd = -1;
  s->ring = NULL;
  if (!cprof__task_sample_enabled()) {
    errno = ENOTSUP;
    return -1;
  }
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = PERIOD_NS;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER |
                  PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = 1ull << REG_BP | 1ull << REG_SP | 1ull << REG_IP;
  a.sample_stack_user = CPROF__TASK_SAMPLE_STACK;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.exclude_callchain_kernel = 1;
  a.wakeup_events = 1;
  a.disabled = 1; /* enabled below for one sample */
  int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1,
                        PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    /* Refusals that the next thread would meet too (EINVAL: this kernel
     * takes no such event): perf events are off from here on. */
    if (e == EACCES || e == EPERM || e == ENOSYS || e == ENOENT ||
        e == EINVAL || e == EOPNOTSUPP)
      atomic_store(&refused, 1);
    errno = e;
    return -1;
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t size = (1 + DATA_PAGES) * page;
  void *ring = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (ring == MAP_FAILED) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  /* One overflow, then the kernel disables the event itself: the thread
   * pays for one sample, however long the collector takes to read it. No
   * signal goes with it (the event has no owner to signal). */
  if (ioctl(fd, PERF_EVENT_IOC_REFRESH, 1) != 0) {
    int e = errno;
    munmap(ring, size);
    close(fd);
    errno = e;
    return -1;
  }
  s->fd = fd;
  s->ring = ring;
  s->ring_size = size;
  return 0;
}

/* The record's fields in order (sample_type TID | REGS_USER |
 * STACK_USER): pid and tid (u32 each), abi, bp, sp, ip, the stack's size,
 * its bytes, and the size actually copied. */
int cprof__task_sample_get(const cprof__task_sampler *s,
                           cprof__task_regs *out) {
  if (!s->ring) return 0;
  const struct perf_event_mmap_page *meta = s->ring;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  const unsigned char *data = (const unsigned char *)s->ring + page;
  size_t data_size = DATA_PAGES * page;
  if (head > data_size) head = data_size; /* only the first lap is read */
  for (uint64_t off = 0; off + sizeof(struct perf_event_header) <= head;) {
    struct perf_event_header h;
    memcpy(&h, data + off, sizeof h);
    if (h.size < sizeof h || off + h.size > head) return 0;
    if (h.type == PERF_RECORD_SAMPLE) {
      const unsigned char *p = data + off + sizeof h;
      const unsigned char *end = data + off + h.size;
      uint64_t v[5]; /* pid|tid, abi, bp, sp, ip */
      if (p + sizeof v > end) return 0;
      memcpy(v, p, sizeof v);
      p += sizeof v;
      if (v[1] == PERF_SAMPLE_REGS_ABI_NONE) return 0; /* no user regs */
      uint64_t size, dyn = 0;
      if (p + 8 > end) return 0;
      memcpy(&size, p, 8);
      p += 8;
      if (size > (uint64_t)(end - p)) return 0;
      const unsigned char *stack = p;
      if (size > 0) {
        if (p + size + 8 > end) return 0;
        memcpy(&dyn, p + size, 8);
        if (dyn > size) dyn = size;
      }
      out->fp = (uintptr_t)v[2];
      out->sp = (uintptr_t)v[3];
      out->pc = (uintptr_t)v[4];
      out->stack = stack;
      out->stack_len = (size_t)dyn;
      return out->pc != 0 && out->sp != 0;
    }
    off += h.size;
  }
  return 0;
}

/* No PERF_EVENT_IOC_DISABLE first: an event that sampled has disabled
 * itself, close ends one that did not, and the ioctl would interrupt the
 * thread's CPU to do it. */
void cprof__task_sample_close(cprof__task_sampler *s) {
  if (s->ring) munmap(s->ring, s->ring_size);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  s->ring = NULL;
}
