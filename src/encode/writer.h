/*
 * Profile assembly: turns captured stacks (arrays of pcs) with their values
 * and labels into a symbolized pprof profile. It owns the mapping between
 * addresses and pprof's Location / Function / Mapping messages: each distinct
 * pc becomes one Location (with a Line per inlined frame), each distinct
 * function one Function, each executable mapping one Mapping whose has_*
 * flags say truthfully whether every lookup in it succeeded. A function a
 * call left by a tail call is added back as one more Line of the call's
 * Location (docs/symbols.md), so a pc reached with and without one gets
 * two Locations.
 *
 * It also holds the writers shared by several profiles: Go's debug=1 text
 * for a stack, and the whole of a "count" profile (threadcreate, goroutine).
 * Normal context only; holds the symbolizer lock from begin to end.
 */
#ifndef CPROF_PROFILE_H
#define CPROF_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "capture/agg.h"
#include "base/internal.h"
#include "encode/pprof.h"
#include "capture/records.h"
#include "encode/symbolize.h"

typedef struct cprof__value_type {
  const char *type;
  const char *unit;
} cprof__value_type;

typedef struct cprof__prof_desc {
  const cprof__value_type *sample_types;
  size_t nsample_types;
  cprof__value_type period_type;
  int64_t period;
  const char *default_sample_type; /* NULL leaves the viewer's default */
  int64_t time_nanos;
  int64_t duration_nanos;
  /* The stacks were taken by an interposer (heap, mutex, block): their
   * first frame is the call into it, not an interrupted pc. */
  bool first_is_call;
} cprof__prof_desc;

typedef struct cprof__prof cprof__prof;

/* Starts a gzipped pprof profile on sink. Takes the symbolizer lock and
 * refreshes the mappings. NULL when out of memory. */
CPROF__HIDDEN cprof__prof *cprof__prof_begin(const cprof__prof_desc *d,
                                             const cprof_sink *sink);
CPROF__HIDDEN void cprof__prof_comment(cprof__prof *p, const char *comment);
/* pcs as captured (call sites, innermost first); one value per sample
 * type. */
CPROF__HIDDEN void cprof__prof_sample(cprof__prof *p, const uintptr_t *pcs,
                                      size_t npcs, const int64_t *values,
                                      const cprof__pprof_label *labels,
                                      size_t nlabels);
/* Writes the mappings, finishes the stream, releases the lock. Returns 0 or
 * the first error. */
CPROF__HIDDEN int cprof__prof_end(cprof__prof *p);

/* Text output: begin takes the symbolizer lock and refreshes; end releases
 * it. Between them, cprof__text_stack appends " @ 0x.. 0x..\n" and one
 * "#\t0x<pc>\t<func>+0x<off>\t<file>:<line>" line per frame (inlined frames
 * and functions left by tail calls included), as Go's debug=1 profiles do.
 * cprof__text_begin_calls is begin for stacks taken by an interposer (see
 * first_is_call). */
CPROF__HIDDEN void cprof__text_begin(void);
CPROF__HIDDEN void cprof__text_begin_calls(void);
CPROF__HIDDEN void cprof__text_end(void);
CPROF__HIDDEN int cprof__text_stack(cprof_buf *out, const uintptr_t *pcs,
                                    size_t npcs);

/* Appends one record's stack (" @ 0x.. 0x..", its frame lines, padded as
 * Go's tabwriter pads them) and the blank line that ends a record in Go's
 * text; the caller has written the record's values. Between text_begin
 * and text_end. */
CPROF__HIDDEN int cprof__text_record(cprof_buf *out, cprof__stack_id sid);

/* Appends text[0..len) to out as Go's text/tabwriter, set up as
 * runtime/pprof sets it for debug=1, writes it: the tab-terminated cells
 * of consecutive lines aligned in columns with tabs (writer.c). At most 16
 * columns per line are aligned; tabs past them stay as they are. Returns
 * 0 or CPROF_ENOMEM. Pure. */
CPROF__HIDDEN int cprof__tabwrite(cprof_buf *out, const char *text,
                                  size_t len);

/* Finishes a text profile: when err is 0, sends out to sink. Frees out;
 * returns the first error. */
CPROF__HIDDEN int cprof__text_flush(cprof_buf *out, int err,
                                    const cprof_sink *sink);

/* How many of a stack's frames are shown: a stack ends below cprof's
 * thread trampoline (and libc's thread start under it), as Go's end at the
 * goroutine's function. Symbolizer lock held. */
CPROF__HIDDEN size_t cprof__visible_depth(const uintptr_t *pcs, size_t npcs);

/* For the calling thread's writes from now on: whether a function left by
 * a tail call is left out when it is one of cprof's interposers (the
 * goroutine profile shows a thread waiting in libc's pthread_mutex_lock
 * under the application's caller, not under cprof's wrapper). */
CPROF__HIDDEN void cprof__tail_hide_interposers(bool hide);

/* The function frame i of a stack (pcs as captured, innermost first)
 * called and which was left by a tail call: the call instruction of frame
 * i is a direct call to it, and frame i - 1 is not inside it. For the first
 * frame of a stack taken by an interposer (first_is_call), the frame
 * inside is the interposer: the call is a tail call's when it calls none
 * of cprof's interposers. NULL when there is no such function, always for
 * the first frame of other stacks. Symbolizer lock held. */
CPROF__HIDDEN const cprof__sym_frame *cprof__tail_callee(const uintptr_t *pcs,
                                                         size_t i,
                                                         bool first_is_call);

/* The drop comment of a profile that lost samples: what the stack table
 * and the profile's own table lost (none when nothing was). */
CPROF__HIDDEN void cprof__prof_drop_comment(cprof__prof *p,
                                            const cprof__agg *agg);

/* Writes a count profile (one count per stack, as threadcreate and
 * goroutine are) from the records' first value: debug 0 as pprof with
 * sample type <name>/count, debug >= 1 as "<name> profile: total N" grouped
 * by stack and sorted by count. duration_ns is nonzero for a delta.
 * first_is_call: the stacks were taken by an interposer, so each one's
 * first frame is a call site too (threadcreate's are), not a pc where a
 * thread was stopped. */
CPROF__HIDDEN int cprof__write_count_profile(const char *name,
                                             const cprof__records *recs,
                                             int debug, int64_t duration_ns,
                                             bool first_is_call,
                                             const cprof_sink *sink);


#endif
