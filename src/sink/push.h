/*
 * The pusher (push.c): profiles uploaded to a Pyroscope-compatible ingest
 * endpoint. The public API is in cprof.h; this is what the constructor and
 * tests use.
 */
#ifndef CPROF_PUSH_H
#define CPROF_PUSH_H

#include "base/internal.h"

/* cprof_push_start with the reason for a CPROF_EINVAL in err. */
CPROF__HIDDEN int cprof__push_start(const cprof_push_config *cfg,
                                    cprof_push **out, char *err,
                                    size_t errlen);

/* Starts a pusher from CPROF_PUSH_* when CPROF_PUSH_URL is set; a bad
 * setting prints one line and leaves pushing off. */
CPROF__HIDDEN void cprof__push_env_init(void);

#endif
