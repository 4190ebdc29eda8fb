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

#include "base/internal.h"

/* What /proc says of one thread. */
typedef struct cprof__task {
  char state;       /* stat's state letter (R, S, D, T, t, Z...), '?' */
  bool running;     /* syscall said "running": on a CPU or runnable */
  bool stopped;     /* stopped in the kernel: sp and pc are valid */
  long nr;          /* the system call it waits in, or -1 for none */
  uintptr_t sp, pc; /* user stack pointer and pc, when stopped */
} cprof__task;

/* Reads tid's stat and syscall files under dirfd (an open
 * /proc/self/task). Returns 0, or -1 when the thread is gone or the files
 * cannot be read. */
CPROF__HIDDEN int cprof__task_read(int dirfd, pid_t tid, cprof__task *out);

/* Reads only the syscall file: true when tid is still "running". */
CPROF__HIDDEN bool cprof__task_still_running(int dirfd, pid_t tid);

/* The name of system call nr ("nanosleep", "futex"...), or NULL. */
CPROF__HIDDEN const char *cprof__syscall_name(long nr);

/* A state letter as a word: running, sleeping, disk wait, stopped... */
CPROF__HIDDEN const char *cprof__task_state_name(char state);

/* The table of threads cprof saw start. note records that tid was created
 * from stack create_sid (CPROF__TASK_NO_STACK when unknown) and whether it
 * is one of cprof's own threads; forget drops it when the thread exits.
 * lookup returns false for a thread cprof never saw. Lock-free. */
#define CPROF__TASK_NO_STACK UINT32_MAX
CPROF__HIDDEN void cprof__task_note(pid_t tid, uint32_t create_sid, bool own);
CPROF__HIDDEN void cprof__task_forget(pid_t tid);
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
