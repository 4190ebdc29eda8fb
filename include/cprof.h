/*
 * cprof: Go-quality profiling for C and C++ programs on Linux.
 *
 * This is the one public header. Every function returns either a cprof_err
 * code (0 on success, a negative CPROF_E* value on failure) or, for
 * predicates and accessors, the value it names. Thread safety is stated for
 * each function. Structures that the caller owns may grow new fields at the
 * end in later versions; zero-initialise them so new fields take defaults.
 */
#ifndef CPROF_H
#define CPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CPROF_VERSION_MAJOR 0
#define CPROF_VERSION_MINOR 1
#define CPROF_VERSION_PATCH 0
#define CPROF_VERSION_HEX \
  ((CPROF_VERSION_MAJOR << 16) | (CPROF_VERSION_MINOR << 8) | CPROF_VERSION_PATCH)

#if defined(CPROF_BUILDING) && defined(__GNUC__)
#define CPROF_EXPORT __attribute__((visibility("default")))
#else
#define CPROF_EXPORT
#endif

/*
 * The error table. Codes are appended, never renumbered. Each entry is
 * XX(name, code, message); the message is what cprof_strerror() returns and,
 * where Go has a text for the same failure, it is Go's text.
 */
#define CPROF_ERRNO_MAP(XX)                                              \
  XX(OK, 0, "success")                                                   \
  XX(EINVAL, -1, "invalid argument")                                     \
  XX(ENOMEM, -2, "out of memory")                                        \
  XX(EIO, -3, "input/output error")                                      \
  XX(ENOPROFILE, -4, "Unknown profile")                                  \
  XX(EBUSY, -5, "cpu profiling already in use")                          \
  XX(ENOTENABLED, -6, "Profiling is not enabled")                        \
  XX(EDISABLED, -7, "profile is disabled")                               \
  XX(ESYS, -8, "system call failed")                                     \
  XX(EUNSUPPORTED, -9, "not supported")                                  \
  XX(ESYMBOLS, -10, "symbolization failed")                              \
  XX(EADDRINUSE, -11, "address already in use")                          \
  XX(ENOTLOOPBACK, -12, "non-loopback address refused without allow_remote") \
  XX(ECANCELED, -13, "cancelled before the profile was complete")        \
  XX(EMUTEXOFF, -14, "mutex profile is not enabled")                     \
  XX(EBLOCKOFF, -15, "block profile is not enabled")                    \
  XX(EEXIST, -16, "NewProfile name already in use")                      \
  XX(EDUPLICATE, -17, "Profile.Add of duplicate value")

typedef enum cprof_err {
#define CPROF_ERR_ENUM_(name, code, msg) CPROF_##name = (code),
  CPROF_ERRNO_MAP(CPROF_ERR_ENUM_)
#undef CPROF_ERR_ENUM_
} cprof_err;

/* The message for an error code ("unknown error" for codes not in the
 * table). Thread-safe; the string is static. */
CPROF_EXPORT const char *cprof_strerror(int err);

/* The symbolic name of an error code, e.g. "CPROF_EINVAL" ("CPROF_UNKNOWN"
 * for codes not in the table). Thread-safe; the string is static. */
CPROF_EXPORT const char *cprof_err_name(int err);

/* The library's version as "MAJOR.MINOR.PATCH". Thread-safe. */
CPROF_EXPORT const char *cprof_version(void);

/* The library's version as CPROF_VERSION_HEX computed when it was built, so a
 * program can compare it with the header it was compiled against.
 * Thread-safe. */
CPROF_EXPORT unsigned cprof_version_number(void);

/*
 * Output. A sink receives the bytes of a profile in order. write returns 0,
 * or a negative cprof_err to abort the profile (which the writing function
 * then returns).
 */
typedef struct cprof_sink {
  int (*write)(void *ctx, const void *data, size_t len);
  void *ctx;
} cprof_sink;

/* A growable memory buffer owned by the caller; free with cprof_buf_free().
 * Zero-initialise before first use. */
typedef struct cprof_buf {
  unsigned char *data;
  size_t len;
  size_t cap;
} cprof_buf;

/* A sink that writes to a file descriptor (retrying short writes and EINTR).
 * The descriptor stays the caller's. Thread-safe. */
CPROF_EXPORT cprof_sink cprof_sink_fd(int fd);

/* A sink that appends to buf. Thread-safe for distinct buffers. */
CPROF_EXPORT cprof_sink cprof_sink_buf(cprof_buf *buf);

/* Releases a buffer's memory and zeroes it. Safe on a zeroed buffer. */
CPROF_EXPORT void cprof_buf_free(cprof_buf *buf);

/*
 * Named profiles, with Go's names: "threadcreate" (more arrive with the other
 * profilers). debug = 0 writes a gzipped pprof protobuf that `go tool pprof`
 * reads; debug = 1 writes Go's legacy text format, symbolized.
 *
 * Returns CPROF_ENOPROFILE for an unknown name. Thread-safe: concurrent
 * writes are serialized around symbolization. Must not be called from a
 * signal handler.
 */
CPROF_EXPORT int cprof_profile_write(const char *name, int debug,
                                     const cprof_sink *sink);

/* Writes a named profile to a file (created or truncated, mode 0644).
 * Same semantics as cprof_profile_write(). */
CPROF_EXPORT int cprof_profile_write_file(const char *name, int debug,
                                          const char *path);

/* The number of named profiles and the name / description of the i-th, in
 * name order; NULL when i is out of range. Thread-safe; strings are static. */
CPROF_EXPORT size_t cprof_profile_count(void);
CPROF_EXPORT const char *cprof_profile_name(size_t i);
CPROF_EXPORT const char *cprof_profile_description(size_t i);

/* Every profile cprof has, in name order, including those taken over a
 * window of time ("cpu", served as /debug/pprof/profile, and "wall"),
 * which the functions above leave out because cprof_profile_write cannot
 * write them at any moment. Fills *out and returns 0, or returns
 * CPROF_ENOPROFILE when i is past the last (CPROF_EINVAL for a NULL
 * out). Thread-safe; strings are static. */
typedef struct cprof_profile_info {
  const char *name;        /* as dumps and cprof_profile_write name it */
  const char *route;       /* its /debug/pprof/ route */
  const char *description; /* Go's text for Go's profiles */
  int windowed;            /* 1: taken over a window (?seconds=N) */
} cprof_profile_info;
CPROF_EXPORT int cprof_profile_info_at(size_t i, cprof_profile_info *out);

/* The number of entries a named profile currently holds (what Go's index
 * page shows in its Count column), or a negative cprof_err. Thread-safe. */
CPROF_EXPORT long cprof_profile_entries(const char *name);

/*
 * CPU profiling. Every thread gets a timer on its own CPU-time clock, so
 * each is sampled in proportion to the CPU it uses (unlike setitimer, which
 * skews multi-threaded programs). Threads that exist when profiling starts
 * and threads created later are all covered, without registration.
 *
 * cprof_cpu_start(hz) starts the application's CPU profile at hz samples
 * per second of CPU time (0 = 100; at most 10000). A second start before
 * the stop is CPROF_EBUSY ("cpu profiling already in use", Go's text). The
 * timers' signal is SIGPROF while the program leaves it alone, otherwise a
 * free real-time signal, and moves when the program takes it
 * (docs/cpu.md#signals); with no signal free, or under a seccomp filter
 * that refuses timer_create, the start is CPROF_ESYS with one line on
 * stderr.
 *
 * The application's profile is independent of cprof's other consumers
 * (the HTTP endpoint, dumps, the pusher): each has its own table, and all
 * share one set of timers. The timers run at the rate of whichever consumer
 * started first; a profile's period says which rate it got.
 *
 * cprof_cpu_stop(sink) ends it and writes the profile (gzipped pprof:
 * samples/count and cpu/nanoseconds, with a "thread" label naming the
 * thread and a numeric "thread_id"); sink may be NULL to discard it.
 * CPROF_EINVAL when no profile is running. Both are thread-safe; neither may
 * be called from a signal handler.
 */
CPROF_EXPORT int cprof_cpu_start(int hz);
CPROF_EXPORT int cprof_cpu_stop(const cprof_sink *sink);

/*
 * Heap sampling. cprof interposes the malloc family (which C++ operator
 * new and delete reach) and samples allocations as Go does: on average one sample
 * per rate bytes allocated, each sample standing for the allocations around
 * it (profiles "heap" and "allocs" scale them back). The default rate is
 * 524288 bytes, or CPROF_HEAP_RATE from the environment; 0 turns sampling
 * off and 1 records every allocation.
 *
 * cprof_heap_set_rate(rate) sets the rate and returns the previous one; a
 * negative rate only reads it. Set it once, early: the calling thread
 * switches at once, other threads at their next sample (within 1 MiB of
 * allocation when sampling was off), and profiles scale every record by the
 * rate in force when they are written. Thread-safe.
 */
CPROF_EXPORT long cprof_heap_set_rate(long rate);

/*
 * Profile labels (docs/labels.md). A label set is an immutable list of
 * key=value string pairs, made once and then referred to by pointer; each
 * thread has a current set (none at first), which every CPU, heap/allocs,
 * mutex and block sample the thread takes carries as pprof string labels
 * (`go tool pprof -tagfocus key=value`, `-tags`), in every channel, dump,
 * delta and push. Go's pprof.Do, for C.
 *
 * cprof_labels_new(base, kv, npairs, &out) makes the set of base's pairs
 * (base may be NULL) with the npairs pairs kv[0]=kv[1], kv[2]=kv[3], ...
 * added (a key already in base takes the new value; a later duplicate in
 * kv wins). Keys are non-empty; both strings are copied. The same content
 * always gives the same pointer, and sets are never freed: make them once
 * (per request kind, not per request) and keep them. At most
 * CPROF_LABELS_MAX_PAIRS pairs per set and 4096 distinct sets per process
 * (CPROF_ENOMEM beyond). CPROF_EINVAL for NULL out, a NULL string or an
 * empty key. Thread-safe; not from a signal handler (it may allocate).
 *
 * cprof_labels_push(set) makes set (NULL: no labels) the calling thread's
 * current set and returns the previous one, which the matching
 * cprof_labels_pop(previous) restores:
 *
 *   const cprof_labels *prev = cprof_labels_push(api_labels);
 *   handle(req);
 *   cprof_labels_pop(prev);
 *
 * Both are one thread-local pointer store: no allocation, no lock, safe
 * in a signal handler. Nesting is the caller's stack of saved pointers, so
 * an event loop can also switch to the labels of whichever request it
 * resumes. cprof_do(set, fn, arg) is push, fn(arg), pop. Threads created
 * while a set is current start with it (as goroutines inherit labels).
 */
#define CPROF_LABELS_MAX_PAIRS 16

typedef struct cprof_labels cprof_labels;

CPROF_EXPORT int cprof_labels_new(const cprof_labels *base,
                                  const char *const *kv, size_t npairs,
                                  const cprof_labels **out);
CPROF_EXPORT const cprof_labels *cprof_labels_push(const cprof_labels *set);
CPROF_EXPORT void cprof_labels_pop(const cprof_labels *previous);
CPROF_EXPORT void cprof_do(const cprof_labels *set, void (*fn)(void *arg),
                           void *arg);
/* The calling thread's current set (NULL: none). Signal-safe. */
CPROF_EXPORT const cprof_labels *cprof_labels_current(void);
/* The value of key in set, or NULL (Go's pprof.Label). Signal-safe. */
CPROF_EXPORT const char *cprof_labels_value(const cprof_labels *set,
                                            const char *key);

/*
 * Custom profiles (Go's pprof.NewProfile): an application tracks its own
 * resources (descriptors, connections, sessions) by the stack that made
 * each, and the profile is served like the built-in ones, under its name,
 * at every channel (HTTP /debug/pprof/<name> and the index, profilez, the
 * dump item "custom", the viewer), with Go's debug=0 and debug=1 formats
 * and ?seconds=N deltas.
 *
 * cprof_profile_new(name, description, &out): CPROF_EEXIST when a profile
 * of that name exists (built-in or custom; Go panics), CPROF_EINVAL for an
 * empty name or one no channel could carry (longer than 128 bytes, a
 * space, a control character or one of ",=:?#%&\"), or a name a route
 * already takes ("profile", "cpu", "cmdline", "symbol", "trace",
 * "threads"); CPROF_ENOMEM past 64 custom profiles. description may be
 * NULL. Profiles are never deleted.
 *
 * cprof_profile_add(p, key, skip) records key with the calling thread's
 * stack (skip = 0: starting at the caller of cprof_profile_add; each 1
 * skips one more frame, as Go's skip) and current labels;
 * CPROF_EDUPLICATE when key is already in the profile (Go panics).
 * cprof_profile_remove(p, key) forgets it (nothing for an absent key).
 * key is an integer or a pointer cast to uintptr_t (not UINTPTR_MAX:
 * CPROF_EINVAL). All three are
 * thread-safe; add and remove take a lock and may allocate.
 */
typedef struct cprof_profile cprof_profile;

CPROF_EXPORT int cprof_profile_new(const char *name, const char *description,
                                   cprof_profile **out);
CPROF_EXPORT int cprof_profile_add(cprof_profile *p, uintptr_t key, int skip);
CPROF_EXPORT int cprof_profile_remove(cprof_profile *p, uintptr_t key);
/* How many keys p holds (Go's Profile.Count). */
CPROF_EXPORT long cprof_profile_len(const cprof_profile *p);

/*
 * The peak heap profile, "heap_peak" (docs/labels.md): the sampled live
 * heap as it stood at the highest sampled in-use total seen since
 * profiling was enabled (cprof_enable, the HTTP endpoint, dumps or the
 * pusher) or since the last reset, in the heap profile's format. A thread
 * of cprof's checks the sampled total every CPROF_HEAP_PEAK_MS
 * milliseconds (default 50) and keeps a copy of the live set's records
 * when it has grown past the kept peak: no cost on any allocation.
 * cprof_heap_peak_reset() forgets the peak (as /debug/pprof/heap_peak
 * ?reset=1 does after serving it) and starts the tracker if it is not
 * running. Thread-safe.
 */
CPROF_EXPORT int cprof_heap_peak_reset(void);

/*
 * The HTTP endpoint: Go's /debug/pprof/ routes, parameters, headers, status
 * codes and error texts (index, cmdline, profile, symbol and every named
 * profile with debug and seconds deltas), served by a dedicated
 * libmicrohttpd server so that go tool pprof, Parca, Grafana Alloy and
 * Pyroscope work against a C program unchanged. docs/http.md has the
 * details.
 *
 * Safer than Go's by default: it listens on loopback unless allow_remote is
 * set (and there answers only a Host naming loopback, against DNS
 * rebinding), a unix socket is created mode 0600, an optional bearer token
 * is required on every request (checked before any body is read), CPU and
 * delta profiles are capped in length and one CPU profile runs at a time,
 * and connections, request sizes, request time and idle time are bounded.
 *
 * Zero-initialise the config; zero fields take their defaults and fields
 * may be added at the end in later versions.
 */
typedef struct cprof_http cprof_http;

typedef struct cprof_http_config {
  /* "127.0.0.1:6060" (the default when NULL), "[::1]:6060", "localhost:0",
   * ":6060" (every interface: needs allow_remote) or "unix:/path". Port 0
   * picks a free port; cprof_http_port() says which. */
  const char *addr;
  /* When nonzero, replaces the port in addr. */
  unsigned port;
  /* Nonzero switches the mutex profile (fraction 10) and the block profile
   * (rate 10 us) on for the whole process, unless the application already
   * set them; both cost something on every contended lock. */
  int enable_mutex_profile;
  int enable_block_profile;
  /* When set, every request needs "Authorization: Bearer <token>"
   * (compared in constant time); others get 401. Printable ASCII, no
   * spaces, not empty (CPROF_EINVAL). Never logged. */
  const char *token;
  /* Nonzero allows a non-loopback address; without it cprof_http_start
   * refuses one with CPROF_ENOTLOOPBACK. */
  int allow_remote;
  /* The longest ?seconds=N a CPU profile or a delta may ask for
   * (0 = 300); longer requests get 400. */
  int max_cpu_seconds;
  /* Receives one line per request and the server's errors (NULL: errors
   * at start go to stderr, the rest are dropped). Called from server
   * threads, concurrently. */
  void (*logger)(void *ctx, const char *line);
  void *logger_ctx;
  /* Concurrent connections (0 = 32; more wait in the listen backlog) and
   * idle seconds before a connection is closed (0 = 30). */
  unsigned max_connections;
  unsigned idle_timeout_seconds;
  /* Seconds a connection has to send a whole request (0 = 10): from its
   * accept, or from its previous answer plus the idle time. A connection
   * that takes longer is closed, however steadily it trickles bytes. */
  unsigned header_timeout_seconds;
} cprof_http_config;

/* Binds the address and starts serving. The failure to bind (a port in
 * use: CPROF_EADDRINUSE) is reported here, synchronously, with one line on
 * the logger (or stderr). NULL cfg or out is CPROF_EINVAL. Thread-safe;
 * several servers may run at once. */
CPROF_EXPORT int cprof_http_start(const cprof_http_config *cfg,
                                  cprof_http **out);

/* Stops the server: running profiles are abandoned (within 0.1 s), the
 * listening socket is closed and a unix socket file removed (also done at
 * process exit for a server still running). NULL is CPROF_EINVAL. Not to
 * be called concurrently for the same server. */
CPROF_EXPORT int cprof_http_stop(cprof_http *srv);

/* The TCP port the server listens on (the one chosen for port 0), 0 for a
 * unix socket, or CPROF_EINVAL for NULL. Thread-safe. */
CPROF_EXPORT int cprof_http_port(const cprof_http *srv);

/*
 * Dumps on termination and signals. spec lists profiles separated by ',';
 * the first '=' after a name starts its parameters, which are key=value
 * pairs separated by ':', e.g. "cpu,heap=debug=1,mutex=debug=1:rate=1000".
 * Names: cpu, heap, allocs, threadcreate, goroutine (threads), mutex,
 * block, heap_peak, and custom (a block per custom profile at the dump). Keys: debug (0 = gzipped pprof, 1 or 2 = Go's text; cpu has only
 * 0), rate (heap/allocs: sampling bytes; mutex: fraction; block:
 * nanoseconds), hz (cpu).
 *
 * A rate is set for the whole process now, as cprof_heap_set_rate,
 * cprof_set_mutex_profile_fraction and cprof_set_block_profile_rate would.
 *
 * The listed profiles are collected from now on (cpu runs until the dump)
 * and written as PEM blocks ("-----BEGIN PPROF HEAP-----" ... base64 ...
 * "-----END PPROF HEAP-----") to the stderr of this moment, through a
 * descriptor of cprof's own (not whatever fd 2 is later), or appended to
 * the file named by CPROF_DUMP_OUT (created 0600; a FIFO is never waited
 * for), on SIGTERM, SIGINT and SIGUSR1 and at normal exit. SIGTERM and
 * SIGINT still end the program as they would have (the parent sees the
 * signal): by default the interrupted thread waits for the dump, at most
 * 5 s, and the process dies of the signal without running more of the
 * program's code; a handler the program had is called after the dump.
 * SIGUSR1 dumps and the program carries on, with a new CPU window; its
 * handler is SA_RESTART, and requests arriving during a dump make one more
 * dump, not one each. No dump delays termination beyond those 5 s, and a
 * write that makes no progress for 2 s is abandoned; SIGPIPE from a dump
 * never reaches the program. `cprof extract` turns a log back into profile
 * files; docs/dumps.md has the details.
 *
 * The same configuration comes from the CPROF_DUMP environment variable
 * when the library loads. Returns 0; CPROF_EINVAL with a message pointing at
 * the offending part of spec in errbuf (when errbuf is not NULL);
 * CPROF_EUNSUPPORTED for a profile this build lacks; CPROF_EBUSY when dumps
 * are already configured. Thread-safe; not from a signal handler.
 */
CPROF_EXPORT int cprof_dump_configure(const char *spec, char *errbuf,
                                      size_t errlen);

/*
 * Lock contention, with Go's meanings; both profiles are off by default.
 * The "block" profile shows where threads waited (mutex and rwlock slow
 * paths, condition variables, semaphores, barriers, pthread_join); the
 * "mutex" profile charges each wait on a mutex or rwlock to the stack that
 * released the lock. The "goroutine" (alias "threads") profile is every
 * thread's current stack; see docs/contention.md.
 *
 * cprof_set_mutex_profile_fraction(rate) samples 1 in rate contention
 * events (1 = all, 0 = off) and returns the previous rate; a negative rate
 * only reads it (Go's SetMutexProfileFraction). Thread-safe.
 *
 * cprof_set_block_profile_rate(rate_ns) records on average one blocking
 * event per rate_ns nanoseconds spent blocked (1 = every event; <= 0 = off),
 * as Go's SetBlockProfileRate. Returns 0 or CPROF_ENOMEM. Thread-safe.
 * cprof_block_profile_rate() returns the current rate.
 *
 * The environment variables CPROF_MUTEX_FRACTION and CPROF_BLOCK_RATE set
 * the same values when the library loads.
 */
CPROF_EXPORT int cprof_set_mutex_profile_fraction(int rate);
CPROF_EXPORT int cprof_set_block_profile_rate(long long rate_ns);
CPROF_EXPORT long long cprof_block_profile_rate(void);

/*
 * profilez: any profile's bytes, for serving over the application's own
 * admin channel (a line protocol, an RPC, a system account), as an
 * alternative to the HTTP endpoint. Opt-in: until the application calls
 * cprof_enable() (or starts the HTTP endpoint, dumps or the pusher) every
 * call fails with CPROF_ENOTENABLED ("Profiling is not enabled").
 *
 * name is a profile name ("heap", "allocs", "goroutine", "threadcreate",
 * "mutex", "block") or "profile" (alias "cpu") for a CPU profile over
 * seconds (0 = 30, as Go). debug 0 is gzipped pprof, 1 or 2 Go's text.
 * seconds > 0 on a named profile returns the difference over that many
 * seconds (pprof only, like Go's ?seconds=N). The bytes are appended to
 * out; free it with cprof_buf_free().
 *
 * Errors: CPROF_ENOTENABLED; CPROF_ENOPROFILE for an unknown name;
 * CPROF_EMUTEXOFF / CPROF_EBLOCKOFF when the mutex / block profile was not
 * switched on (cprof_set_mutex_profile_fraction,
 * cprof_set_block_profile_rate, or their environment variables); CPROF_EBUSY
 * when every CPU profile slot is taken; CPROF_EINVAL for a negative debug,
 * seconds outside 0..300, or debug with seconds. Thread-safe: the calling
 * thread waits out the seconds; other profiles are not held up.
 */
CPROF_EXPORT int cprof_enable(void);
CPROF_EXPORT int cprof_profilez(const char *name, int debug, int seconds,
                                cprof_buf *out);

/*
 * Pushing to a continuous-profiling backend (Grafana Pyroscope's
 * POST /ingest, or anything that speaks it): every interval, aligned to the
 * wall clock so windows from many hosts line up, the CPU profile of the
 * window just ended, a heap snapshot and, when those profiles are on, the
 * mutex and block deltas are uploaded as multipart "profile" fields with
 * name=<app>{hostname=..,pid=..,service_name=<app>,<labels>}, from, until
 * and spyName=cprof.
 *
 * Uploads run on cprof's own threads through a bounded queue: when the
 * backend is slow or down, the oldest waiting profile is dropped and
 * counted, never the application slowed. Failed uploads are retried (1, 2,
 * 4 s backoff) on no answer, 408, 429 and 5xx; redirects are not followed;
 * credentials are never logged. The same settings come from CPROF_PUSH_URL,
 * CPROF_PUSH_APP, CPROF_PUSH_LABELS, CPROF_PUSH_BASIC_AUTH,
 * CPROF_PUSH_TOKEN, CPROF_PUSH_TENANT and CPROF_PUSH_INTERVAL when the
 * library loads (except in a setuid, setgid or file-capability process,
 * where every CPROF_* variable is ignored).
 */
typedef struct cprof_push cprof_push;

typedef struct cprof_push_config {
  const char *url;          /* the server, e.g. "http://127.0.0.1:4040" */
  const char *app_name;     /* default: the program's name */
  const char *labels;       /* extra labels, "env=prod,region=eu" */
  const char *basic_auth;   /* "user:password" */
  const char *bearer_token; /* sent as Authorization: Bearer */
  const char *tenant_id;    /* sent as X-Scope-OrgID */
  int interval_seconds;     /* default 10 */
  int timeout_seconds;      /* per request, default 10 */
  int cpu_hz;               /* default CPROF_CPU_HZ or 100 */
  int queue_length;         /* profiles waiting for upload, default 16 */
  /* Receives one line per problem (never a credential); NULL: stderr. */
  void (*logger)(void *ctx, const char *line);
  void *logger_ctx;
  /* The profiles to push, by name, comma-separated ("cpu,wall,heap");
   * NULL: cpu, heap, and mutex and block when they are on. */
  const char *profiles;
  /* Fields may be added at the end; zero-initialise. */
} cprof_push_config;

typedef struct cprof_push_stats {
  uint64_t uploaded; /* profiles the backend accepted */
  uint64_t failed;   /* profiles given up on after retries */
  uint64_t dropped;  /* profiles dropped because the queue was full */
  uint64_t retried;  /* extra attempts made */
} cprof_push_stats;

/* Starts pushing. CPROF_EINVAL for a missing or non-http(s) url, a bad
 * app name or label, both basic auth and a token, a control character (CR,
 * LF, any byte below 0x20, DEL) in the url, token, tenant or basic auth
 * (they go into the request as they are), or values out of range (the
 * reason goes to the logger); CPROF_ESYS when a thread cannot start.
 * The processes this one forks from then on without exec are pushed too,
 * each as a series with its own pid (docs/push.md, "Process trees").
 * Thread-safe. */
CPROF_EXPORT int cprof_push_start(const cprof_push_config *cfg,
                                  cprof_push **out);
/* Stops pushing: the current window is not uploaded, waiting uploads and
 * a request in flight are abandoned (a stalled backend never delays the
 * program's exit), threads are joined. Thread-safe; once per pusher. In a
 * forked child the pusher is its parent's: this returns 0 and does
 * nothing. */
CPROF_EXPORT int cprof_push_stop(cprof_push *p);
CPROF_EXPORT void cprof_push_get_stats(const cprof_push *p,
                                       cprof_push_stats *out);

/*
 * The process's environment. At load, cprof takes its CPROF_* variables
 * and its own LD_PRELOAD entry out of the environment, so that programs
 * the process execs run unprofiled (docs/dumps.md, "Children"), and says
 * so on stderr for a CPROF_* name it does not know. A program that reads
 * CPROF_* variables of its own and passes them on (a launcher, as the
 * cprof command is) defines this, with any value, in its executable:
 *
 *   CPROF_EXPORT const int cprof_keep_environment = 1;
 *
 * Then its environment is left as it is and no name is reported. It is
 * read once, by the library's constructor, before main (jemalloc's
 * malloc_conf works the same way); the value is not looked at.
 */
extern const int cprof_keep_environment;

#ifdef __cplusplus
}
#endif

#endif /* CPROF_H */
