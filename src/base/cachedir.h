/*
 * The private, bounded cache directory (cachedir.c) that keeps what
 * cprof derives from the objects a program loads, so that the next
 * process and the next run need not derive it again: separate debug files
 * inflated (encode/debug_cache.h), symbolized addresses
 * (encode/symcache.h) and unwind tables (capture/cfi_index.c), each entry
 * named by an object's build ID in hex, a dot and its kind (docs/symbols.md,
 * "The debug cache").
 *
 * CPROF_DEBUG_CACHE=DIR (default $XDG_CACHE_HOME/cprof/debug, else
 * ~/.cache/cprof/debug; "off" turns it off), CPROF_DEBUG_CACHE_MB=N (the
 * bound on all entries together, default 512; 0 turns it off). The
 * directory must belong to the process's user and be writable by nobody
 * else; entries are checked the same way. Off in a privileged process.
 * Normal context.
 */
#ifndef CPROF_CACHEDIR_H
#define CPROF_CACHEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/internal.h"
#include "cprof.h"

/* Reads the settings (once; a bad one gives one line on stderr). */
CPROF__HIDDEN void cprof__cachedir_env_init(void);

/* Whether the cache is on (its settings read, its directory usable so
 * far). */
CPROF__HIDDEN bool cprof__cachedir_on(void);

/* The bound in bytes, and the directory's path. */
CPROF__HIDDEN unsigned long long cprof__cachedir_max(void);
CPROF__HIDDEN const char *cprof__cachedir_path(void);

/* Reads the entry name (hex digits, a dot, a lower-case kind) whole into
 * out (emptied first) and marks it used: false when there is none of this
 * user's, or it is larger than max bytes. *st (when st is not NULL) gets
 * the status of the file read. */
CPROF__HIDDEN bool cprof__cachedir_read(const char *name, size_t max,
                                        cprof_buf *out, struct stat *st);

/* Whether the entry name is no longer the file whose status is *was
 * (another process replaced or removed it since it was read): one stat,
 * the entry not marked used. Entries are replaced by a rename or grow
 * by appending, never change in place: the device, inode and size
 * tell. */
CPROF__HIDDEN bool cprof__cachedir_changed(const char *name,
                                           const struct stat *was);

/* The entry name opened (read-only, marked used), its status in *st: -1
 * when there is none of this user's within the bound, or no cache. */
CPROF__HIDDEN int cprof__cachedir_open_named(const char *name,
                                             struct stat *st);

/* Reads all n bytes at off of fd into buf (retrying short reads and
 * EINTR). */
CPROF__HIDDEN bool cprof__cachedir_read_at(int fd, void *buf, size_t n,
                                           off_t off);

/* Puts data[0..len) in place of the entry name, as a temporary file
 * renamed over it (nothing when another process is writing it), then
 * keeps the bound. */
CPROF__HIDDEN void cprof__cachedir_write(const char *name, const void *data,
                                         size_t len);

/* Appends data[0..len) to the entry name by one write(), when it is a
 * regular file of the user's that stays within the bound and accept(fd,
 * ctx) (which may read it) takes it; then keeps the bound. True when all
 * of it was written, *st then getting the entry's status. A write cut
 * short leaves what it wrote: the entry's format must tell. */
CPROF__HIDDEN bool cprof__cachedir_append(const char *name, const void *data,
                                          size_t len,
                                          bool (*accept)(int fd, void *ctx),
                                          void *ctx, struct stat *st);

/*
 * The pieces, for entries written from a file (the debug cache's).
 */

/* The directory, opened (made 0700 when missing, below a directory that
 * exists) and checked; -1 when it is not usable. Said once when it was
 * named, or exists and is not safe. */
CPROF__HIDDEN int cprof__cachedir_open(void);
/* Opens the entry name under d when it is a regular file of the user's
 * within the bound; marks it used. */
CPROF__HIDDEN int cprof__cachedir_open_entry(int d, const char *name,
                                             struct stat *st);
/* Creates name's temporary file under d (its name into tmp): -1 when
 * another process is writing it. */
CPROF__HIDDEN int cprof__cachedir_create_temporary(int d, const char *name,
                                                   char *tmp, size_t cap);
/* Removes the least recently used entries until all fit the bound; keep
 * is never removed. */
CPROF__HIDDEN void cprof__cachedir_evict(int d, const char *keep);
/* Writes all of buf at off. */
CPROF__HIDDEN bool cprof__cachedir_write_at(int fd, const void *buf,
                                            size_t len, off_t off);

#endif
