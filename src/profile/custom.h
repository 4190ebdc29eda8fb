/*
 * Custom profiles (cprof_profile_new/add/remove in cprof.h), Go's
 * pprof.NewProfile: count profiles of whatever the application tracks,
 * registered in the registry so that every channel serves them. Normal
 * context only.
 */
#ifndef CPROF_CUSTOM_H
#define CPROF_CUSTOM_H

#include <stddef.h>

#include "base/internal.h"

/* The most custom profiles a process may make. */
#define CPROF__CUSTOM_MAX 64

/* How many custom profiles exist, and the name of the i-th (in the order
 * they were made), for the dump item "custom". Thread-safe. */
CPROF__HIDDEN size_t cprof__custom_count(void);
CPROF__HIDDEN const char *cprof__custom_name(size_t i);

#endif
