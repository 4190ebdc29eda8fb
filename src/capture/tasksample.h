/*
 * A running thread's registers and the top of its stack, taken by the
 * kernel without a signal: a perf event on the thread's task clock
 * (user space only) whose first sample carries its user registers and a
 * copy of its stack, written into a ring buffer cprof maps. The thread
 * notices nothing but a timer interrupt; a sample is taken only when the
 * interrupt finds it running user code, so it is never cut short in a
 * system call. Where the kernel refuses perf events
 * (kernel.perf_event_paranoid above 2, no CONFIG_PERF_EVENTS), where a
 * seccomp filter is on (its action for the call might be to kill the
 * process), or where CPROF_PERF_EVENTS=0 says so, open fails and the
 * caller asks the thread another way. Normal context only.
 */
#ifndef CPROF_TASKSAMPLE_H
#define CPROF_TASKSAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/internal.h"

/* Bytes of stack each sample copies (deeper words are read live). */
#define CPROF__TASK_SAMPLE_STACK 8192

typedef struct cprof__task_sampler {
  int fd;
  void *ring;
  size_t ring_size;
} cprof__task_sampler;

/* One sample: the thread's pc (an interrupted instruction), stack pointer
 * and frame pointer, and the copy of its stack from sp up (stack points
 * into the ring: valid until close). */
typedef struct cprof__task_regs {
  uintptr_t pc, sp, fp;
  const void *stack;
  size_t stack_len;
} cprof__task_regs;

/* Whether perf events may be tried at all (CPROF_PERF_EVENTS, and no
 * refusal seen yet). */
CPROF__HIDDEN bool cprof__task_sample_enabled(void);

/* Reads CPROF_PERF_EVENTS (once; init calls it at load, so a bad value is
 * reported then). */
CPROF__HIDDEN void cprof__task_sample_env_init(void);

/* Starts sampling thread tid: 0, or -1 with errno. A refusal that will
 * not change (EACCES, EPERM, ENOSYS, ENOENT, EINVAL, EOPNOTSUPP) turns
 * perf events off for the process. */
CPROF__HIDDEN int cprof__task_sample_open(pid_t tid, cprof__task_sampler *s);

/* 1 when the sample is in (out filled), 0 when not yet. */
CPROF__HIDDEN int cprof__task_sample_get(const cprof__task_sampler *s,
                                         cprof__task_regs *out);

CPROF__HIDDEN void cprof__task_sample_close(cprof__task_sampler *s);

#endif
