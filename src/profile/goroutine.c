/*
 * The goroutine ("threads") profile (goroutine.h): every thread's stack,
 * collected by thread sampling (source/thread_sample.h), written as Go
 * writes its goroutine profile, with each thread's state, system call,
 * name and creating stack in the debug=2 form.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "capture/stacktab.h"
#include "capture/taskread.h"
#include "encode/symbolize.h"
#include "encode/writer.h"
#include "profile/goroutine.h"
#include "source/thread_sample.h"

/* "\tfile:line +0xoff\n" as a Go traceback prints a frame's location; an
 * object and no line where the line is unknown (no ":0"). */
static int write_location(cprof_buf *out, const cprof__sym_result *r,
                          const cprof__sym_frame *fr, bool offset,
                          unsigned long long off) {
  int err;
  if (fr->line > 0 && fr->file[0]) {
    err = cprof__buf_printf(out, "\t%s:%d", fr->file, fr->line);
  } else {
    const cprof__sym_mapping *m =
        r->mapping >= 0 ? cprof__sym_mapping_at((size_t)r->mapping) : NULL;
    err = cprof__buf_printf(out, "\t%s", m && m->path[0] ? m->path : "?");
  }
  if (!err && offset) err = cprof__buf_printf(out, " +%#llx", off);
  return err ? err : cprof__buf_printf(out, "\n");
}

/* Frame k of pcs as a Go traceback prints it: "func(...)" then
 * "\tfile:line +0xoff", the offset on the outermost (physical) frame; a
 * function its call left by a tail call first, as an inlined one. */
static int write_frame(cprof_buf *out, const uintptr_t *pcs, size_t k) {
  uintptr_t pc = pcs[k];
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  if (!r || r->nframes == 0)
    return cprof__buf_printf(out, "?(...)\n\t? pc=%#llx\n",
                             (unsigned long long)pc);
  int err = 0;
  const cprof__sym_frame *outer = &r->frames[r->nframes - 1];
  unsigned long long off =
      outer->start && pc >= outer->start ? pc - outer->start : 0;
  const cprof__sym_frame *tail = cprof__tail_callee(pcs, k, false);
  if (tail) {
    err = cprof__buf_printf(out, "%s(...)\n", tail->name);
    if (!err) err = write_location(out, r, tail, false, 0);
  }
  for (int f = 0; !err && f < r->nframes; f++) {
    const cprof__sym_frame *fr = &r->frames[f];
    err = cprof__buf_printf(out, "%s(...)\n", fr->name);
    if (!err) err = write_location(out, r, fr, f == r->nframes - 1, off);
  }
  return err;
}

/* Go's "created by FUNC" and its location: the frame that called
 * pthread_create, from the stack threadcreate recorded. */
static int write_created_by(cprof_buf *out, pid_t tid) {
  uint32_t sid;
  bool own;
  if (!cprof__task_lookup(tid, &sid, &own) || sid == CPROF__TASK_NO_STACK)
    return 0;
  const uintptr_t *pcs;
  size_t n = cprof__stacktab_get((cprof__stack_id)sid, &pcs);
  if (n == 0 || pcs[0] <= CPROF__PC_SYNTHETIC_MAX) return 0;
  const cprof__sym_result *r = cprof__sym_lookup(pcs[0]);
  if (!r || r->nframes == 0) return 0;
  const cprof__sym_frame *fr = &r->frames[r->nframes - 1];
  unsigned long long off =
      fr->start && pcs[0] >= fr->start ? pcs[0] - fr->start : 0;
  /* The innermost inlined frame is the one whose code made the call. */
  const cprof__sym_frame *in = &r->frames[0];
  int err = cprof__buf_printf(out, "created by %s\n", in->name);
  return err ? err : write_location(out, r, in, true, off);
}

static int write_threads(const cprof__records *recs, const cprof_sink *sink) {
  cprof_buf out = {0};
  int err = 0;
  int dirfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cprof__text_begin();
  for (size_t i = 0; !err && i < recs->len; i++) {
    const cprof__record *r = &recs->v[i];
    char name[64], call[48] = "";
    long nr = (long)r->v[3] - 1;
    if (nr >= 0) {
      const char *sc = cprof__syscall_name(nr);
      if (sc)
        snprintf(call, sizeof call, ", syscall %s", sc);
      else
        snprintf(call, sizeof call, ", syscall %ld", nr);
    }
    /* The name, and for a thread collected in a system call its state,
     * from its stat file now (the collection read only its syscall file);
     * one that has woken since was sleeping. */
    char state = (char)r->v[1];
    char now = dirfd >= 0 ? cprof__task_state(dirfd, (pid_t)r->tag, name,
                                              sizeof name)
                          : '?';
    if (!name[0]) snprintf(name, sizeof name, "?");
    if (state == '?') state = now == 'R' || now == '?' ? 'S' : now;
    err = cprof__buf_printf(&out, "goroutine %u [%s%s, name=%s]:\n",
                            (unsigned)r->tag, cprof__task_state_name(state),
                            call, name);
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(r->sid, &pcs);
    n = cprof__visible_depth(pcs, n);
    for (size_t k = 0; !err && k < n; k++) err = write_frame(&out, pcs, k);
    if (!err) err = write_created_by(&out, (pid_t)r->tag);
    if (!err) err = cprof__buf_printf(&out, "\n");
  }
  if (dirfd >= 0) close(dirfd);
  cprof__text_end();
  return cprof__text_flush(&out, err, sink);
}

static int goroutine_write(const cprof__records *recs, int debug,
                           int64_t duration_ns, const cprof_sink *sink) {
  cprof__tail_hide_interposers(true);
  int err = debug >= 2 && duration_ns == 0
                ? write_threads(recs, sink)
                : cprof__write_count_profile("goroutine", recs, debug,
                                             duration_ns, false, sink);
  cprof__tail_hide_interposers(false);
  return err;
}

const cprof__profile_def cprof__goroutine_profile = {
    .name = "goroutine",
    .alias = "threads", /* cprof's name for what Go calls goroutines */
    .max_debug = 2,
    .description = "Stack traces of all current goroutines. Use debug=2 as "
                   "a query parameter to export in the same format as an "
                   "unrecovered panic.",
    /* As Go: ?seconds=N gives the difference of two collections N
     * seconds apart (stacks that appeared count +1, that went away -1). */
    .supports_delta = true,
    .entries = cprof__thread_sample_count,
    .collect = cprof__thread_sample_all,
    .write = goroutine_write,
};
