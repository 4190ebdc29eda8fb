/*
 * Threads cprof's trampoline did not see: threads started through the
 * pthread_create that dlsym(RTLD_NEXT) finds (jemalloc's background
 * threads, other interposers' threads) or by a raw clone skip cprof's
 * pthread_create. They are found in /proc/self/task: by a scanner thread
 * of cprof's that, while a CPU profile runs, has the CPU engine arm a
 * timer for every thread it does not time yet (cprof__cpu_rescan), and by
 * threadcreate, which counts each such thread once under one synthetic
 * frame. Normal context only.
 */
#ifndef CPROF_THREAD_SCAN_H
#define CPROF_THREAD_SCAN_H

#include <stdint.h>
#include <sys/types.h>

#include "base/internal.h"

/* How often the scanner looks for new threads while a CPU profile runs:
 * every CPROF__SCAN_MIN_MS after the profile starts and after a scan that
 * found a thread without a timer, twice as long after each scan that found
 * none, up to CPROF__SCAN_MAX_MS. */
#define CPROF__SCAN_MIN_MS 50
#define CPROF__SCAN_MAX_MS 800
/* How often, meanwhile, it checks that the CPU engine's signal still has
 * cprof's handler (cprof__cpu_signal_check). */
#define CPROF__SIGNAL_CHECK_MS 100

/* Notes the threads that exist now (the main thread, threads started
 * before cprof): they are nobody's creation in threadcreate; and has the
 * CPU engine wake the scanner when it starts. Called once, by the
 * constructor, before anything can start a CPU profile. */
CPROF__HIDDEN void cprof__thread_scan_init(void);

/* Reads /proc/self/task and returns how many threads, in all, have been
 * found that the trampoline never saw (each counted once, and only once it
 * has run for CPROF__SCAN_SETTLE_MS, so that a thread still on its way into
 * the trampoline is not counted). */
#define CPROF__SCAN_SETTLE_MS 20
CPROF__HIDDEN uint64_t cprof__thread_scan_unseen(void);

/* The CPU engine started (its listener, source/cpu_timer.h): the scanner
 * (started on first use, in each process) scans while it runs. */
CPROF__HIDDEN void cprof__thread_scan_wake(void);

#endif
