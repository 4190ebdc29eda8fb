/*
 * The named-profile registry: Go's profile names mapped to the module that
 * writes each. A profile module defines one cprof__profile_def; the table in
 * registry.c lists them in name order. Normal context only.
 */
#ifndef CPROF_REGISTRY_H
#define CPROF_REGISTRY_H

#include "internal.h"

typedef struct cprof__profile_def {
  const char *name;
  const char *description; /* Go's description on the index page */
  long (*entries)(void);   /* the index page's Count column */
  int (*write)(int debug, const cprof_sink *sink);
} cprof__profile_def;

/* The definition for name (aliases included), or NULL. */
CPROF__HIDDEN const cprof__profile_def *cprof__profile_find(const char *name);

#endif
