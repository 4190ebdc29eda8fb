/*
 * Every CPROF_* environment variable cprof reads, in one table: the name
 * and what it sets. cprof__env_get reads only these (a name missing here
 * reads as unset), and test/e2e/settings.sh checks that every CPROF_*
 * name in src/ and tools/ is here and every one here is documented. The
 * library warns, at load, about any other CPROF_* name it finds in the
 * environment (cprof__env_check_names).
 */
#ifndef CPROF_SETTINGS_H
#define CPROF_SETTINGS_H

#define CPROF__SETTINGS(X)                                                    \
  X(CPROF_CPU_HZ, "the CPU profile's rate when nobody gives one")             \
  X(CPROF_WALL_HZ, "the wall profile's rate per thread when nobody gives one")\
  X(CPROF_HEAP_RATE, "the heap sampling rate in bytes (0: off)")              \
  X(CPROF_HEAP_PEAK_MS, "how often the peak heap tracker looks")              \
  X(CPROF_MUTEX_FRACTION, "the mutex profile's fraction (0: off)")            \
  X(CPROF_BLOCK_RATE, "the block profile's rate in nanoseconds (0: off)")     \
  X(CPROF_UNWIND, "the unwinder: auto, fp or cfi")                            \
  X(CPROF_CPU_SIGNAL, "the CPU profile's signal instead of a free one")     \
  X(CPROF_THREADS_SIGNAL, "the goroutine profile's SIGRTMIN offset")          \
  X(CPROF_PERF_EVENTS, "running threads are sampled by perf events (0: no)")  \
  X(CPROF_FOLLOW_EXEC, "exec'd children profile themselves too")              \
  X(CPROF_DUMP, "the profiles dumped on signals and at exit")                 \
  X(CPROF_DUMP_OUT, "where dumps go instead of stderr")                       \
  X(CPROF_DUMP_SIGNALS, "the signals that dump (none, or TERM,INT,USR1,...)") \
  X(CPROF_HTTP, "the address the /debug/pprof/ endpoint listens on")          \
  X(CPROF_HTTP_TOKEN, "the bearer token the endpoint asks for")               \
  X(CPROF_HTTP_ALLOW_REMOTE, "the endpoint may listen beyond loopback")       \
  X(CPROF_HTTP_MAX_SECONDS, "the longest window the endpoint serves")         \
  X(CPROF_PUSH_URL, "the Pyroscope server the pusher sends to")               \
  X(CPROF_PUSH_APP, "the application name pushed profiles carry")             \
  X(CPROF_PUSH_LABELS, "labels pushed profiles carry")                        \
  X(CPROF_PUSH_INTERVAL, "seconds between pushes")                            \
  X(CPROF_PUSH_TOKEN, "the pusher's bearer token")                            \
  X(CPROF_PUSH_BASIC_AUTH, "the pusher's basic auth user:password")           \
  X(CPROF_PUSH_TENANT, "the pusher's X-Scope-OrgID")                         \
  X(CPROF_PUSH_PROFILES, "the profiles the pusher sends")                   \
  X(CPROF_MAX_PROFILE_SIZE, "the largest profile the cprof command reads")  \
  X(CPROF_DEBUG_CACHE, "where inflated debug files are kept (or off)")       \
  X(CPROF_DEBUG_CACHE_MB, "the debug cache's bound in MiB (0: off)")      \
  X(CPROF_PERF_MAP, "JIT code is named from /tmp/perf-PID.map (on or off)")

#endif
