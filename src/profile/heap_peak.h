/*
 * The `heap_peak` profile: the heap sampler's live set as it stood at the
 * highest sampled in-use total seen since profiling was enabled or the
 * last reset, kept by a background thread of cprof's (docs/labels.md).
 * Normal context only.
 */
#ifndef CPROF_HEAP_PEAK_H
#define CPROF_HEAP_PEAK_H

#include "base/internal.h"

/* Registers the profile; from the constructor. Its tracker thread starts
 * when a sink starts serving (the registry's serving hook). */
CPROF__HIDDEN void cprof__heap_peak_init(void);

#endif
