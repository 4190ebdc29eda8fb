/*
 * The same program without cprof_keep_environment: prints the variables
 * named on its command line as it finds them after cprof's constructor.
 */
#define KEEP_ENV_OFF
#include "keep_env.c"
