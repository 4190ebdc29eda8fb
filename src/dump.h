/*
 * Dumps: profiles listed in CPROF_DUMP (or given to cprof_dump_configure)
 * are collected from the start and written into the log as PEM blocks on
 * SIGTERM, SIGINT, SIGUSR1 and at normal exit. Signal handlers only wake
 * the dumper thread; the dump itself runs in normal context.
 */
#ifndef CPROF_DUMP_H
#define CPROF_DUMP_H

#include "internal.h"

/* Reads CPROF_DUMP and CPROF_DUMP_OUT and configures dumps when set; a bad
 * value prints one line and leaves dumps off. Called by the constructor. */
CPROF__HIDDEN void cprof__dump_env_init(void);

/* The rate for CPU profiles nobody gave a rate to: CPROF_CPU_HZ, else
 * 100. */
CPROF__HIDDEN int cprof__cpu_default_hz(void);

#endif
