/*
 * Reading a thread without touching it: its state and, when it is stopped
 * in the kernel, its pc, stack pointer and system call, from
 * /proc/self/task/TID/{stat,syscall}; and a table of
 * what cprof knows of each thread it saw start (the stack that created it,
 * and whether it is one of cprof's own). The goroutine profile is built on
 * it: a thread that is blocked is read here and never sent a signal.
 *
 * Everything but the table's note/forget/lookup is normal context; those
 * three are lock-free and allocation-free.
 */
#ifndef CPROF_TASKREAD_H
#define CPROF_TASKREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <signal.h>
#include <time.h>

#include "base/internal.h"

/* What /proc says of one thread. */
typedef struct cprof__task {
  char state;       /* stat's state letter (R, S, D, T, t, Z...), '?' */
  bool running;     /* syscall said "running": on a CPU or runnable */
  bool stopped;     /* stopped in the kernel: sp and pc are valid */
  long nr;          /* the system call it waits in, or -1 for none */
  uintptr_t sp, pc; /* user stack pointer and pc, when stopped */
  bool refused;     /* the kernel refused the syscall file (a process
                       that is not dumpable): state from stat alone */
} cprof__task;

/* Reads tid's syscall file under dirfd (an open /proc/self/task), and its
 * stat file only when the syscall file does not tell the state: a thread
 * stopped in a system call has state '?' (cprof__task_state gives it).
 * When the syscall file is refused (EACCES or EPERM: the process made
 * itself not dumpable, and the file is its owner's only while it is
 * dumpable) the state comes from the stat file, running is set for 'R',
 * stopped is never set, and refused is. Returns 0, or -1 when the thread
 * is gone or neither file can be read. */
CPROF__HIDDEN int cprof__task_read(int dirfd, pid_t tid, cprof__task *out);

/* How long ago, in ms, thread tid started (its stat's starttime, in
 * clock ticks since boot); -1 when unknown. dirfd is an open
 * /proc/self/task, or AT_FDCWD. */
CPROF__HIDDEN long cprof__task_age_ms(int dirfd, pid_t tid);

/* 1 when thread tid has spent any time on a CPU (its schedstat), 0 when
 * it has not run yet (a thread just created, waiting for its first CPU),
 * -1 when that cannot be read. Normal context. */
CPROF__HIDDEN int cprof__task_has_run(int dirfd, pid_t tid);

/* Thread tid's time on a CPU so far, in ns (its schedstat; the kernel
 * brings a running thread's up to date at its ticks), or -1 when that
 * cannot be read. Normal context. */
CPROF__HIDDEN long long cprof__task_cpu_ns(int dirfd, pid_t tid);

/* tid's state letter from its stat file, or '?'; and, when name is not
 * NULL, its name (the kernel's comm, as in /proc/.../comm), or "". */
CPROF__HIDDEN char cprof__task_state(int dirfd, pid_t tid, char *name,
                                     size_t size);


/* glibc before 2.41 names the target thread of SIGEV_THREAD_ID only by
 * its union member. */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* The clock of another thread of this process, by tid: the kernel's
 * MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED). */
static inline clockid_t cprof__thread_cpu_clock(pid_t tid) {
  return (clockid_t)((~(unsigned)tid << 3) | 6);
}

/* Asks tid for signal signo the next time it runs user code, never while
 * it waits in the kernel: a one-shot timer on the thread's own CPU clock,
 * 1 ns ahead, so the kernel raises it at a tick while the thread is on a
 * CPU (with CONFIG_POSIX_CPU_TIMERS_TASK_WORK, at the thread's return to
 * user mode, where it interrupts no system call). A thread that blocks
 * first is never signalled. Returns 0 and the timer, to be deleted with
 * timer_delete once the answer came or was given up; -1 with errno when
 * the timer cannot be made (the thread is gone, or the queue of pending
 * signals is full). The caller checks first that timer_create may be
 * called (cprof__timer_create_allowed: a seccomp filter may kill for it),
 * once for the timers it makes. */
CPROF__HIDDEN int cprof__task_ask_on_cpu(pid_t tid, int signo, timer_t *out);

/* The name of system call nr ("nanosleep", "futex"...), or NULL. */
CPROF__HIDDEN const char *cprof__syscall_name(long nr);

/* A state letter as a word: running, sleeping, disk wait, stopped... */
CPROF__HIDDEN const char *cprof__task_state_name(char state);

/* The table of threads cprof saw start. note records that tid was created
 * from stack create_sid (CPROF__TASK_NO_STACK when unknown) and whether it
 * is one of cprof's own threads; exiting marks that the thread is on its
 * way out (it stays known until its tid is gone and the slot is taken).
 * lookup returns false for a thread cprof never saw. Lock-free. */
#define CPROF__TASK_NO_STACK UINT32_MAX
CPROF__HIDDEN void cprof__task_note(pid_t tid, uint32_t create_sid, bool own);
CPROF__HIDDEN void cprof__task_exiting(pid_t tid);
CPROF__HIDDEN bool cprof__task_lookup(pid_t tid, uint32_t *create_sid,
                                      bool *own);

/* The frame of the public function (cprof_profile_write, cprof_profilez)
 * through which the calling thread asked for a profile: the goroutine
 * profile shows that thread's stack from its caller on, without cprof's
 * own frames. NULL when not inside one. */
CPROF__HIDDEN extern __thread void *cprof__task_entry_frame CPROF__TLS;
#define CPROF__TASK_ENTER(saved)                                  \
  void *saved = cprof__task_entry_frame;                          \
  if (!saved) cprof__task_entry_frame = __builtin_frame_address(0)
#define CPROF__TASK_LEAVE(saved) (cprof__task_entry_frame = (saved))

#endif
