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
  XX(ESYMBOLS, -10, "symbolization failed")

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
 * the stop is CPROF_EBUSY ("cpu profiling already in use", Go's text). If
 * the program installed its own SIGPROF handler, cprof refuses with
 * CPROF_ESYS and one line on stderr rather than replace it.
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

#ifdef __cplusplus
}
#endif

#endif /* CPROF_H */
