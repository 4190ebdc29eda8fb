/*
 * The process symbolizer (see symbolize.h). It owns one snapshot of the
 * executable file-backed mappings, an elfutils Dwfl session over the live
 * process, a per-address result cache (and one of what the call at an
 * address calls, for profile.c's tail-call frames) and an arena holding
 * every string and result it hands out; all of it is replaced together
 * when the mappings change, or at a refresh when the cache has grown past
 * CACHE_MAX. Names follow binutils' addr2line (see docs/symbols.md). It
 * may call libdw, libc's file I/O and cprof's allocator; every libdw call
 * runs inside cprof__guard_enter()/cprof__guard_exit() because libdw
 * allocates with plain malloc. It must never be called from a signal
 * handler, never abort on a failure (it reports an error or names the
 * function by object and offset instead) and never fetch debug info over
 * the network: its Dwfl callbacks never reach libdw's debuginfod client.
 *
 * libdw and libelf are loaded when the first session opens (dynload.h), not
 * when the program starts: with liblzma and libbz2 they cost every profiled
 * process about 1 ms of CPU and 0.5 MiB of RSS before main. Without them
 * the mappings are still listed (without build IDs), but no address gets a
 * name.
 */
#include <dlfcn.h>
#include <link.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/cachedir.h"
#include "base/fork.h"
#include "base/dynload.h"
#include "base/env.h"
#include "base/hmap.h"
#include "encode/cutab.h"
#include "encode/debug_cache.h"
#include "encode/maps.h"
#include "base/mem.h"
#include "capture/saferead.h"
#include "capture/cfi.h"
#include "capture/cfi_index.h"
#include "capture/stack.h"
#include "encode/perfmap.h"
#include "encode/symbolize.h"
#include "encode/symcache.h"
#include "encode/vdso.h"
#include "base/lock.h"
#include "base/spin.h"

#define ARENA_CHUNK (64 * 1024)
/* The most addresses the cache keeps between batches (about 700 bytes
 * each): a refresh that finds more starts over, as after a dlopen. */
#define CACHE_MAX 32768
#define MAX_FRAMES CPROF__SYM_MAX_FRAMES

/* libdw and libelf, loaded when the first session opens (dynload.h). The
 * members keep the libraries' own names: libdw has two prefixes, dwfl_ and
 * dwarf_. */
#define LIBDW_FNS(X, v) \
  X(v, dwarf_attr, dwarf_attr) \
  X(v, dwarf_attr_integrate, dwarf_attr_integrate) \
  X(v, dwarf_decl_file, dwarf_decl_file) \
  X(v, dwarf_diecu, dwarf_diecu) \
  X(v, dwarf_dieoffset, dwarf_dieoffset) \
  X(v, dwarf_filesrc, dwarf_filesrc) \
  X(v, dwarf_formstring, dwarf_formstring) \
  X(v, dwarf_formudata, dwarf_formudata) \
  X(v, dwarf_child, dwarf_child) \
  X(v, dwarf_getarangeinfo, dwarf_getarangeinfo) \
  X(v, dwarf_getaranges, dwarf_getaranges) \
  X(v, dwarf_getsrc_die, dwarf_getsrc_die) \
  X(v, dwarf_getsrcfiles, dwarf_getsrcfiles) \
  X(v, dwarf_haspc, dwarf_haspc) \
  X(v, dwarf_lineno, dwarf_lineno) \
  X(v, dwarf_linesrc, dwarf_linesrc) \
  X(v, dwarf_lowpc, dwarf_lowpc) \
  X(v, dwarf_offdie, dwarf_offdie) \
  X(v, dwarf_onearange, dwarf_onearange) \
  X(v, dwarf_ranges, dwarf_ranges) \
  X(v, dwarf_siblingof, dwarf_siblingof) \
  X(v, dwarf_srclang, dwarf_srclang) \
  X(v, dwarf_setalt, dwarf_setalt) \
  X(v, dwarf_tag, dwarf_tag) \
  X(v, dwelf_dwarf_gnu_debugaltlink, dwelf_dwarf_gnu_debugaltlink) \
  X(v, dwelf_elf_gnu_build_id, dwelf_elf_gnu_build_id) \
  X(v, dwelf_elf_gnu_debuglink, dwelf_elf_gnu_debuglink) \
  X(v, dwfl_addrmodule, dwfl_addrmodule) \
  X(v, dwfl_begin, dwfl_begin) \
  X(v, dwfl_end, dwfl_end) \
  X(v, dwfl_lineinfo, dwfl_lineinfo) \
  X(v, dwfl_linux_proc_find_elf, dwfl_linux_proc_find_elf) \
  X(v, dwfl_linux_proc_maps_report, dwfl_linux_proc_maps_report) \
  X(v, dwfl_linux_proc_report, dwfl_linux_proc_report) \
  X(v, dwfl_module_addrdie, dwfl_module_addrdie) \
  X(v, dwfl_module_build_id, dwfl_module_build_id) \
  X(v, dwfl_module_getdwarf, dwfl_module_getdwarf) \
  X(v, dwfl_module_getelf, dwfl_module_getelf) \
  X(v, dwfl_module_getsrc, dwfl_module_getsrc) \
  X(v, dwfl_module_getsym_info, dwfl_module_getsym_info) \
  X(v, dwfl_module_getsymtab, dwfl_module_getsymtab) \
  X(v, dwfl_module_info, dwfl_module_info) \
  X(v, dwfl_offline_section_address, dwfl_offline_section_address) \
  X(v, dwfl_report_begin, dwfl_report_begin) \
  X(v, dwfl_report_offline, dwfl_report_offline) \
  X(v, dwfl_report_end, dwfl_report_end)
CPROF__DYNLIB_DEFINE(libdw, LIBDW_FNS, "libdw.so.1")

#define LIBELF_FNS(X, v) \
  X(v, elf_begin, elf_begin) \
  X(v, elf_end, elf_end) \
  X(v, elf_getdata, elf_getdata) \
  X(v, elf_getphdrnum, elf_getphdrnum) \
  X(v, elf_getscn, elf_getscn) \
  X(v, elf_getshdrstrndx, elf_getshdrstrndx) \
  X(v, elf_nextscn, elf_nextscn) \
  X(v, elf_rawfile, elf_rawfile) \
  X(v, elf_strptr, elf_strptr) \
  X(v, gelf_getphdr, gelf_getphdr) \
  X(v, gelf_getrela, gelf_getrela) \
  X(v, gelf_getshdr, gelf_getshdr) \
  X(v, gelf_getsym, gelf_getsym)
CPROF__DYNLIB_DEFINE(libelf, LIBELF_FNS, "libelf.so.1")

typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len,
                             int *status);

typedef struct arena_chunk {
  struct arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} arena_chunk;

static struct {
  bool ready;          /* a snapshot exists (possibly without a session) */
  cprof_buf signature; /* the exec mappings the snapshot was built from */
  cprof_buf anon_signature; /* ... of them, the anonymous ones (JIT code) */
  size_t stale;        /* results dropped from the cache, still in the arena */
  cprof__sym_mapping *maps;
  size_t nmaps;
  Dwfl *dwfl;
  arena_chunk *arena;
  cprof__hmap cache;   /* pc -> cprof__sym_result * */
  cprof__hmap strings; /* content hash -> interned char * */
  demangle_fn demangle;
  /* interned system name -> its interned name, demangled or itself */
  cprof__hmap demangled;
  struct module_syms *modsyms; /* a list, one per module looked up */
  cprof__hmap callees; /* call site -> cprof__sym_callee *, or 1 for none */
  cprof__hmap stubs;   /* PLT stub -> its GOT slot's value, or 1 for none */
  struct hdr_copy *hdr_copies; /* fde_start's tables, in the arena */
  struct sym_object *objects;  /* the symbol cache's, one per build ID */
  bool session_tried; /* the session was opened, or could not be */
  /* The symbol cache's tag for this snapshot: 0 not made yet, 1 made (in
   * tag), 2 none (no cache). */
  int tag_state;
  char tag[2 * 64 + 64];
  /* An image resolved offline (cprof__sym_scan_image): "memory" is read
   * from its loadable segments, never from the process. */
  const unsigned char *image;
  size_t image_len;
  Elf *image_elf;
  uint64_t image_bias;
  /* Saves put off while a dump writes several profiles
   * (cprof__sym_hold_saves): one save then writes each entry once. */
  int saves_held;
  uint64_t range_hits; /* addresses named by a cached range */
} S;

static CPROF__FORK_LOCK pthread_mutex_t sym_mu = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void sym_fork_init(void);

/* The process's id while the lock is held, for the reads of its own
 * memory (process_vm_readv names the process): asked once a lock rather
 * than at each of a dump's few thousand reads. A fork child takes the
 * lock afresh, so it never reads its parent's memory. */
static pid_t locked_pid;

void cprof__sym_lock(void) {
  pthread_once(&fork_once, sym_fork_init);
  cprof__lock(&sym_mu);
  locked_pid = getpid();
}
static void code_pages_forget(void);

void cprof__sym_unlock(void) {
  code_pages_forget();
  cprof__unlock(&sym_mu);
}

/* Arena: bump allocation in 64 KiB chunks, freed all at once on rebuild. */

static void *arena_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  arena_chunk *c = S.arena;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    c = cprof__malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->used = 0;
    c->cap = cap;
    if (S.arena && n > ARENA_CHUNK) {
      /* Keep filling the current chunk; put the big one behind it. */
      c->next = S.arena->next;
      S.arena->next = c;
    } else {
      c->next = S.arena;
      S.arena = c;
    }
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

static void arena_free(void) {
  while (S.arena) {
    arena_chunk *next = S.arena->next;
    cprof__free(S.arena);
    S.arena = next;
  }
}

/* Copies a string into the arena once; equal strings share one copy. */
static const char *intern_n(const char *s, size_t n) {
  uint64_t key = cprof__hash_bytes(CPROF__HASH_SEED, s, n), val;
  if (cprof__hmap_get(&S.strings, key, &val)) {
    const char *old = (const char *)(uintptr_t)val;
    if (strncmp(old, s, n) == 0 && old[n] == '\0') return old;
    key = 0; /* a hash collision: keep a private copy */
  }
  char *copy = arena_alloc(n + 1);
  if (!copy) return NULL;
  memcpy(copy, s, n);
  copy[n] = '\0';
  if (key) cprof__hmap_put(&S.strings, key, (uint64_t)(uintptr_t)copy);
  return copy;
}

static const char *intern(const char *s) { return intern_n(s, strlen(s)); }

/*
 * Files. Every file the symbolizer reads is opened here, never by libdw on
 * its own (the Dwfl callbacks below hand it descriptors), and the same
 * way: O_NONBLOCK, so that a FIFO or a device where a debug file is looked
 * for cannot hold the open (and O_NONBLOCK is harmless on a regular file);
 * O_CLOEXEC, so that a program the host execs never inherits it; and
 * taken only when fstat says it is a regular file. An object's own path
 * (from /proc/self/maps, where the loader resolved every link) is opened
 * O_NOFOLLOW too; a debug file's is not, since /usr/lib/debug/.build-id
 * is a tree of symbolic links.
 *
 * libelf maps what it is given (libdw's own choice, ELF_C_READ_MMAP_PRIVATE):
 * reading debug information through read() instead would copy every
 * section it touches into the heap, hundreds of megabytes for a large C++
 * program. A mapped file that is truncated in place afterwards faults
 * (SIGBUS) where its pages are gone, so each file handed to libdw is
 * remembered with its size, and a refresh that finds one of them shorter
 * than it was drops the session (the next opens them again). What remains
 * is a file truncated in the middle of one profile's symbolization; libelf
 * itself checks every section against the size it mapped.
 */
typedef struct watched_file {
  struct watched_file *next;
  dev_t dev;
  ino_t ino;
  off_t size;
  const char *path; /* in the arena */
} watched_file;

static watched_file *watched; /* the session's files; under the lock */

/*
 * The symbol cache (symcache.h; docs/symbols.md): for each object with a
 * build ID, the results of earlier processes and runs, read from the debug
 * cache's directory the first time one of its addresses is looked up, and
 * the results found here since, written back by cprof__sym_save. An
 * address found there is named without libdw ever reading the object's
 * debug information (which is most of what a short program's exit dump
 * used to cost). Entries are used only while their stamp holds: cprof's
 * own build and the demangler's presence are the same, and so is every
 * file the search for the object's debug information looked at (the
 * object's file, each candidate debug file, present or absent).
 */
typedef struct sym_object {
  struct sym_object *next;
  const char *build_id; /* hex, in the arena */
  bool tried;           /* its entry was read (or found missing, or bad) */
  bool have_view;       /* ... and is usable: view is over file */
  bool have_status;     /* file was read, with this status: */
  struct stat status;
  int64_t checked_ns;   /* when the entry was last read or looked at */
  cprof_buf file;
  cprof__symcache_view view;
  /* The parts this process appended to the entry since it was read or
   * written, which view holds too. */
  cprof_buf appended[CPROF__SYMCACHE_PARTS];
  uint32_t nappended;
  bool searched;   /* its debug information was looked for in this session */
  cprof_buf files; /* stamp records of what that search looked at */
  bool bad;        /* ... which could not all be kept */
  cprof__symcache_add *adds; /* results new since the last save */
  size_t nadds, adds_cap;
  /* Its compile-unit table (cutab.h), over cu_file: CU_UNTRIED until its
   * DWARF is first needed, CU_TABLE, or CU_NONE (no cache, no
   * .debug_aranges: libdwfl finds the units itself). */
  int cu_state;
  cprof_buf cu_file;
  cprof__cutab cu;
} sym_object;

enum { CU_UNTRIED = 0, CU_TABLE = 1, CU_NONE = 2 };

/* Replaces o's entry bytes with file (taken; {0} for none). */
static void object_take_file(sym_object *o, cprof_buf file) {
  cprof_buf_free(&o->file);
  for (uint32_t i = 0; i < o->nappended; i++)
    cprof_buf_free(&o->appended[i]);
  o->nappended = 0;
  o->file = file;
}

static void object_free(sym_object *o) {
  object_take_file(o, (cprof_buf){0});
  cprof_buf_free(&o->cu_file);
  cprof_buf_free(&o->files);
  cprof__free(o->adds);
}

/* The object whose debug information is being looked for: every path
 * tried goes into its stamp. */
static sym_object *recording;

static void record_path(const char *path) {
  if (cprof__symcache_stamp_file(&recording->files, path) != 0)
    recording->bad = true; /* an incomplete stamp: never written */
}

/* Opens path for reading, as above: -1 unless it is a regular file, with
 * *st its status. */
static int open_regular(const char *path, bool nofollow, struct stat *st) {
  if (recording) record_path(path);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC |
                          (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

/* Remembers a file handed to libdw, to notice when it shrinks. */
static void watch_file(const char *path, const struct stat *st) {
  watched_file *w = arena_alloc(sizeof *w);
  const char *copy = w ? intern(path) : NULL;
  if (!copy) return;
  *w = (watched_file){watched, st->st_dev, st->st_ino, st->st_size, copy};
  watched = w;
}

/* True when a file of the session is now shorter than when it was opened
 * (the same file: a new one renamed over it leaves the old one mapped
 * whole). */
static bool watched_file_shrank(void) {
  for (const watched_file *w = watched; w; w = w->next) {
    struct stat st;
    if (stat(w->path, &st) == 0 && st.st_dev == w->dev &&
        st.st_ino == w->ino && st.st_size < w->size)
      return true;
  }
  return false;
}

/*
 * Debug info lookup, on this machine only. libdw's standard search
 * (dwfl_standard_find_debuginfo) ends by asking a debuginfod server
 * whenever DEBUGINFOD_URLS is set, which several distributions do by
 * default; that could download hundreds of megabytes from inside the
 * profiled program. So cprof searches by itself, in the same way whether
 * the variable is set or not: the build-id tree first, then the
 * .gnu_debuglink name where libdw's standard search looks for it: beside
 * the object, in its .debug directory and under /usr/lib/debug, each
 * candidate validated by build ID or, for an object without one, by the
 * link's CRC. A dwz alternate file is found by its build ID in the tree or
 * by the path its link names, both here: libdw's own fallback for it
 * (dwarf_getalt) would open the same paths with a blocking open.
 */
#define DEBUG_ROOT "/usr/lib/debug"
/* The largest debug file whose CRC is computed (it is read whole); only an
 * object without a build ID is matched by CRC. */
#define MAX_CRC_BYTES ((off_t)512 << 20)

/* The CRC-32 of a whole file, as .gnu_debuglink records it (zlib's). */
static bool file_crc(int fd, uint32_t *out) {
  enum { CHUNK = 64 * 1024 };
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size > MAX_CRC_BYTES) return false;
  unsigned char *buf = cprof__malloc(CHUNK);
  if (!buf) return false;
  uLong crc = crc32(0L, Z_NULL, 0);
  off_t at = 0;
  bool ok = true;
  while (at < st.st_size) {
    ssize_t n = pread(fd, buf, CHUNK, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    crc = crc32(crc, buf, (uInt)n);
    at += n;
  }
  cprof__free(buf);
  *out = (uint32_t)crc;
  return ok;
}

/* True when the ELF file open at fd has the build ID bits[0..n). Only its
 * notes are read (read(), not a mapping: nothing of it is kept). */
static bool file_has_build_id(int fd, const unsigned char *bits, int n) {
  Elf *elf = libelf.elf_begin(fd, ELF_C_READ, NULL);
  if (!elf) return false;
  const void *id;
  ssize_t len = libdw.dwelf_elf_gnu_build_id(elf, &id);
  bool same = len == n && memcmp(id, bits, (size_t)n) == 0;
  libelf.elf_end(elf);
  return same;
}

/* True when the file open at fd is mod's debug file: it has mod's build
 * ID when mod has one, else its CRC is crc (not checked when crc is 0). */
static bool debug_file_matches(Dwfl_Module *mod, int fd, GElf_Word crc) {
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = libdw.dwfl_module_build_id(mod, &bits, &vaddr);
  if (n > 0) return file_has_build_id(fd, bits, n);
  uint32_t got;
  return crc == 0 || (file_crc(fd, &got) && got == crc);
}

/* Hands libdw the file open at fd, found at path: *found gets a malloc'd
 * copy of the path (libdw frees it), and the file is watched. */
static int take_file(int fd, const char *path, const struct stat *st,
                     char **found) {
  if (found) *found = strdup(path); /* libdw frees it with free */
  watch_file(path, st);
  return fd;
}

/* Hands libdw a debug file found at path and open at fd, whose build ID
 * is bits[0..n) (n 0 when it has none): its inflated copy from the debug
 * cache (debug_cache.h) when its sections are compressed and the cache
 * serves it, else the file itself. libdw is told the original path either
 * way (a dwz alternate file's relative link is resolved from it); the file
 * watched is the one mapped. */
static int take_debug_file(int fd, const char *path, const struct stat *st,
                           const unsigned char *bits, int n, char **found) {
  char cpath[4096];
  struct stat cst;
  int c = n > 0 ? cprof__debug_cache_open(fd, st, bits, n, cpath, sizeof cpath,
                                          &cst)
                : -1;
  if (c >= 0 && !file_has_build_id(c, bits, n)) {
    close(c);
    cprof__debug_cache_drop(bits, n);
    c = -1;
  }
  if (c < 0) return take_file(fd, path, st, found);
  close(fd);
  if (found) *found = strdup(path); /* libdw frees it with free */
  watch_file(cpath, &cst);
  return c;
}

/* The file of the build-id tree named by bits[0..n), when it exists, is a
 * regular file (through the tree's links) and has that build ID. */
static int open_by_build_id(const unsigned char *bits, int n, char **found) {
  if (n < 3 || n > 64) return -1; /* libdw's own bounds */
  char path[sizeof DEBUG_ROOT + sizeof "/.build-id/xx/" + 2 * 64 +
            sizeof ".debug"];
  int len = snprintf(path, sizeof path, "%s/.build-id/%02x/", DEBUG_ROOT,
                     bits[0]);
  for (int i = 1; i < n; i++)
    len += snprintf(path + len, sizeof path - (size_t)len, "%02x", bits[i]);
  snprintf(path + len, sizeof path - (size_t)len, ".debug");
  struct stat st;
  int fd = open_regular(path, false, &st);
  if (fd < 0) return -1;
  if (!file_has_build_id(fd, bits, n)) {
    close(fd);
    return -1;
  }
  return take_debug_file(fd, path, &st, bits, n, found);
}

/* Opens dir/name when it exists, is a regular file, is not the object
 * itself and matches mod. */
static int try_debug_file(Dwfl_Module *mod, const struct stat *main_st,
                          const char *dir, const char *sub, const char *name,
                          GElf_Word crc, char **found) {
  char path[4096];
  int len = sub ? snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name)
                : snprintf(path, sizeof path, "%s/%s", dir, name);
  if (len <= 0 || (size_t)len >= sizeof path) return -1;
  struct stat st;
  int fd = open_regular(path, false, &st);
  if (fd < 0) return -1;
  if ((st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino) ||
      !debug_file_matches(mod, fd, crc)) {
    close(fd);
    return -1;
  }
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = libdw.dwfl_module_build_id(mod, &bits, &vaddr);
  return take_debug_file(fd, path, &st, bits, n > 0 ? n : 0, found);
}

/* The .gnu_debuglink search for the object at file, in libdw's order:
 * the name (its link, or "<base name>.debug" when it has none) in the
 * object's directory, its .debug subdirectory, then under DEBUG_ROOT in
 * the object's directory and each of its trailing parts ("/usr/lib/x"
 * gives usr/lib/x, lib/x, x and DEBUG_ROOT itself); outside the object's
 * own directory a made-up name is also tried as the object's base name. */
static int find_by_debuglink(Dwfl_Module *mod, const char *file,
                             const char *link, GElf_Word crc, char **found) {
  const char *slash = strrchr(file, '/');
  if (!slash) return -1;
  char dir[4096], made[1024];
  size_t dlen = (size_t)(slash - file);
  const char *base = slash + 1;
  if (dlen >= sizeof dir || !*base) return -1;
  memcpy(dir, file, dlen);
  dir[dlen] = '\0';
  if (!link) {
    if ((size_t)snprintf(made, sizeof made, "%s.debug", base) >= sizeof made)
      return -1;
    link = made;
    crc = 0;
  }
  struct stat main_st;
  if (stat(file, &main_st) != 0) memset(&main_st, 0, sizeof main_st);
  int fd = try_debug_file(mod, &main_st, dlen ? dir : "", NULL, link, crc,
                          found);
  if (fd < 0)
    fd = try_debug_file(mod, &main_st, dlen ? dir : "", ".debug", link, crc,
                        found);
  if (fd < 0 && link == made)
    fd = try_debug_file(mod, &main_st, dlen ? dir : "", ".debug", base, 0,
                        found);
  for (const char *sub = dir; fd < 0 && dir[0] == '/';) {
    sub = strchr(sub, '/');
    if (sub) sub++;
    if (sub && !*sub) break;
    fd = try_debug_file(mod, &main_st, DEBUG_ROOT, sub, link, crc, found);
    if (fd < 0 && link == made)
      fd = try_debug_file(mod, &main_st, DEBUG_ROOT, sub, base, 0, found);
    if (!sub) break;
  }
  return fd;
}

/* The dwz alternate file of mod's DWARF (whose file is at file_name): by
 * its build ID in the build-id tree, else at the path its link names
 * (relative to the DWARF's directory), checked by build ID. When there is
 * none, libdw is told so, with the mark its own search leaves
 * (dwarf_getalt: "looked, none"), so that it never looks by itself. */
static int find_altfile(Dwfl_Module *mod, const char *file_name,
                        char **found) {
  Dwarf_Addr bias;
  Dwarf *dw = libdw.dwfl_module_getdwarf(mod, &bias);
  const char *altname;
  const void *id;
  ssize_t n = dw ? libdw.dwelf_dwarf_gnu_debugaltlink(dw, &altname, &id) : -1;
  int fd = -1;
  if (n > 0 && n <= 64) {
    fd = open_by_build_id(id, (int)n, found);
    const char *slash = file_name ? strrchr(file_name, '/') : NULL;
    char path[4096];
    int len = altname[0] == '/'
                  ? snprintf(path, sizeof path, "%s", altname)
              : slash ? snprintf(path, sizeof path, "%.*s/%s",
                                 (int)(slash - file_name), file_name, altname)
                      : -1;
    struct stat st;
    if (fd < 0 && len > 0 && (size_t)len < sizeof path &&
        (fd = open_regular(path, false, &st)) >= 0) {
      if (file_has_build_id(fd, id, (int)n)) {
        take_file(fd, path, &st, found);
      } else {
        close(fd);
        fd = -1;
      }
    }
  }
  if (fd < 0 && dw) libdw.dwarf_setalt(dw, (Dwarf *)UINTPTR_MAX);
  return fd;
}

static struct sym_object *object_of_module(Dwfl_Module *mod);
static int search_debuginfo(Dwfl_Module *mod, const char *file_name,
                            const char *debuglink_file,
                            GElf_Word debuglink_crc,
                            char **debuginfo_file_name);

static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, GElf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc,
                          char **debuginfo_file_name) {
  (void)userdata;
  (void)base;
  /* What is looked at is the object's symbol cache stamp: its own file
   * first, then every place tried, also for a dwz alternate file. */
  recording = object_of_module(mod);
  const char *own_path = file_name && file_name[0] == '/' ? file_name
                         : modname && modname[0] == '/' ? modname
                                                         : NULL;
  if (recording && !recording->searched) {
    recording->files.len = 0;
    if (own_path) record_path(own_path);
    recording->searched = own_path != NULL;
  }
  int fd = search_debuginfo(mod, file_name, debuglink_file, debuglink_crc,
                            debuginfo_file_name);
  recording = NULL;
  return fd;
}

static int search_debuginfo(Dwfl_Module *mod, const char *file_name,
                            const char *debuglink_file,
                            GElf_Word debuglink_crc,
                            char **debuginfo_file_name) {
  /* libdw asks again for a dwz alternate file, naming it as the link; the
   * object's own link tells the two requests apart. */
  GElf_Addr bias;
  GElf_Word own_crc = 0;
  Elf *elf = libdw.dwfl_module_getelf(mod, &bias);
  const char *own = elf ? libdw.dwelf_elf_gnu_debuglink(elf, &own_crc) : NULL;
  if (debuglink_file && (!own || strcmp(own, debuglink_file) != 0 ||
                         own_crc != debuglink_crc))
    return find_altfile(mod, file_name, debuginfo_file_name);
  const unsigned char *bits;
  GElf_Addr vaddr;
  int nbits = libdw.dwfl_module_build_id(mod, &bits, &vaddr);
  int fd = nbits > 0 ? open_by_build_id(bits, nbits, debuginfo_file_name) : -1;
  if (fd >= 0 || !file_name) return fd;
  fd = find_by_debuglink(mod, file_name, debuglink_file, debuglink_crc,
                         debuginfo_file_name);
  if (fd < 0) {
    /* A symbolic link's target may be the name the debug file goes by. */
    char *canon = realpath(file_name, NULL);
    if (canon && strcmp(canon, file_name) != 0)
      fd = find_by_debuglink(mod, canon, debuglink_file, debuglink_crc,
                             debuginfo_file_name);
    cprof__free_foreign(canon); /* realpath allocated it with malloc */
  }
  return fd;
}

/* The ELF file of a module: an object the process mapped, opened as every
 * file here (open_regular, O_NOFOLLOW: its path in the maps has no link
 * left) and given to libdw as an Elf, so libdw opens nothing itself. The
 * vDSO and a mapping whose file is deleted are read from the process's
 * memory, by libdw's own callback (through /proc/PID/mem). */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                    Dwarf_Addr base, char **file_name, Elf **elfp) {
  static const char deleted[] = " (deleted)";
  size_t len = strlen(modname);
  if (modname[0] != '/' ||
      (len > sizeof deleted - 1 &&
       strcmp(modname + len - (sizeof deleted - 1), deleted) == 0))
    return libdw.dwfl_linux_proc_find_elf(mod, userdata, modname, base,
                                          file_name, elfp);
  struct stat st;
  int fd = open_regular(modname, true, &st);
  if (fd < 0) return -1;
  Elf *elf = libelf.elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
  if (!elf) {
    close(fd);
    return -1;
  }
  *elfp = elf;
  return take_file(fd, modname, &st, file_name);
}

static const Dwfl_Callbacks callbacks = {.find_elf = find_elf,
                                         .find_debuginfo = find_debuginfo};

/*
 * The symbolizer's calls into the dynamic loader (dlsym, dl_iterate_phdr)
 * hold loader_mu, which fork takes after the symbolizer's own lock:
 * glibc's fork takes none of the loader's locks, so a child forked while
 * another thread is inside one of those calls inherits the loader's lock
 * held and hangs at its next dlopen or dl_iterate_phdr (a fork child's
 * exit dump, when fork had given up waiting for the parent's dumper to
 * finish symbolizing). Each call is short. Taken only with the
 * symbolizer's lock held. Loading libdw is not covered: cprof__dynload
 * registers fork handlers on its first call, under fork's own
 * registration lock, which fork holds while it takes this one.
 */
static CPROF__FORK_LOCK pthread_mutex_t loader_mu = PTHREAD_MUTEX_INITIALIZER;

/* Set for a final dump whose signal interrupted a thread inside the
 * dynamic loader, which may hold the loader's lock until the dump ends:
 * nothing here calls into the loader then (no dlopen, dlsym or
 * dl_iterate_phdr). A libdw not loaded by then is not loaded: the profile
 * keeps its mappings and addresses, for go tool pprof to name. */
static atomic_bool avoid_loader;

void cprof__sym_avoid_loader(void) { atomic_store(&avoid_loader, true); }

/* Loads libdw and libelf on the first call; later calls return the first
 * answer. A failure is reported once, on stderr, and symbolization stays
 * off: every session then fails to open, as when dwfl_begin fails. Called
 * with the symbolizer's lock held. */
static bool load_libdw(void) {
  static bool warned;
  /* Quietly: the process is being ended by a signal, and its dump says
   * what it could not name (mappings without function flags). */
  if (atomic_load(&avoid_loader) &&
      (libdw_lib.state != 1 || libelf_lib.state != 1))
    return false;
  cprof__dynlib *failed = NULL;
  if (cprof__dynload(&libdw_lib) != 0)
    failed = &libdw_lib;
  else if (cprof__dynload(&libelf_lib) != 0)
    failed = &libelf_lib;
  if (!failed) return true;
  if (!warned) {
    warned = true;
    cprof__warn("symbolize: %s; profiles will have addresses but no function "
                "names",
                failed->why);
  }
  return false;
}

/* Reads /proc/self/maps whole; the caller frees *out. */
static int read_maps(char **out, size_t *out_len) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CPROF_ESYS;
  size_t cap = 16 * 1024, len = 0;
  char *buf = cprof__malloc(cap);
  int err = buf ? 0 : CPROF_ENOMEM;
  while (!err) {
    if (len == cap) {
      char *bigger = cap <= SIZE_MAX / 2 ? cprof__realloc(buf, cap * 2) : NULL;
      if (!bigger) {
        err = CPROF_ENOMEM;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = CPROF_EIO;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  if (err) {
    cprof__free(buf);
    return err;
  }
  *out = buf;
  *out_len = len;
  return 0;
}

/* Anonymous executable memory: code a JIT compiler wrote (the kernel may
 * name it, "[anon:NAME]"). */
static bool anon_code(const cprof__map_entry *e) {
  static const char named[] = "[anon:";
  return e->executable &&
         (e->path_len == 0 ||
          (e->path_len > sizeof named - 1 &&
           memcmp(e->path, named, sizeof named - 1) == 0));
}

/* The name a mapping of anonymous code has in a profile: perf's. */
static const char ANON_PATH[] = "//anon";

/* Executable mappings of files, and the vDSO: a walk can pass through the
 * vDSO's code (clock_gettime, gettimeofday), so its frames need a mapping
 * too. */
static bool wanted_file(const cprof__map_entry *e) {
  static const char vdso[] = "[vdso]";
  if (!e->executable || e->path_len == 0) return false;
  return e->path[0] == '/' ||
         (e->path_len == sizeof vdso - 1 &&
          memcmp(e->path, vdso, sizeof vdso - 1) == 0);
}

/* The mappings of a snapshot: those, and anonymous code. */
static bool wanted(const cprof__map_entry *e) {
  return wanted_file(e) || anon_code(e);
}

/* The signature: one canonical line per wanted mapping of a file, inode
 * included so that a different file reloaded at the same place counts as
 * a change. Anonymous code comes and goes with a JIT's work and needs no
 * new session: it has a signature of its own (sign_anon). */
static int sign_entry(const cprof__map_entry *e, void *ctx) {
  if (!wanted_file(e)) return 0;
  return cprof__buf_printf(ctx, "%llx %llx %llx %llu %.*s\n",
                           (unsigned long long)e->start,
                           (unsigned long long)e->end,
                           (unsigned long long)e->offset,
                           (unsigned long long)e->inode, (int)e->path_len,
                           e->path);
}

static int sign_anon(const cprof__map_entry *e, void *ctx) {
  if (!anon_code(e)) return 0;
  return cprof__buf_printf(ctx, "%llx %llx\n", (unsigned long long)e->start,
                           (unsigned long long)e->end);
}

typedef struct collect_ctx {
  size_t n;
} collect_ctx;

static int collect_entry(const cprof__map_entry *e, void *ctx) {
  collect_ctx *cc = ctx;
  if (!wanted(e)) return 0;
  bool anon = anon_code(e);
  cprof__sym_mapping *m = &S.maps[cc->n];
  /* Adjacent pieces of anonymous code (a JIT's code space, split where
   * its pages' permissions differ) are one mapping. */
  if (anon && cc->n > 0 && m[-1].anon && m[-1].limit == e->start) {
    m[-1].limit = e->end;
    return 0;
  }
  cc->n++;
  m->start = e->start;
  m->limit = e->end;
  m->offset = anon ? 0 : e->offset;
  m->inode = e->inode;
  m->path = anon ? ANON_PATH : intern_n(e->path, e->path_len);
  m->build_id = "";
  m->is_main = false;
  m->anon = anon;
  if (!m->path) return CPROF_ENOMEM;
  return 0;
}

static int count_entry(const cprof__map_entry *e, void *ctx) {
  if (wanted(e)) ++*(size_t *)ctx;
  return 0;
}

static void drop_state(void) {
  if (S.dwfl) {
    cprof__guard_enter();
    libdw.dwfl_end(S.dwfl);
    cprof__guard_exit();
    S.dwfl = NULL;
  }
  for (sym_object *o = S.objects; o; o = o->next) object_free(o);
  S.objects = NULL;
  cprof__hmap_free(&S.cache);
  cprof__hmap_free(&S.strings);
  cprof__hmap_free(&S.demangled);
  arena_free();
  watched = NULL;
  S.modsyms = NULL;
  S.maps = NULL;
  S.nmaps = 0;
  S.ready = false;
  cprof__hmap_free(&S.callees);
  cprof__hmap_free(&S.stubs);
  S.hdr_copies = NULL;
  S.stale = 0;
  S.session_tried = false;
  S.tag_state = 0;
}

/* Forgets every name given so far (JIT code moved, or its names changed);
 * the results stay in the arena until the next rebuild, which comes once
 * they are as many as the cache may hold. */
static void forget_results(void) {
  S.stale += S.cache.len;
  cprof__hmap_free(&S.cache);
  cprof__hmap_free(&S.callees);
  cprof__hmap_free(&S.stubs);
}

/* Moves the mapping of /proc/self/exe to index 0, keeping the rest in
 * address order. */
static void put_main_first(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  size_t len = (size_t)n;
  static const char deleted[] = " (deleted)";
  if (len > sizeof deleted - 1 &&
      memcmp(exe + len - (sizeof deleted - 1), deleted, sizeof deleted - 1) == 0)
    len -= sizeof deleted - 1;
  exe[len] = '\0';
  for (size_t i = 0; i < S.nmaps; i++) {
    if (strcmp(S.maps[i].path, exe) != 0) continue;
    cprof__sym_mapping m = S.maps[i];
    memmove(&S.maps[1], &S.maps[0], i * sizeof m);
    m.is_main = true;
    S.maps[0] = m;
    return;
  }
}

/* Opens the session and fills in the build IDs; false if libdw failed or
 * could not be loaded. */
static void fill_build_ids(void);

static bool open_session(void) {
  if (!load_libdw()) return false;
  cprof__guard_enter();
  S.dwfl = libdw.dwfl_begin(&callbacks);
  if (S.dwfl) {
    libdw.dwfl_report_begin(S.dwfl);
    int rc = libdw.dwfl_linux_proc_report(S.dwfl, getpid());
    if (rc != 0) {
      /* A process that made itself not dumpable owns none of its /proc
       * files that are private to their owner: /proc/PID/auxv, which
       * dwfl_linux_proc_report reads first, is refused, while the maps
       * file, readable by all, still tells every object. */
      FILE *maps = fopen("/proc/self/maps", "re");
      if (maps) {
        libdw.dwfl_report_begin(S.dwfl);
        rc = libdw.dwfl_linux_proc_maps_report(S.dwfl, maps);
        fclose(maps);
      }
    }
    if (libdw.dwfl_report_end(S.dwfl, NULL, NULL) != 0 || rc != 0) {
      libdw.dwfl_end(S.dwfl);
      S.dwfl = NULL;
    }
  }
  fill_build_ids();
  cprof__guard_exit();
  return S.dwfl != NULL;
}

/* Each mapping's build ID, from the session's module. Guarded. */
static void fill_build_ids(void) {
  for (size_t i = 0; S.dwfl && i < S.nmaps; i++) {
    cprof__sym_mapping *m = &S.maps[i];
    if (m->build_id[0]) continue; /* read from the loaded object's notes */
    Dwfl_Module *mod = libdw.dwfl_addrmodule(S.dwfl, m->start);
    Dwarf_Addr bias;
    const unsigned char *bits;
    GElf_Addr vaddr;
    if (!mod || !libdw.dwfl_module_getelf(mod, &bias)) continue;
    int nbits = libdw.dwfl_module_build_id(mod, &bits, &vaddr);
    if (nbits <= 0) continue;
    char *hex = arena_alloc(2 * (size_t)nbits + 1);
    if (!hex) continue;
    for (int j = 0; j < nbits; j++)
      snprintf(hex + 2 * j, 3, "%02x", bits[j]);
    m->build_id = hex;
  }
}

/* Each mapping of a loaded object's code gets the object's build ID from
 * its notes in memory (what the loader mapped), without libdw: a profile
 * whose addresses the symbol cache names needs no session at all. */
static int loader_ids_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  char id[2 * 64 + 1];
  bool have = false;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    /* The mappings are the segment's pages. */
    uint64_t lo = ((uint64_t)info->dlpi_addr + ph->p_vaddr) & ~(uint64_t)4095;
    uint64_t hi = ((uint64_t)info->dlpi_addr + ph->p_vaddr + ph->p_memsz +
                   4095) & ~(uint64_t)4095;
    for (size_t j = 0; j < S.nmaps; j++) {
      cprof__sym_mapping *m = &S.maps[j];
      if (m->anon || m->build_id[0] || m->start < lo || m->limit > hi)
        continue;
      if (!have && !(have = cprof__object_build_id(info, id, sizeof id)))
        return 0;
      const char *copy = intern(id);
      if (copy) m->build_id = copy;
    }
  }
  return 0;
}

static void fill_build_ids_from_loader(void) {
  cprof__guard_enter();
  cprof__lock(&loader_mu);
  dl_iterate_phdr(loader_ids_cb, NULL);
  cprof__unlock(&loader_mu);
  cprof__guard_exit();
}

/* The signature of the current executable mappings. */
static int current_signature(cprof_buf *sig, char **text, size_t *len) {
  int err = read_maps(text, len);
  if (err) return err;
  err = cprof__maps_parse(*text, *len, sign_entry, sig);
  if (err) {
    cprof__free(*text);
    *text = NULL;
    cprof_buf_free(sig);
  }
  return err;
}

static bool same_signature(const cprof_buf *a, const cprof_buf *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* The dynamic loader's counts of objects loaded and unloaded so far. */
static int loader_counts_cb(struct dl_phdr_info *info, size_t size,
                            void *data) {
  (void)size;
  unsigned long long *c = data;
  c[0] = info->dlpi_adds;
  c[1] = info->dlpi_subs;
  return 1;
}

/* When the last refresh read the maps, and the loader's counts then. */
static int64_t refreshed_ns;
static unsigned long long refreshed_counts[2];

/* Fork. A fork child inherits the symbolizer as it is, every name and
 * debug file it has read (so a child's profile costs what a warm one
 * costs), provided no thread was inside it: fork takes the lock, waiting
 * at most FORK_WAIT_MS for a lookup in progress, and hands it over to the
 * child. When another thread held it longer (reading an object's debug
 * information), the state (and libdw's) may be half changed: the child
 * abandons it, unfreed, and starts afresh, with a lock nobody holds. */
#define FORK_WAIT_MS 50
static CPROF__FORK_DATA bool held_at_fork;

static void sym_before_fork(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += FORK_WAIT_MS * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  held_at_fork = ((int (*)(pthread_mutex_t *, const struct timespec *))
                      cprof__real(CPROF__F_MUTEX_TIMEDLOCK))(&sym_mu,
                                                             &until) == 0;
  /* After the symbolizer's lock, as every other taker of loader_mu: when
   * fork holds the former, nobody holds the latter; when a lookup
   * outlasted the wait, fork waits here only for its loader call in
   * progress, and the lookup's next one waits for the fork. */
  cprof__lock(&loader_mu);
}

static void sym_parent_after_fork(void) {
  cprof__unlock(&loader_mu);
  if (held_at_fork) cprof__unlock(&sym_mu);
}

static void sym_child_after_fork(void) {
  cprof__unlock(&loader_mu);
  if (held_at_fork) {
    /* Siblings forked before this child may have added to the entries
     * since the parent looked: the child may look again at once. */
    for (sym_object *o = S.objects; o; o = o->next) o->checked_ns = 0;
    S.saves_held = 0; /* the holder is not in the child */
    cprof__unlock(&sym_mu);
    return;
  }
  pthread_mutex_init(&sym_mu, NULL);
  code_pages_forget(); /* copies the interrupted holder made */
  /* The state a thread was changing is left as it is, never freed; kept
   * here, where it stays reachable, so that it is not reported as leaked
   * by a leak checker at the child's exit. */
  static __typeof__(S) abandoned_state __attribute__((used));
  static watched_file *abandoned_watched __attribute__((used));
  abandoned_state = S;
  abandoned_watched = watched;
  __asm__ volatile("" : : "r"(&abandoned_state), "r"(&abandoned_watched)
                   : "memory");
  memset(&S, 0, sizeof S);
  watched = NULL;
  refreshed_ns = 0;
}

static void sym_fork_init(void) {
  cprof__atfork(CPROF__FORK_SYMBOLS, sym_before_fork, sym_parent_after_fork,
                 sym_child_after_fork);
}

/* Rereads the maps at most every REFRESH_NS while the loader has loaded
 * and unloaded nothing: the objects a profile names come and go through
 * the loader (dlopen, dlclose), whose counts say so at once, and anything
 * else that maps code is seen within REFRESH_NS. */
#define REFRESH_NS (1000 * 1000 * 1000)

/*
 * Code that leaves before the profile is written: a runtime unmaps its JIT
 * code and its second mapping of its own code when it shuts down, before
 * the exit dump runs. cprof__sym_note_code() keeps such mappings here, as
 * they were while the program ran, and every later snapshot lists those
 * that are gone since, so their frames keep a mapping and a name.
 */
#define JOURNAL_MAX 64
typedef struct journal_entry {
  uint64_t start, limit, offset, inode;
  char path[256];
  bool anon;
} journal_entry;
static journal_entry journal[JOURNAL_MAX];
static size_t njournal;
static unsigned journal_gen; /* part of the anonymous code's signature */
/* The journal has a lock of its own, not the symbolizer's: the dump thread
 * notes code at any time, forks included, and the symbolizer's lock is set
 * up by a pthread_once that a fork in the middle would leave in progress
 * in the child for ever. A child takes this one over from its parent's
 * thread (base/spin.h). Taken after the symbolizer's, never before. */
static cprof__spin journal_lock;
CPROF__SPIN_FUNCTIONS(__attribute__((unused)))

/* Code outside the objects the unwind tables know (idx): anonymous, or a
 * second mapping of a file's code. */
static bool foreign_code(const cprof__cfi_index *idx,
                         const cprof__map_entry *e) {
  if (anon_code(e)) return true;
  if (!idx || !wanted_file(e) || e->path[0] != '/') return false;
  return !cprof__cfi_code_range(idx, e->start, NULL, NULL);
}

/* ctx: the unwind tables' index, read once for the whole maps text. */
static int journal_entry_cb(const cprof__map_entry *e, void *ctx) {
  if (!foreign_code(ctx, e) || e->path_len >= sizeof journal[0].path)
    return 0;
  bool anon = anon_code(e);
  for (size_t i = 0; i < njournal; i++) {
    journal_entry *j = &journal[i];
    if (j->start == e->start && j->limit == e->end && j->anon == anon)
      return 0;
    /* Anonymous code that grew in place (a JIT's code space). */
    if (anon && j->anon && j->start <= e->end && e->start <= j->limit) {
      if (e->start < j->start) j->start = e->start;
      if (e->end > j->limit) j->limit = e->end;
      journal_gen++;
      return 0;
    }
  }
  if (njournal == JOURNAL_MAX) {
    memmove(&journal[0], &journal[1], (JOURNAL_MAX - 1) * sizeof journal[0]);
    njournal--;
  }
  journal_entry *j = &journal[njournal++];
  memset(j, 0, sizeof *j);
  j->start = e->start;
  j->limit = e->end;
  j->offset = anon ? 0 : e->offset;
  j->inode = e->inode;
  j->anon = anon;
  if (!anon) memcpy(j->path, e->path, e->path_len);
  journal_gen++;
  return 0;
}

void cprof__sym_note_code(void) {
  char *text = NULL;
  size_t len = 0;
  /* libdw is loaded now, while the code noted is still mapped: loaded at
   * the exit dump, after the runtime unmapped its code, it could be
   * mapped where that code was, and the notes would give way to it. */
  static bool loaded;
  if (!loaded) {
    loaded = true;
    cprof__sym_lock();
    load_libdw();
    cprof__sym_unlock();
  }
  if (read_maps(&text, &len) != 0) return;
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  spin_lock(&journal_lock);
  cprof__maps_parse(text, len, journal_entry_cb, (void *)idx);
  spin_unlock(&journal_lock);
  cprof__cfi_read_end(idx);
  cprof__free(text);
}

static int sign_journal(cprof_buf *anon) {
  spin_lock(&journal_lock);
  unsigned gen = journal_gen;
  bool any = njournal > 0;
  spin_unlock(&journal_lock);
  return any ? cprof__buf_printf(anon, "journal %u\n", gen) : 0;
}

/* Whether [start, limit) overlaps a mapping of the snapshot. */
static bool overlaps_maps(uint64_t start, uint64_t limit) {
  for (size_t i = 0; i < S.nmaps; i++)
    if (S.maps[i].start < limit && start < S.maps[i].limit) return true;
  return false;
}

/* Takes the mappings from a maps text into S.maps (arena memory), and the
 * journal's that are gone since. */
static int collect_maps(const char *text, size_t len) {
  size_t count = 0;
  cprof__maps_parse(text, len, count_entry, &count);
  cprof__sym_mapping *maps =
      arena_alloc((count + JOURNAL_MAX + 1) * sizeof *maps);
  if (!maps) return CPROF_ENOMEM;
  S.maps = maps;
  S.nmaps = 0;
  S.tag_state = 0; /* made again from the new mappings' build IDs */
  collect_ctx cc = {0};
  int err = cprof__maps_parse(text, len, collect_entry, &cc);
  if (err) return err;
  S.nmaps = cc.n;
  journal_entry *notes = cprof__malloc(JOURNAL_MAX * sizeof *notes);
  if (!notes) return CPROF_ENOMEM;
  spin_lock(&journal_lock);
  size_t nnotes = njournal;
  memcpy(notes, journal, nnotes * sizeof notes[0]);
  spin_unlock(&journal_lock);
  for (size_t i = 0; i < nnotes && !err; i++) {
    const journal_entry *j = &notes[i];
    if (overlaps_maps(j->start, j->limit)) continue;
    const char *path = j->anon ? ANON_PATH : intern(j->path);
    if (!path) {
      err = CPROF_ENOMEM;
      break;
    }
    S.maps[S.nmaps++] = (cprof__sym_mapping){
        .start = j->start, .limit = j->limit, .offset = j->offset,
        .path = path, .build_id = "", .anon = j->anon, .inode = j->inode};
  }
  cprof__free(notes);
  if (err) return err;
  put_main_first();
  return 0;
}

int cprof__sym_refresh(void) {
  unsigned long long counts[2] = {refreshed_counts[0], refreshed_counts[1]};
  bool loader = !atomic_load(&avoid_loader);
  if (loader) {
    cprof__guard_enter();
    cprof__lock(&loader_mu);
    dl_iterate_phdr(loader_counts_cb, counts);
    cprof__unlock(&loader_mu);
    cprof__guard_exit();
  }
  int64_t now = cprof__mono_ns();
  /* A file libdw maps that shrank would fault where its pages are gone:
   * the session is dropped before anything reads it again. */
  bool shrank = S.dwfl && watched_file_shrank();
  if (S.ready && S.signature.len && S.cache.len + S.stale <= CACHE_MAX &&
      !shrank &&
      counts[0] == refreshed_counts[0] && counts[1] == refreshed_counts[1] &&
      now - refreshed_ns < REFRESH_NS)
    return 0;
  refreshed_ns = now;
  refreshed_counts[0] = counts[0];
  refreshed_counts[1] = counts[1];
  char *text = NULL;
  size_t len = 0;
  cprof_buf sig = {0};
  cprof_buf anon = {0};
  int err = current_signature(&sig, &text, &len);
  if (err) return err;
  cprof__maps_parse(text, len, sign_anon, &anon);
  sign_journal(&anon);
  /* JIT code: a perf map that grew, or code mapped or unmapped, changes
   * names without changing any file's: the results go, the session
   * stays. */
  bool jit = cprof__perfmap_refresh();
  if (S.ready && S.cache.len + S.stale <= CACHE_MAX && !shrank &&
      same_signature(&sig, &S.signature)) {
    if (!same_signature(&anon, &S.anon_signature)) {
      jit = true;
      err = collect_maps(text, len);
      if (err == 0) {
        cprof__guard_enter();
        fill_build_ids();
        cprof__guard_exit();
        if (loader) fill_build_ids_from_loader();
        cprof_buf_free(&S.anon_signature);
        S.anon_signature = anon;
        anon = (cprof_buf){0};
      }
    }
    if (jit) forget_results();
    goto out;
  }

  drop_state();
  cprof_buf_free(&S.signature);
  cprof_buf_free(&S.anon_signature);
  S.anon_signature = anon;
  anon = (cprof_buf){0};
  cprof__guard_enter();
  cprof__lock(&loader_mu);
  if (loader) S.demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
  cprof__unlock(&loader_mu);
  cprof__guard_exit();
  err = collect_maps(text, len);
  if (err) goto out;
  S.ready = true;
  /* The first refresh loads libdw and libelf, which changes the maps. The
   * session is opened when an address the symbol cache does not name is
   * looked up (ensure_session); without the loader (a final dump that
   * interrupted it), now, as libdw is then all there is. */
  bool loading = libdw_lib.state == 0;
  if (!(loader ? load_libdw() : open_session())) {
    /* The mapping list stands; lookups find no names, and the next refresh
     * tries again. */
    err = CPROF_ESYMBOLS;
    goto out;
  }

  /* libdw read the maps on its own. Remember the snapshot only if nothing
   * was loaded or unloaded in between; otherwise the next refresh rebuilds. */
  cprof_buf after = {0};
  char *text2 = NULL;
  size_t len2 = 0;
  if (current_signature(&after, &text2, &len2) == 0) {
    if (same_signature(&sig, &after)) {
      S.signature = sig;
      sig = (cprof_buf){0};
    } else if (loading && libdw_lib.state == 1 &&
               collect_maps(text2, len2) == 0) {
      cprof__guard_enter();
      fill_build_ids();
      cprof__guard_exit();
      /* What changed is (as far as anything can tell) libdw's own
       * arrival, which the session, reading the maps after it, has
       * already seen: the mappings are taken again and the snapshot after
       * it kept. Otherwise the next refresh would read every debug file a
       * second time (and a fork child of a process still warming its
       * names, a third). */
      S.signature = after;
      after = (cprof_buf){0};
    }
  }
  cprof_buf_free(&after);
  cprof__free(text2);
  if (loader) fill_build_ids_from_loader();

out:
  if (err && !S.ready) drop_state();
  cprof_buf_free(&anon);
  cprof_buf_free(&sig);
  cprof__free(text);
  return err;
}

size_t cprof__sym_nmappings(void) { return S.nmaps; }

const cprof__sym_mapping *cprof__sym_mapping_at(size_t i) {
  return i < S.nmaps ? &S.maps[i] : NULL;
}

/* Sets name and system_name from a symbol as the object file spells it. */
static bool set_names(cprof__sym_frame *f, const char *sym) {
  f->system_name = intern(sym);
  if (!f->system_name) return false;
  f->name = f->system_name;
  if (S.demangle && sym[0] == '_' && sym[1] == 'Z') {
    /* Each name once a session: a function's addresses, and the inlined
     * callees each address names, share their names. */
    uint64_t key = (uint64_t)(uintptr_t)f->system_name, got;
    if (cprof__hmap_get(&S.demangled, key, &got)) {
      f->name = (const char *)(uintptr_t)got;
      return true;
    }
    int status = -1;
    char *d = S.demangle(sym, NULL, NULL, &status);
    if (d && status == 0) {
      const char *name = intern(d);
      if (name) f->name = name;
    }
    cprof__free_foreign(d); /* __cxa_demangle allocated it with malloc */
    (void)cprof__hmap_put(&S.demangled, key, (uint64_t)(uintptr_t)f->name);
  }
  return true;
}

/*
 * Symbol tables. dwfl_module_addrinfo scans a module's whole symbol table on
 * every call (about 300 us per lookup in libc with its debug symbols), so
 * each module's function symbols are sorted once, on its first lookup, and
 * searched by bisection. A sized symbol must contain the address, a
 * sizeless one (assembly) covers up to the next symbol, as in
 * dwfl_module_addrinfo; among aliases a global or weak one beats a local
 * one, and otherwise the first in the table wins, as in binutils'
 * addr2line (dwfl_module_addrinfo prefers global to weak, which names
 * glibc's and the sanitizers' functions by their internal aliases).
 */
typedef struct func_sym {
  uint64_t addr;
  uint32_t size;  /* st_size; none is 4 GiB, a larger one is cut there */
  uint32_t index; /* in the table, and SYM_GLOBAL for a global or weak one */
} func_sym;

#define SYM_GLOBAL 0x80000000u

/* An STT_FILE symbol: the source file of the local symbols after it (the
 * only file known for code without line information). */
typedef struct file_mark {
  uint32_t index;
  const char *name; /* NULL for an empty name */
} file_mark;

/*
 * A module's table holds 16 bytes a symbol, its name and section looked up
 * again only for the symbols a lookup returns or weighs: a compiler's
 * 31,000 dynamic symbols fill 0.5 MB, where names, files and section ends
 * kept for each filled 1.7 MB, 425 pages each faulted in on a process's
 * first unnamed address. The STT_FILE marks fill the same allocation from
 * its other end, last first.
 */
typedef struct module_syms {
  struct module_syms *next;
  Dwfl_Module *mod;
  func_sym *syms;
  size_t n;
  file_mark *files; /* descending index */
  size_t nfiles;
} module_syms;

_Static_assert(sizeof(file_mark) <= sizeof(func_sym),
               "file marks share the symbols' array");

/* What find_sym returns: a symbol's address, size, name and file. */
typedef struct sym_hit {
  uint64_t addr, size;
  const char *name; /* libdw's, valid for the session */
  const char *file; /* a local symbol's source file, or NULL */
} sym_hit;

static int sym_order(const void *a, const void *b) {
  const func_sym *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  bool xg = x->index & SYM_GLOBAL, yg = y->index & SYM_GLOBAL;
  if (xg != yg) return xg ? -1 : 1;
  if ((x->size != 0) != (y->size != 0)) return x->size ? -1 : 1;
  return (x->index & ~SYM_GLOBAL) < (y->index & ~SYM_GLOBAL) ? -1 : 1;
}

/* Whether a symbol of the table may name code: a named function, or an
 * untyped symbol (assembly), defined in a section. A name is known to be
 * there by its offset in the string table, not by its first byte: reading
 * that for each of a compiler's 31,000 symbols took a cache miss each, and
 * faulted in the string table's pages. */
static bool is_code_sym(const char *name, const GElf_Sym *sym,
                        GElf_Word shndx) {
  int type = GELF_ST_TYPE(sym->st_info);
  return name && sym->st_name != 0 && shndx != SHN_UNDEF &&
         shndx != SHN_ABS &&
         (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE);
}

/* Sorts syms[0..n) in sym_order's order. They were appended in index
 * order, so a stable sort on (address, global first, sized first) keeps
 * index order among equals: a least-significant-digit radix sort, a
 * counting pass on the two flags and then 11 bits of the address at a
 * time, as many passes as the addresses' span needs (three for a
 * compiler's 30 MB of code). qsort took 14% of a compiler's exit dump
 * for its 31,000 symbols. Falls back to qsort without memory for the
 * second buffer. */
#define SORT_BITS 11
static void sort_syms(func_sym *syms, size_t n) {
  if (n < 2) return;
  func_sym *tmp = cprof__malloc(n * sizeof *tmp);
  size_t *count = cprof__malloc(((size_t)1 << SORT_BITS) * sizeof *count);
  if (!tmp || !count) {
    cprof__free(tmp);
    cprof__free(count);
    qsort(syms, n, sizeof *syms, sym_order);
    return;
  }
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < n; i++) {
    if (syms[i].addr < lo) lo = syms[i].addr;
    if (syms[i].addr > hi) hi = syms[i].addr;
  }
  unsigned span = hi > lo ? 64 - (unsigned)__builtin_clzll(hi - lo) : 0;
  func_sym *from = syms, *to = tmp;
  /* The flags first (digit 0..3), then the address's digits. */
  for (int pass = -1; pass * SORT_BITS < (int)span; pass++) {
    size_t buckets = pass < 0 ? 4 : (size_t)1 << SORT_BITS;
    memset(count, 0, buckets * sizeof *count);
#define DIGIT(f)                                                           \
  (pass < 0 ? (size_t)(((f)->index & SYM_GLOBAL) ? 0 : 2) + ((f)->size == 0) \
            : (size_t)(((f)->addr - lo) >> (pass * SORT_BITS)) &           \
                  (((size_t)1 << SORT_BITS) - 1))
    for (size_t i = 0; i < n; i++) count[DIGIT(&from[i])]++;
    size_t at = 0;
    for (size_t b = 0; b < buckets; b++) {
      size_t c = count[b];
      count[b] = at;
      at += c;
    }
    for (size_t i = 0; i < n; i++) to[count[DIGIT(&from[i])]++] = from[i];
#undef DIGIT
    func_sym *t = from;
    from = to;
    to = t;
  }
  if (from != syms) memcpy(syms, from, n * sizeof *syms);
  cprof__free(tmp);
  cprof__free(count);
}

static module_syms *syms_of(Dwfl_Module *mod) {
  for (module_syms *m = S.modsyms; m; m = m->next)
    if (m->mod == mod) return m;
  module_syms *m = arena_alloc(sizeof *m);
  if (!m) return NULL;
  *m = (module_syms){.next = S.modsyms, .mod = mod};
  S.modsyms = m;
  int total = libdw.dwfl_module_getsymtab(mod);
  if (total <= 1) return m;
  m->syms = arena_alloc((size_t)total * sizeof *m->syms);
  if (!m->syms) return m;
  file_mark *marks = (file_mark *)(void *)(m->syms + total);
  for (int i = 1; i < total; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    const char *name =
        libdw.dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
    if (name && GELF_ST_TYPE(sym.st_info) == STT_FILE) {
      /* Each mark takes a symbol's room: the symbols before it are
       * fewer than i, the marks at most the rest. */
      file_mark *f = (file_mark *)(void *)(m->syms + total - 1 - m->nfiles);
      *f = (file_mark){(uint32_t)i, *name ? name : NULL};
      m->nfiles++;
      marks = f;
      continue;
    }
    if (!is_code_sym(name, &sym, shndx)) continue;
    int bind = GELF_ST_BIND(sym.st_info);
    m->syms[m->n++] = (func_sym){
        .addr = addr,
        .size = sym.st_size > UINT32_MAX ? UINT32_MAX : (uint32_t)sym.st_size,
        .index = (uint32_t)i |
                 (bind == STB_GLOBAL || bind == STB_WEAK ? SYM_GLOBAL : 0),
    };
  }
  m->files = marks;
  sort_syms(m->syms, m->n);
  return m;
}

/* The name of symbol f, with the end of its section when section_end is
 * not NULL (a sizeless symbol covers no further); NULL when libdw no longer
 * gives it. */
static const char *sym_name(Dwfl_Module *mod, const func_sym *f,
                            uint64_t *section_end) {
  GElf_Sym sym;
  GElf_Addr addr;
  GElf_Word shndx;
  Elf *elf = NULL;
  const char *name = libdw.dwfl_module_getsym_info(
      mod, (int)(f->index & ~SYM_GLOBAL), &sym, &addr, &shndx, &elf, NULL);
  if (!name || !section_end) return name;
  *section_end = addr + sym.st_size;
  Elf_Scn *scn = elf ? libelf.elf_getscn(elf, shndx) : NULL;
  GElf_Shdr shdr;
  if (scn && libelf.gelf_getshdr(scn, &shdr) && sym.st_value >= shdr.sh_addr)
    *section_end = addr - (sym.st_value - shdr.sh_addr) + shdr.sh_size;
  return name;
}

/* The source file of local symbol f: the STT_FILE symbol last before it. */
static const char *sym_file(const module_syms *m, const func_sym *f) {
  if (f->index & SYM_GLOBAL) return NULL;
  uint32_t index = f->index;
  size_t lo = 0, hi = m->nfiles; /* descending: the first below is at lo */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->files[mid].index > index)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < m->nfiles ? m->files[lo].name : NULL;
}

/* The function symbol containing pc, into *out; false when none does.
 * With span, also the addresses around pc that get the same answer (the
 * same symbol, or none): span[0] <= pc < span[1]. Those are the
 * addresses from the last symbol at or below pc to the next above it
 * (the walk below goes over the same symbols for each), less those below
 * the end of a symbol passed over (it would hold them) and those past
 * the end of the symbol found. */
static bool find_sym(Dwfl_Module *mod, uint64_t pc, sym_hit *out,
                     uint64_t *span) {
  if (span) span[0] = span[1] = 0;
  module_syms *m = syms_of(mod);
  if (!m) return false;
  if (m->n == 0) {
    if (span) span[1] = UINT64_MAX; /* no symbol anywhere */
    return false;
  }
  size_t lo = 0, hi = m->n; /* the first symbol above pc is at hi */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->syms[mid].addr <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  uint64_t from = hi > 0 ? m->syms[hi - 1].addr : 0;
  uint64_t to = hi < m->n ? m->syms[hi].addr : UINT64_MAX;
  /* Walk back over the nearest addresses (a sized symbol further down can
   * still contain pc when sizeless labels sit inside it); within one
   * address the sort put the best candidate first. */
  const func_sym *hit = NULL, *sizeless = NULL;
  uint64_t sizeless_end = 0;
  for (size_t i = hi, groups = 0; !hit && i > 0 && groups < 8; groups++) {
    size_t first = i - 1;
    while (first > 0 && m->syms[first - 1].addr == m->syms[i - 1].addr)
      first--;
    for (size_t j = first; j < i; j++) {
      const func_sym *f = &m->syms[j];
      uint64_t end;
      if (f->size != 0 && pc - f->addr < f->size) {
        hit = f;
        break;
      }
      if (f->size != 0 && f->addr + f->size > from)
        from = f->addr + f->size; /* passed over: ends at or below pc */
      if (f->size == 0 && groups == 0 && !sizeless &&
          sym_name(mod, f, &end)) {
        if (pc < end) {
          sizeless = f;
          sizeless_end = end;
        } else if (end > from) {
          from = end;
        }
      }
    }
    i = first;
  }
  if (hit && hit->addr + hit->size < to) to = hit->addr + hit->size;
  if (!hit && sizeless) {
    hit = sizeless;
    if (sizeless_end < to) to = sizeless_end;
  }
  if (span) {
    span[0] = from;
    span[1] = to;
  }
  const char *name = hit ? sym_name(mod, hit, NULL) : NULL;
  if (!name || !*name) return false;
  *out = (sym_hit){hit->addr, hit->size, name, sym_file(m, hit)};
  return true;
}

static const char *die_string(Dwarf_Die *die, unsigned attr) {
  Dwarf_Attribute a;
  if (!libdw.dwarf_attr_integrate(die, attr, &a)) return NULL;
  return libdw.dwarf_formstring(&a);
}

/* The symbol of a DWARF function: its linkage name where it has one (C++),
 * else its plain name. */
static const char *die_symbol(Dwarf_Die *die) {
  const char *s = die_string(die, DW_AT_linkage_name);
  if (!s) s = die_string(die, DW_AT_MIPS_linkage_name);
  if (!s) s = die_string(die, DW_AT_name);
  return s;
}

/* An unsigned attribute of a DIE; false when it has none. */
static bool udata_attr(Dwarf_Die *die, unsigned attr, Dwarf_Word *v) {
  Dwarf_Attribute a;
  return libdw.dwarf_formudata(libdw.dwarf_attr(die, attr, &a), v) == 0;
}

/* The call site an inlined_subroutine DIE records. */
static void call_site(Dwarf_Die *inl, Dwarf_Files *files, size_t nfiles,
                      const char **file, int *line) {
  Dwarf_Word v;
  *file = NULL;
  *line = 0;
  if (files && udata_attr(inl, DW_AT_call_file, &v) && v < nfiles)
    *file = libdw.dwarf_filesrc(files, v, NULL, NULL);
  if (udata_attr(inl, DW_AT_call_line, &v) && v <= (Dwarf_Word)INT32_MAX)
    *line = (int)v;
}

static bool set_frame(cprof__sym_frame *f, const char *sym, const char *file,
                      int line, uint64_t start) {
  if (!set_names(f, sym)) return false;
  f->file = intern(file ? file : "");
  if (!f->file) return false;
  f->line = line > 0 ? line : 0;
  f->start = start;
  return true;
}

/* An unsigned attribute of a DIE or of the DIE it completes (its abstract
 * origin or specification); false when none has it. */
static bool udata_integrate(Dwarf_Die *die, unsigned attr, Dwarf_Word *v) {
  Dwarf_Attribute a;
  return libdw.dwarf_formudata(libdw.dwarf_attr_integrate(die, attr, &a),
                               v) == 0;
}

/* A function DIE's first address: its low_pc, else the start of its first
 * range (a function split into hot and cold parts has ranges only). */
static bool die_start(Dwarf_Die *die, Dwarf_Addr *start) {
  if (libdw.dwarf_lowpc(die, start) == 0) return true;
  Dwarf_Addr base, end;
  return libdw.dwarf_ranges(die, 0, &base, start, &end) > 0;
}

/* The languages whose functions are better named by their symbols than
 * by DW_AT_name: where symbols are mangled, DW_AT_name is a bare name (no
 * scope, no parameters); in assembly it is one of the labels at the
 * function's address, no better than the symbol. binutils' addr2line makes
 * the same choice. */
static bool symbol_language(Dwarf_Die *cu) {
  switch (libdw.dwarf_srclang(cu)) {
    case DW_LANG_C_plus_plus:
    case DW_LANG_C_plus_plus_03:
    case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14:
    case DW_LANG_ObjC_plus_plus:
    case DW_LANG_D:
    case DW_LANG_Rust:
    case DW_LANG_Mips_Assembler:
      return true;
    default:
      return false;
  }
}

/* Copies len bytes of the process's memory at addr; false when unreadable
 * (an object unloaded meanwhile, say). */
static bool read_image(uint64_t addr, void *out, size_t len);

/*
 * Pages of the process's memory read while the lock is held, each copied
 * whole by one process_vm_readv the first time a read falls in it. Naming
 * a compiler's exit profiles reads the code before 5,000 return addresses
 * (what each call calls), PLT stubs and FDEs, a system call each: 6,000
 * calls, 15 ms. The copies are dropped when the lock is released, so
 * memory that changes (JIT code, a GOT slot bound meanwhile) is read again
 * by the next holder. Direct-mapped by page number; the pages are
 * allocated on first use and kept. The first CODE_DIRECT reads of a hold
 * are made directly: a fork child's dump reads a few dozen words, and
 * copying a page for each (into pages the fork made copy-on-write) cost
 * it more than the calls saved.
 */
#define CODE_DIRECT 64
#define CODE_PAGES 32
#define CODE_PAGE ((uint64_t)4096)
typedef struct code_page {
  uint64_t page;        /* its address */
  uint64_t generation;  /* valid while equal to code_generation */
  unsigned char bytes[CODE_PAGE];
} code_page;
static code_page *code_pages;
static uint64_t code_generation = 1; /* under the lock */
static unsigned code_reads;           /* in this hold, up to CODE_DIRECT */

static void code_pages_forget(void) {
  code_generation++;
  code_reads = 0;
}

/* The copy of the page at page, read now if it is not held; NULL when it
 * cannot be read or no copy can be made. Lock held. */
static const unsigned char *code_page_at(uint64_t page) {
  if (!code_pages) {
    code_pages = cprof__calloc(CODE_PAGES, sizeof *code_pages);
    if (!code_pages) return NULL;
  }
  code_page *c = &code_pages[(page / CODE_PAGE) % CODE_PAGES];
  if (c->generation == code_generation && c->page == page) return c->bytes;
  struct iovec local = {c->bytes, CODE_PAGE},
               remote = {(void *)(uintptr_t)page, CODE_PAGE};
  c->generation = 0;
  if (process_vm_readv(locked_pid, &local, 1, &remote, 1, 0) !=
      (ssize_t)CODE_PAGE)
    return NULL;
  c->page = page;
  c->generation = code_generation;
  return c->bytes;
}

static bool read_mem(uint64_t addr, void *out, size_t len) {
  if (S.image) return read_image(addr, out, len);
  if (addr < 4096 || len > CODE_PAGE || addr > UINT64_MAX - len) return false;
  if (code_reads < CODE_DIRECT) {
    code_reads++;
    return cprof__safe_read_in(locked_pid, (uintptr_t)addr, out, len);
  }
  uint64_t page = addr & ~(CODE_PAGE - 1), end = addr + len;
  size_t first =
      end - page <= CODE_PAGE ? len : (size_t)(page + CODE_PAGE - addr);
  const unsigned char *a = code_page_at(page);
  const unsigned char *b = first < len ? code_page_at(page + CODE_PAGE) : a;
  if (!a || !b) /* a page that cannot be copied whole: read just the bytes */
    return cprof__safe_read_in(locked_pid, (uintptr_t)addr, out, len);
  memcpy(out, a + (addr - page), first);
  if (first < len) memcpy((unsigned char *)out + first, b, len - first);
  return true;
}

/* len bytes at addr of an object loaded with bias whose file is
 * data[0..size), parsed as elf: from the file bytes of the loadable
 * segment holding them; false when none holds them all. */
static bool read_file_bytes(Elf *elf, const unsigned char *data, size_t size,
                            uint64_t bias, uint64_t addr, void *out,
                            size_t len) {
  size_t nphdr = 0;
  if (!elf || !data || libelf.elf_getphdrnum(elf, &nphdr) != 0) return false;
  uint64_t off = addr - bias;
  for (size_t i = 0; i < nphdr && i <= INT_MAX; i++) {
    GElf_Phdr ph;
    if (!libelf.gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
        off < ph.p_vaddr || off - ph.p_vaddr >= ph.p_filesz ||
        len > ph.p_filesz - (off - ph.p_vaddr))
      continue;
    uint64_t at = ph.p_offset + (off - ph.p_vaddr);
    if (at < ph.p_offset || at > size || len > size - at) return false;
    memcpy(out, data + at, len);
    return true;
  }
  return false;
}

/* The object file fde_start reads from, when it has it (libelf's mapping
 * of the module's file): .eh_frame_hdr and .eh_frame are the file's bytes
 * in memory too (read-only, nothing relocates them), and reading them
 * there costs no system call. A stripped compiler's exit dump looked up
 * 673 FDEs, each a page of .eh_frame copied by process_vm_readv. */
typedef struct file_image {
  Elf *elf;
  const unsigned char *data;
  size_t size;
  uint64_t bias;
} file_image;
static const file_image *image_reading;

/* An object's .eh_frame_hdr with its search table, copied whole on its
 * first use by one read: a binary search through the fault-free reader
 * costs a system call a step, 100 ms of a stripped compiler's exit dump
 * (cc1plus, 5,000 addresses). Kept in the arena, with the session. */
typedef struct hdr_copy {
  struct hdr_copy *next;
  uint64_t addr;
  size_t len;
  unsigned char *data; /* NULL: the table could not be copied */
} hdr_copy;

/* The largest table copied (about 2 million functions); a larger one is
 * searched where it is loaded. */
#define MAX_HDR_COPY ((size_t)16 << 20)

static const hdr_copy *hdr_reading; /* the copy read_hdr serves from */

static bool read_hdr(uint64_t addr, void *out, size_t len) {
  const file_image *f = image_reading;
  if (f && read_file_bytes(f->elf, f->data, f->size, f->bias, addr, out, len))
    return true;
  const hdr_copy *c = hdr_reading;
  if (c && c->data && addr >= c->addr && addr - c->addr <= c->len &&
      len <= c->len - (addr - c->addr)) {
    memcpy(out, c->data + (addr - c->addr), len);
    return true;
  }
  return read_mem(addr, out, len);
}

/* len bytes at addr by one read, fault-free: from the image being scanned,
 * or through process_vm_readv, which copies them or fails (the fault-free
 * reader reads 64 bytes at most). */
static bool read_bulk(uint64_t addr, void *out, size_t len) {
  if (S.image) return read_image(addr, out, len);
  if (addr < 4096 || addr > UINTPTR_MAX - len) return false;
  struct iovec local = {out, len}, remote = {(void *)(uintptr_t)addr, len};
  return process_vm_readv(locked_pid, &local, 1, &remote, 1, 0) ==
         (ssize_t)len;
}

static const hdr_copy *hdr_copy_of(uint64_t hdr) {
  for (const hdr_copy *c = S.hdr_copies; c; c = c->next)
    if (c->addr == hdr) return c;
  hdr_copy *c = arena_alloc(sizeof *c);
  if (!c) return NULL;
  *c = (hdr_copy){S.hdr_copies, hdr, 0, NULL};
  S.hdr_copies = c;
  uint64_t table;
  uint32_t count;
  if (!cprof__eh_hdr_table(hdr, read_mem, &table, &count) ||
      count > (MAX_HDR_COPY - 16) / 8)
    return c;
  size_t len = (size_t)(table - hdr) + 8 * (size_t)count;
  unsigned char *data = arena_alloc(len);
  if (data && read_bulk(hdr, data, len)) {
    c->data = data;
    c->len = len;
  }
  return c;
}

/*
 * The first address of the function holding pc, from the module's
 * .eh_frame_hdr: its table lists every FDE by its first address, sorted,
 * and one FDE spans one function (stripping keeps .eh_frame). The table is
 * read where the object is loaded, copied whole on its first use
 * (hdr_copy_of). Only the encoding every linker writes
 * is understood (the table datarel sdata4); false otherwise, or when no
 * FDE covers pc.
 */
static bool fde_start(Dwfl_Module *mod, uint64_t pc, uint64_t *start,
                      uint64_t *end) {
  GElf_Addr bias = 0;
  Elf *elf = libdw.dwfl_module_getelf(mod, &bias);
  size_t nphdr = 0;
  if (!elf || libelf.elf_getphdrnum(elf, &nphdr) != 0) return false;
  uint64_t hdr = 0;
  for (size_t i = 0; i < nphdr && !hdr; i++) {
    GElf_Phdr ph;
    if (libelf.gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
      hdr = bias + ph.p_vaddr;
  }
  if (!hdr) return false;
  size_t size = 0;
  const unsigned char *data =
      (const unsigned char *)libelf.elf_rawfile(elf, &size);
  file_image image = {elf, data, size, bias};
  image_reading = data ? &image : NULL;
  /* The file at hand holds the table: no copy of it is needed. */
  hdr_reading = data ? NULL : hdr_copy_of(hdr);
  bool found = cprof__eh_hdr_fde_start(hdr, pc, start, end, read_hdr);
  image_reading = NULL;
  hdr_reading = NULL;
  return found;
}

/* The bytes plt_slot reads. */
#define PLT_STUB_MAX 12

/* The GOT slot a PLT stub at addr jumps through (declared here, defined
 * with the call-site code below). */
static uint64_t plt_slot(uint64_t addr, bool *read);

/* The symbol a relocation of section rela (SHT_RELA) against the ELF
 * address slot names, or NULL. */
static const char *rela_symbol(Elf *elf, Elf_Scn *rela, const GElf_Shdr *sh,
                               uint64_t slot) {
  Elf_Data *d = libelf.elf_getdata(rela, NULL);
  Elf_Scn *symtab = libelf.elf_getscn(elf, sh->sh_link);
  GElf_Shdr symsh;
  if (!d || !sh->sh_entsize || !symtab || !libelf.gelf_getshdr(symtab, &symsh))
    return NULL;
  Elf_Data *syms = libelf.elf_getdata(symtab, NULL);
  size_t n = d->d_size / sh->sh_entsize;
  for (size_t i = 0; syms && i < n && i <= INT_MAX; i++) {
    GElf_Rela r;
    if (!libelf.gelf_getrela(d, (int)i, &r) || r.r_offset != slot) continue;
    GElf_Sym sym;
    size_t index = GELF_R_SYM(r.r_info);
    if (!index || !libelf.gelf_getsym(syms, (int)index, &sym)) return NULL;
    const char *name = libelf.elf_strptr(elf, symsh.sh_link, sym.st_name);
    return name && *name ? name : NULL;
  }
  return NULL;
}

/* The allocated section with contents of mod's file holding pc: its
 * header and name (NULL when the string table has none), and the
 * module's bias; false when no such section holds pc. */
static bool section_holding(Dwfl_Module *mod, uintptr_t pc, GElf_Shdr *sh,
                            const char **name, GElf_Addr *bias) {
  *bias = 0;
  Elf *elf = libdw.dwfl_module_getelf(mod, bias);
  size_t shstrndx;
  if (!elf || libelf.elf_getshdrstrndx(elf, &shstrndx) != 0) return false;
  uint64_t off = pc - *bias;
  for (Elf_Scn *scn = libelf.elf_nextscn(elf, NULL); scn;
       scn = libelf.elf_nextscn(elf, scn)) {
    if (!libelf.gelf_getshdr(scn, sh) || sh->sh_type != SHT_PROGBITS ||
        !(sh->sh_flags & SHF_ALLOC) || off < sh->sh_addr ||
        off - sh->sh_addr >= sh->sh_size)
      continue;
    *name = libelf.elf_strptr(elf, shstrndx, sh->sh_name);
    return true;
  }
  return false;
}

/* The section holding pc (its runtime addresses into span), and whether
 * it is a PLT (a name starting ".plt", or none); false when none holds
 * pc. */
static bool section_at(Dwfl_Module *mod, uintptr_t pc, uint64_t *span,
                       bool *plt) {
  GElf_Shdr sh;
  const char *name;
  GElf_Addr bias;
  if (!section_holding(mod, pc, &sh, &name, &bias)) return false;
  *plt = !name || strncmp(name, ".plt", 4) == 0;
  span[0] = sh.sh_addr + bias;
  span[1] = sh.sh_addr + sh.sh_size + bias;
  return true;
}

/*
 * The name of the PLT stub holding pc, as objdump and perf give it
 * (SYMBOL@plt), or NULL when pc is in no stub (or in the first entry of a
 * lazy .plt, which calls the loader). The stub is the entry of .plt,
 * .plt.sec or .plt.got around pc (entries of sh_entsize bytes, 16 when
 * unset); the symbol is that of the relocation of the GOT slot it jumps
 * through (.rela.plt for .plt and .plt.sec, .rela.dyn for .plt.got).
 * *start gets the stub's runtime address.
 */
static const char *plt_name(Dwfl_Module *mod, uintptr_t pc, uint64_t *start) {
  GElf_Shdr sh;
  const char *sec;
  GElf_Addr bias;
  if (!section_holding(mod, pc, &sh, &sec, &bias) || !sec ||
      (strcmp(sec, ".plt") != 0 && strcmp(sec, ".plt.sec") != 0 &&
       strcmp(sec, ".plt.got") != 0))
    return NULL; /* the section holding pc is not a PLT */
  Elf *elf = libdw.dwfl_module_getelf(mod, &bias);
  uint64_t off = pc - bias;
  uint64_t size = sh.sh_entsize ? sh.sh_entsize : 16;
  uint64_t stub = sh.sh_addr + (off - sh.sh_addr) / size * size;
  bool read;
  uint64_t slot = stub ? plt_slot(stub + bias, &read) : 0;
  if (!slot) return NULL;
  /* .rela.plt (SHF_INFO_LINK: it names the section it patches) first:
   * it is short, .rela.dyn may hold a relocation per pointer. */
  const char *sym = NULL;
  for (int pass = 0; pass < 2 && !sym; pass++)
    for (Elf_Scn *scn = libelf.elf_nextscn(elf, NULL); scn && !sym;
         scn = libelf.elf_nextscn(elf, scn)) {
      GElf_Shdr rsh;
      if (libelf.gelf_getshdr(scn, &rsh) && rsh.sh_type == SHT_RELA &&
          ((rsh.sh_flags & SHF_INFO_LINK) != 0) == (pass == 0))
        sym = rela_symbol(elf, scn, &rsh, slot - bias);
    }
  if (!sym) return NULL;
  char name[512];
  snprintf(name, sizeof name, "%s@plt", sym);
  *start = stub + bias;
  return intern(name);
}

/*
 * The name of a function no symbol or debug information names: its
 * object's base name and the ELF address of its first byte (from the FDE
 * covering pc, else pc itself). That is the address addr2line and pprof
 * take for the object, so the function can be symbolized again later from
 * an unstripped copy; *start gets its runtime address.
 */
static const char *unknown_name(Dwfl_Module *mod, int mapping, uintptr_t pc,
                                uint64_t *start, uint64_t *end) {
  uint64_t first = pc, last = 0;
  if (!fde_start(mod, pc, &first, &last)) first = pc, last = 0;
  if (end) *end = last; /* the name holds up to there (0: pc alone) */
  GElf_Addr bias = 0;
  libdw.dwfl_module_getelf(mod, &bias);
  const char *path = mapping >= 0 ? S.maps[mapping].path : NULL;
  if (!path)
    path = libdw.dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL,
                                  NULL);
  if (!path) path = "";
  const char *base = strrchr(path, '/');
  char name[512];
  snprintf(name, sizeof name, "%s+%#llx", base ? base + 1 : path,
           (unsigned long long)(first - bias));
  *start = first;
  return intern(name);
}

/* The DIEs that can hold scopes (and so inlined code): the ones libdw's
 * dwarf_getscopes descends into. */
static bool may_hold_scopes(int tag) {
  switch (tag) {
    case DW_TAG_compile_unit:
    case DW_TAG_partial_unit:
    case DW_TAG_module:
    case DW_TAG_lexical_block:
    case DW_TAG_with_stmt:
    case DW_TAG_catch_block:
    case DW_TAG_try_block:
    case DW_TAG_entry_point:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_subprogram:
      return true;
    default:
      return false;
  }
}

/*
 * The scopes around pc (an address of the debug information: the
 * runtime address minus the module's bias), outermost first, as the
 * DIE tree nests them: from the CU down, at each level the child that
 * holds pc. dwarf_getscopes finds the innermost scope the same way, but
 * above an inlined instance it goes on with the scopes of the inlined
 * function's own definition, losing every level it was inlined through;
 * dwarf_getscopes_die keeps them but reads the whole CU for each address.
 * At most max scopes; returns how many.
 */
static int scopes_at(Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Die *out,
                     int max) {
  Dwarf_Die cur = *cudie, child;
  int n = 0;
  while (n < max && libdw.dwarf_child(&cur, &child) == 0) {
    bool found = false;
    do {
      if (may_hold_scopes(libdw.dwarf_tag(&child)) &&
          libdw.dwarf_haspc(&child, pc) == 1) {
        out[n++] = cur = child;
        found = true;
        break;
      }
    } while (libdw.dwarf_siblingof(&child, &child) == 0);
    if (!found) break;
  }
  return n;
}

/* Names pc when it is in one of the vDSO's exported functions, from the
 * vDSO's own symbol table in memory (vdso.h): libdw may not have read the
 * image, or may name a function by its weak alias (clock_gettime) where
 * perf gives the global name (__vdso_clock_gettime). */
static bool resolve_vdso(cprof__sym_result *r, uintptr_t pc) {
  static const char vdso[] = "[vdso]";
  uintptr_t base;
  if (r->mapping < 0 || !cprof__vdso_base(&base)) return false;
  const cprof__sym_mapping *m = &S.maps[r->mapping];
  cprof__vdso_sym vs;
  if (strcmp(m->path, vdso) != 0 || m->start != base ||
      !cprof__vdso_symbol((const unsigned char *)base, m->limit - m->start,
                          pc - m->start, &vs))
    return false;
  cprof__sym_frame *f = arena_alloc(sizeof *f);
  if (!f || !set_frame(f, vs.name, "", 0, m->start + vs.start)) return false;
  r->frames = f;
  r->nframes = 1;
  r->has_function = true;
  return true;
}

static Dwarf_Die *unit_and_line(Dwfl_Module *mod, int mapping, uintptr_t pc,
                                Dwarf_Addr *bias, Dwarf_Die *unit,
                                bool *dl, const char **file, int *line);

/* Fills r's frames for a real pc; the caller holds the guard. */
static void resolve(cprof__sym_result *r, uintptr_t pc) {
  if (resolve_vdso(r, pc)) return;
  Dwfl_Module *mod = S.dwfl ? libdw.dwfl_addrmodule(S.dwfl, pc) : NULL;
  if (!mod) return;

  sym_hit hit;
  uint64_t span[2];
  const sym_hit *fs = find_sym(mod, pc, &hit, span) ? &hit : NULL;
  const char *file = NULL;
  int line = 0;
  /* The scopes around pc, each inlined level with the function it is
   * inlined into (as eu-addr2line -i finds them). */
  Dwarf_Addr bias = 0;
  Dwarf_Die unit;
  bool dl = false; /* the line table has a row for pc */
  Dwarf_Die *cudie =
      unit_and_line(mod, r->mapping, pc, &bias, &unit, &dl, &file, &line);
  Dwarf_Die scopes[2 * MAX_FRAMES];
  int nscopes = cudie ? scopes_at(cudie, pc - bias, scopes,
                                  (int)CPROF__ARRAY_LEN(scopes))
                      : 0;
  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  if (cudie && libdw.dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
    files = NULL;

  /* Inlined instances innermost first, up to the containing function;
   * beyond MAX_FRAMES - 1 levels the outer ones are left out. */
  int inl[MAX_FRAMES - 1], ninl = 0, last_inl = -1, sub = -1;
  for (int i = nscopes - 1; i >= 0; i--) {
    int tag = libdw.dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_inlined_subroutine) {
      if (ninl < (int)CPROF__ARRAY_LEN(inl)) inl[ninl++] = i;
      last_inl = i;
    } else if (tag == DW_TAG_subprogram) {
      sub = i;
      break;
    }
  }

  /* The containing function's name, as addr2line gives it: the linkage
   * name where the debug information has one; else, for C++, assembly and
   * the like, the symbol at the function's first address; else its
   * DW_AT_name (for C that is the source name, also of a clone such as
   * foo.constprop.0 or of foo's cold part). The system name is the symbol
   * at its first address when there is one. Without debug information,
   * the symbol covering pc names it. */
  const char *symname = NULL, *sysname = NULL;
  uint64_t start = 0;
  bool by_sym = false; /* named by fs alone */
  if (sub >= 0) {
    Dwarf_Die *fn = &scopes[sub];
    sym_hit at_start;
    const sym_hit *at = NULL;
    Dwarf_Addr low;
    if (die_start(fn, &low)) {
      start = low + bias;
      if (find_sym(mod, start, &at_start, NULL) && at_start.addr == start)
        at = &at_start;
    }
    const char *linkage = die_string(fn, DW_AT_linkage_name);
    if (!linkage) linkage = die_string(fn, DW_AT_MIPS_linkage_name);
    const char *plain = die_string(fn, DW_AT_name);
    if (linkage)
      symname = linkage;
    else if (at && (!plain || symbol_language(cudie)))
      symname = at->name;
    else
      symname = plain;
    sysname = at ? at->name : symname;
    Dwarf_Word decl;
    if (symname && udata_integrate(fn, DW_AT_decl_line, &decl) &&
        decl <= (Dwarf_Word)INT32_MAX)
      r->decl_line = (int)decl;
    /* Code the line table does not cover (crtstuff.c's, say) is still in
     * the file that declares its function; addr2line says so too. */
    if (!dl && ninl == 0) file = libdw.dwarf_decl_file(fn);
  }
  if (!symname && fs) {
    symname = sysname = fs->name;
    start = fs->addr;
    if (!dl) file = fs->file;
    by_sym = true;
  }
  if (symname && !start && fs) start = fs->addr;
  /* A PLT stub has no symbol but a name all the same, which no other copy
   * of its object would improve on. */
  if (!symname && !dl) {
    symname = sysname = plt_name(mod, pc, &start);
    if (!symname) start = 0;
  }
  const char *unknown = NULL;
  uint64_t unknown_start = 0, unknown_end = 0;
  if (!symname) {
    unknown = unknown_name(mod, r->mapping, pc, &unknown_start, &unknown_end);
    if (!unknown) return;
  }

  cprof__sym_frame *frames = arena_alloc((size_t)(ninl + 1) * sizeof *frames);
  if (!frames) return;
  int n = 0;
  for (int k = 0; k < ninl; k++) {
    const char *name = die_symbol(&scopes[inl[k]]);
    const char *f = file;
    int l = line;
    if (k > 0) call_site(&scopes[inl[k - 1]], files, nfiles, &f, &l);
    if (!name && !unknown)
      unknown = unknown_name(mod, r->mapping, pc, &unknown_start, NULL);
    if (!name) name = unknown;
    if (!name || !set_frame(&frames[n], name, f, l, 0)) return;
    n++;
  }
  {
    const char *f = file;
    int l = line;
    if (last_inl >= 0) call_site(&scopes[last_inl], files, nfiles, &f, &l);
    cprof__sym_frame *phys = &frames[n];
    if (!set_frame(phys, symname ? symname : unknown, f, l,
                   symname ? start : unknown_start))
      return;
    if (sysname && strcmp(sysname, phys->system_name) != 0) {
      phys->system_name = intern(sysname);
      if (!phys->system_name) return;
    }
    n++;
  }
  r->frames = frames;
  r->nframes = n;
  r->has_function = symname != NULL;
  r->has_line = frames[0].line > 0;
  r->has_inline = n > 1;
  /* In an object without debug information, one symbol (or, where none
   * is, one FDE) names every address around pc alike: what find_sym
   * gives for those is the same, and nothing else decides the name. */
  Dwarf_Addr dw_bias;
  if (!cudie && n == 1 && !r->has_line && span[0] < span[1] &&
      (by_sym || (unknown && !symname && unknown_end > unknown_start)) &&
      !libdw.dwfl_module_getdwarf(mod, &dw_bias)) {
    uint64_t lo = span[0], hi = span[1], sec[2];
    if (!by_sym) {
      if (unknown_start > lo) lo = unknown_start;
      if (unknown_end < hi) hi = unknown_end;
    }
    /* Within pc's section, and never in a PLT, whose stubs are named one
     * by one (plt_name). */
    bool plt = true;
    if (section_at(mod, pc, sec, &plt) && !plt) {
      if (sec[0] > lo) lo = sec[0];
      if (sec[1] < hi) hi = sec[1];
    } else {
      lo = hi = 0;
    }
    if (lo <= pc && pc < hi) {
      r->range_lo = lo;
      r->range_hi = hi;
    }
  }
}

/*
 * Calls. A call site's instruction is read back (it ends at pc, the
 * return address - 1) and decoded when it is a direct call, call rel32;
 * the target must be the first address of a function the symbolizer
 * knows, which an instruction that merely ends in the same bytes is most
 * unlikely to give. An indirect call is never followed, not even one
 * through a memory slot: the slot may hold another function by now.
 */

/* The function starting at addr, its declaration line and whether a
 * symbol or debug information names it; NULL when addr starts none. */
static const cprof__sym_frame *function_at(uint64_t addr, int *decl_line,
                                           bool *named) {
  const cprof__sym_result *r = cprof__sym_lookup((uintptr_t)addr);
  *named = false;
  if (!r || r->nframes == 0) return NULL;
  const cprof__sym_frame *f = &r->frames[r->nframes - 1];
  if (f->start != addr) return NULL;
  *decl_line = r->decl_line;
  *named = r->has_function;
  return f;
}

/* Whether f is a PLT stub's frame (plt_name). */
static bool is_plt_stub(const cprof__sym_frame *f) {
  size_t n = f ? strlen(f->name) : 0;
  return n > 4 && strcmp(f->name + n - 4, "@plt") == 0 && !*f->file;
}

/* The GOT slot a PLT stub at addr jumps through, or 0 when addr holds no
 * stub: [endbr64] [bnd] jmp *disp32(%rip), the form of .plt, .plt.sec and
 * .plt.got entries. *read says whether the bytes could be read. */
static uint64_t plt_slot(uint64_t addr, bool *read) {
  unsigned char c[PLT_STUB_MAX];
  *read = read_mem(addr, c, sizeof c);
  if (!*read) return 0;
  size_t at = 0;
  if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) at = 4;
  if (c[at] == 0xf2) at++;
  if (c[at] != 0xff || c[at + 1] != 0x25) return 0;
  int32_t disp;
  memcpy(&disp, c + at + 2, sizeof disp);
  return addr + at + 6 + (uint64_t)(int64_t)disp;
}

/* Whether the instruction ending at pc is call rel32, with *disp its
 * displacement: as pc's result says (the symbol cache keeps it, so that a
 * warm exit dump reads no code back), or read now and then kept in the
 * result, when the bytes read all lie in pc's mapping (they are then the
 * object's, the same in every process that maps it). */
static bool call_at(uintptr_t pc, int32_t *disp) {
  cprof__sym_result *r = (cprof__sym_result *)cprof__sym_lookup(pc);
  if (r && r->call != CPROF__CODE_UNREAD) {
    *disp = r->call_disp;
    return r->call == CPROF__CODE_YES;
  }
  unsigned char b[8]; /* b[7] is the byte at pc */
  if (!read_mem(pc - 7, b, sizeof b)) return false;
  bool call = b[3] == 0xe8;
  if (call) memcpy(disp, b + 4, sizeof *disp);
  if (r && r->mapping >= 0 && pc - 7 >= S.maps[r->mapping].start) {
    r->call = call ? CPROF__CODE_YES : CPROF__CODE_NO;
    r->call_disp = call ? *disp : 0;
  }
  return call;
}

/* What the PLT stub at addr jumps to now (its GOT slot's value); false
 * when addr holds no stub. Whether it does is kept in addr's result, as
 * the call is (most targets checked are functions no symbol names, in a
 * stripped program: not stubs); where a stub jumps, per stub, as callees
 * are. */
static bool stub_target(uint64_t addr, uint64_t *to) {
  uint64_t val;
  if (cprof__hmap_get(&S.stubs, addr, &val)) {
    *to = val;
    return val != 1;
  }
  cprof__sym_result *r = (cprof__sym_result *)cprof__sym_lookup(addr);
  if (r && r->stub == CPROF__CODE_NO) return false;
  bool read;
  uint64_t slot = plt_slot(addr, &read);
  if (r && read && r->mapping >= 0 &&
      S.maps[r->mapping].limit - addr >= PLT_STUB_MAX)
    r->stub = slot ? CPROF__CODE_YES : CPROF__CODE_NO;
  bool ok = slot && read_mem(slot, to, sizeof *to) && *to != 1;
  cprof__hmap_put(&S.stubs, addr, ok ? *to : 1);
  return ok;
}

const cprof__sym_callee *cprof__sym_callee_of(uintptr_t pc) {
  if (cprof__pc_is_synthetic(pc) || pc < 4096) return NULL;
  if (!S.ready) cprof__sym_refresh();
  uint64_t val;
  if (cprof__hmap_get(&S.callees, pc, &val))
    return val == 1 ? NULL : (const cprof__sym_callee *)(uintptr_t)val;

  cprof__sym_callee c = {0, 0, {0}};
  const cprof__sym_frame *f = NULL;
  int decl = 0;
  bool named = false;
  int32_t disp;
  if (call_at(pc, &disp)) {
    c.target = (uint64_t)pc + 1 + (uint64_t)(int64_t)disp;
    f = function_at(c.target, &decl, &named);
    /* A PLT stub has no symbol (but may have an FDE of its own, and is
     * named SYMBOL@plt); its GOT slot holds the function, bound since the
     * call was made. */
    uint64_t to;
    if ((!named || is_plt_stub(f)) && stub_target(c.target, &to)) {
      c.stub = c.target;
      c.target = to;
      f = function_at(to, &decl, &named);
    }
  }
  cprof__sym_callee *out = f ? arena_alloc(sizeof *out) : NULL;
  if (out) {
    *out = c;
    out->frame = *f;
    out->frame.line = decl;
  }
  cprof__hmap_put(&S.callees, pc, out ? (uint64_t)(uintptr_t)out : 1);
  return out;
}

/* Names pc from the runtime's perf map (perfmap.h), for code no file
 * backs. */
static void resolve_jit(cprof__sym_result *r, uintptr_t pc) {
  uintptr_t start = 0;
  const char *name = cprof__perfmap_lookup(pc, &start);
  if (!name) return;
  cprof__sym_frame *f = arena_alloc(sizeof *f);
  if (!f || !set_frame(f, name, "", 0, start)) return;
  r->frames = f;
  r->nframes = 1;
  r->has_function = true;
}

/*
 * Where the code at pc, in a second mapping of a file's bytes (V8 maps
 * node's embedded builtins again, near its JIT code, so that calls reach
 * them), was put by the loader: the address in another mapping of the
 * same file that holds the same file offset. libdw's module is that
 * mapping's, so names are found there. pc itself when there is none.
 */
static uintptr_t loader_address(int mapping, uintptr_t pc) {
  if (mapping < 0 || S.maps[mapping].anon || !S.dwfl ||
      libdw.dwfl_addrmodule(S.dwfl, pc))
    return pc;
  const cprof__sym_mapping *m = &S.maps[mapping];
  uint64_t off = pc - m->start + m->offset;
  for (size_t i = 0; i < S.nmaps; i++) {
    const cprof__sym_mapping *o = &S.maps[i];
    if ((int)i == mapping || o->anon || o->inode != m->inode ||
        strcmp(o->path, m->path) != 0 || off < o->offset ||
        off - o->offset >= o->limit - o->start)
      continue;
    uintptr_t at = (uintptr_t)(o->start + (off - o->offset));
    if (libdw.dwfl_addrmodule(S.dwfl, at)) return at;
  }
  return pc;
}

static int mapping_of(uintptr_t pc) {
  for (size_t i = 0; i < S.nmaps; i++)
    if (pc >= S.maps[i].start && pc < S.maps[i].limit) return (int)i;
  return -1;
}

/* The tag of the symbol cache's stamps, or NULL when there is no cache
 * (off, an image resolved offline, cprof's own object without a build ID).
 * Made once a snapshot: what it says (cprof's own build, the demangler)
 * does not change within one. */
static const char *cache_tag(void) {
  if (!S.ready || S.image) return NULL;
  if (S.tag_state == 0) {
    S.tag_state = 2;
    const uintptr_t self = (uintptr_t)cprof__sym_lookup;
    for (size_t i = 0; cprof__cachedir_on() && i < S.nmaps; i++) {
      const cprof__sym_mapping *m = &S.maps[i];
      if (self < m->start || self >= m->limit) continue;
      if (m->build_id[0]) {
        snprintf(S.tag, sizeof S.tag, "cprof symbols 1 %s%s", m->build_id,
                 S.demangle ? " demangled" : "");
        S.tag_state = 1;
      }
      break;
    }
  }
  return S.tag_state == 1 ? S.tag : NULL;
}

static sym_object *object_named(const char *build_id) {
  for (sym_object *o = S.objects; o; o = o->next)
    if (strcmp(o->build_id, build_id) == 0) return o;
  sym_object *o = arena_alloc(sizeof *o);
  const char *id = o ? intern(build_id) : NULL;
  if (!id) return NULL;
  *o = (sym_object){.next = S.objects, .build_id = id};
  S.objects = o;
  return o;
}

static sym_object *object_of_module(Dwfl_Module *mod) {
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = libdw.dwfl_module_build_id(mod, &bits, &vaddr);
  if (n <= 0 || n > 64) return NULL;
  char hex[2 * 64 + 1];
  for (int j = 0; j < n; j++) snprintf(hex + 2 * j, 3, "%02x", bits[j]);
  return object_named(hex);
}

/* The entry's name in the cache directory. */
static void entry_name(const sym_object *o, char *out, size_t cap) {
  snprintf(out, cap, "%s.sym", o->build_id);
}

/* The most bytes an entry may have (64 K addresses of a few frames). */
#define CACHE_ENTRY_MAX ((size_t)64 << 20)

/* Reads o's entry (again): its view is replaced only by a usable one (an
 * entry removed meanwhile, or stale, leaves what o had). Returns whether
 * it was. */
static bool read_entry(sym_object *o, const char *tag) {
  char name[2 * 64 + 8];
  entry_name(o, name, sizeof name);
  o->checked_ns = cprof__mono_ns();
  cprof_buf b = {0};
  struct stat st;
  cprof__symcache_view v;
  if (!cprof__cachedir_read(name, CACHE_ENTRY_MAX, &b, &st)) {
    cprof_buf_free(&b);
    return false;
  }
  o->status = st;
  o->have_status = true;
  if (!cprof__symcache_parse(b.data, b.len, &v) ||
      !cprof__symcache_stamp_holds(v.stamp, v.stamp_len, tag)) {
    cprof_buf_free(&b);
    return false;
  }
  object_take_file(o, b);
  o->view = v;
  o->have_view = true;
  return true;
}

/* The symbol cache's object for pc's mapping, its entry read on first
 * use; NULL when the mapping's addresses are not cached (anonymous or
 * without a build ID). */
static sym_object *cache_object(int mapping, const char *tag) {
  if (mapping < 0 || !tag) return NULL;
  const cprof__sym_mapping *m = &S.maps[mapping];
  if (m->anon || m->path[0] != '/' || !m->build_id[0]) return NULL;
  sym_object *o = object_named(m->build_id);
  if (!o || o->tried) return o;
  o->tried = true;
  (void)read_entry(o, tag);
  return o;
}

/* How often an object's entry may be looked at again for an address it
 * does not name. */
#define RECHECK_NS ((int64_t)50 * 1000000)

/* For an address o's entry does not name: whether the entry was replaced
 * since it was read (a sibling process, a fork child of the same parent,
 * named more addresses), and then read again. A fork child inherits the
 * entry its parent read before the fork: its siblings that exited before
 * it added the addresses they ran, which are mostly its own. At most one
 * look (a stat) every RECHECK_NS for an object. */
static bool entry_renewed(sym_object *o, const char *tag) {
  int64_t now = cprof__mono_ns();
  if (now - o->checked_ns < RECHECK_NS) return false;
  o->checked_ns = now;
  char name[2 * 64 + 8];
  entry_name(o, name, sizeof name);
  if (o->have_status && !cprof__cachedir_changed(name, &o->status))
    return false;
  return read_entry(o, tag);
}

/* pc's result from o's symbol cache entry: its own, or (*ranged) that
 * of an address whose names hold over a range holding pc. */
static bool cached_result(sym_object *o, uint64_t off, uintptr_t pc,
                          cprof__sym_result *r, bool *ranged) {
  cprof__sym_frame got[CPROF__SYM_MAX_FRAMES];
  *ranged = false;
  if (!o->have_view) return false;
  if (!cprof__symcache_find(&o->view, off, pc, r, got)) {
    if (!cprof__symcache_find_range(&o->view, off, pc, r, got)) return false;
    *ranged = true;
  }
  cprof__sym_frame *frames =
      arena_alloc((size_t)(r->nframes ? r->nframes : 1) * sizeof *frames);
  if (!frames) return false;
  for (int i = 0; i < r->nframes; i++) {
    frames[i] = got[i];
    frames[i].name = intern(got[i].name);
    frames[i].system_name = intern(got[i].system_name);
    frames[i].file = intern(got[i].file);
    if (!frames[i].name || !frames[i].system_name || !frames[i].file)
      return false;
  }
  r->frames = frames;
  return true;
}

/*
 * Compile units. libdwfl finds the unit holding an address from the
 * object's .debug_aranges, which it reads whole the first time
 * (dwarf_getaranges: 2.4-3.7 ms of libc's debug file, in each exit dump
 * that names a libc address no earlier run named).
 * An object's units are kept instead, as libdwfl merges them, in the cache
 * (cutab.h, "<build-id>.cu"), stamped as its symbol cache entry is: a
 * later process reads that table and asks libdw only for the unit and the
 * line table it needs. Without the cache, or .debug_aranges, libdwfl's own
 * lookup stands.
 */

/* When libdw found o's debug information in its own file without asking
 * where to look, that file is all its results come from: the stamp
 * records it. */
static void stamp_own_file(sym_object *o, int mapping) {
  if (o->searched || o->files.len != 0 || mapping < 0) return;
  recording = o;
  record_path(S.maps[mapping].path);
  recording = NULL;
  o->searched = o->files.len > 0;
}

/* The most bytes a table may have. */
#define CUTAB_ENTRY_MAX ((size_t)16 << 20)

/* o's stamp under tag: the tag, then what the search for its debug
 * information looked at. 0 or CPROF_ENOMEM. */
static int object_stamp(const sym_object *o, const char *tag,
                        cprof_buf *stamp) {
  int err = cprof__symcache_stamp_begin(stamp, tag);
  if (!err && cprof__buf_append(stamp, o->files.data, o->files.len) != 0)
    err = CPROF_ENOMEM;
  return err;
}

/* o's units from .debug_aranges, as libdwfl merges them (runs of ranges
 * of one unit), into out; false when there are none, or they do not
 * sort strictly by address. */
static bool units_of(Dwarf *dw, const void *stamp, size_t stamp_len,
                     cprof_buf *out) {
  Dwarf_Aranges *ar;
  size_t n;
  if (libdw.dwarf_getaranges(dw, &ar, &n) != 0 || n == 0 ||
      n > CPROF__CUTAB_MAX)
    return false;
  cprof__cutab_run *runs = cprof__malloc(n * sizeof *runs);
  if (!runs) return false;
  size_t k = 0;
  uint64_t last_end = 0;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    Dwarf_Addr addr;
    Dwarf_Word len;
    Dwarf_Off off;
    Dwarf_Arange *a = libdw.dwarf_onearange(ar, i);
    ok = a && libdw.dwarf_getarangeinfo(a, &addr, &len, &off) == 0;
    if (!ok) break;
    if (k == 0 || runs[k - 1].cu_off != off)
      runs[k++] = (cprof__cutab_run){addr, off};
    last_end = addr + len;
  }
  ok = ok && cprof__cutab_write(runs, k, last_end, stamp, stamp_len, out) == 0;
  cprof__free(runs);
  return ok;
}

/* Makes o's table: the cache's, when it is stamped as this session's
 * search for o's debug information found things, else one built from
 * dw and written to the cache. */
static void load_units(sym_object *o, int mapping, Dwarf *dw) {
  o->cu_state = CU_NONE;
  const char *tag = cache_tag();
  if (!tag) return;
  stamp_own_file(o, mapping);
  if (!o->searched || o->bad) return;
  cprof_buf stamp = {0}, b = {0};
  char name[2 * 64 + 8];
  snprintf(name, sizeof name, "%s.cu", o->build_id);
  struct stat st;
  if (object_stamp(o, tag, &stamp) != 0) goto out;
  if (cprof__cachedir_read(name, CUTAB_ENTRY_MAX, &b, &st) &&
      cprof__cutab_parse(b.data, b.len, &o->cu) &&
      o->cu.stamp_len == stamp.len &&
      memcmp(o->cu.stamp, stamp.data, stamp.len) == 0)
    goto take;
  b.len = 0;
  if (!units_of(dw, stamp.data, stamp.len, &b) ||
      !cprof__cutab_parse(b.data, b.len, &o->cu))
    goto out;
  cprof__cachedir_write(name, b.data, b.len);
take:
  o->cu_file = b;
  b = (cprof_buf){0};
  o->cu_state = CU_TABLE;
out:
  cprof_buf_free(&b);
  cprof_buf_free(&stamp);
}

/* The unit holding pc (in *unit, or libdwfl's), with the module's DWARF
 * bias in *bias, and pc's row of its line table (*dl set, *file and *line
 * from it); NULL when no unit holds pc. A unit the table names is taken
 * only when it is one (a unit's own DIE at that offset). */
static Dwarf_Die *unit_and_line(Dwfl_Module *mod, int mapping, uintptr_t pc,
                                Dwarf_Addr *bias, Dwarf_Die *unit,
                                bool *dl, const char **file, int *line) {
  const cprof__sym_mapping *m = mapping >= 0 ? &S.maps[mapping] : NULL;
  sym_object *o = m && !m->anon && m->build_id[0] && cache_tag()
                      ? object_named(m->build_id)
                      : NULL;
  if (o && o->cu_state != CU_NONE) {
    Dwarf *dw = libdw.dwfl_module_getdwarf(mod, bias);
    if (!dw) return NULL;
    if (o->cu_state == CU_UNTRIED) load_units(o, mapping, dw);
    if (o->cu_state == CU_TABLE) {
      uint64_t off;
      Dwarf_Die top;
      if (!cprof__cutab_find(&o->cu, pc - *bias, &off) ||
          !libdw.dwarf_offdie(dw, off, unit) ||
          !libdw.dwarf_diecu(unit, &top, NULL, NULL) ||
          libdw.dwarf_dieoffset(&top) != off)
        return NULL;
      Dwarf_Line *l = libdw.dwarf_getsrc_die(unit, pc - *bias);
      if (l) {
        *dl = true;
        *file = libdw.dwarf_linesrc(l, NULL, NULL);
        libdw.dwarf_lineno(l, line);
      }
      return unit;
    }
  }
  Dwfl_Line *l = libdw.dwfl_module_getsrc(mod, pc);
  if (l) {
    *dl = true;
    *file = libdw.dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL);
  }
  return libdw.dwfl_module_addrdie(mod, pc, bias);
}

/* Keeps r, found by libdw, for the next save, with a stamp that says what
 * it came from: what the search for the object's debug information looked
 * at in this session, or, when libdw never searched (its own file holds
 * its DWARF), the object's file. */
static void note_result(sym_object *o, int mapping, uint64_t off,
                        uintptr_t pc, const cprof__sym_result *r) {
  if (r->nframes > 0) stamp_own_file(o, mapping);
  if (!o->searched || o->bad || o->nadds >= CPROF__SYMCACHE_MAX) return;
  if (o->nadds == o->adds_cap) {
    size_t cap = o->adds_cap ? 2 * o->adds_cap : 64;
    cprof__symcache_add *a = cprof__realloc(o->adds, cap * sizeof *a);
    if (!a) return;
    o->adds = a;
    o->adds_cap = cap;
  }
  o->adds[o->nadds++] = (cprof__symcache_add){off, pc, r};
}

void cprof__sym_hold_saves(void) {
  cprof__sym_lock();
  S.saves_held++;
  cprof__sym_unlock();
}

void cprof__sym_release_saves(void) {
  cprof__sym_lock();
  if (S.saves_held > 0 && --S.saves_held == 0) cprof__sym_save();
  cprof__sym_unlock();
}

/* Whether o's new results may go to its entry as a part appended to it:
 * the entry read is whole, has room for the part and the results, and
 * was stamped as they are. */
static bool may_append(const sym_object *o, const cprof_buf *stamp) {
  const cprof__symcache_view *v = &o->view;
  return o->have_view && !v->damaged &&
         v->nparts < CPROF__SYMCACHE_PARTS &&
         o->nappended < CPROF__SYMCACHE_PARTS &&
         (size_t)v->nentries + o->nadds <= CPROF__SYMCACHE_MAX &&
         v->stamp_len == stamp->len &&
         memcmp(v->stamp, stamp->data, stamp->len) == 0;
}

/* For cprof__cachedir_append: whether the entry opened as fd (whichever
 * process wrote it last) is stamped with ctx, a cprof_buf. */
static bool entry_stamped(int fd, void *ctx) {
  const cprof_buf *stamp = ctx;
  size_t n = cprof__symcache_head_len(stamp->len);
  unsigned char *head = cprof__malloc(n);
  bool ok = head && cprof__cachedir_read_at(fd, head, n, 0) &&
            cprof__symcache_appendable(head, n, stamp->data, stamp->len);
  cprof__free(head);
  return ok;
}

/* Appends o's new results to its entry as a part of their own: a save
 * then writes what it found, not the whole entry again. False when it
 * may not, or could not. */
static bool save_appended(sym_object *o, const cprof_buf *stamp,
                          const char *name) {
  if (!may_append(o, stamp)) return false;
  cprof_buf part = {0};
  struct stat st;
  bool ok = cprof__symcache_append(o->adds, o->nadds, &part) == 0 &&
            cprof__cachedir_append(name, part.data, part.len,
                                   entry_stamped, (void *)stamp, &st) &&
            cprof__symcache_add_part(&o->view, part.data, part.len);
  if (!ok) {
    cprof_buf_free(&part);
    return false;
  }
  o->appended[o->nappended++] = part;
  /* The entry as this process left it: a look for a sibling's results
   * finds it the same. */
  o->status = st;
  o->have_status = true;
  return true;
}

void cprof__sym_save(void) {
  if (S.saves_held) return;
  const char *tag = cache_tag();
  cprof__guard_enter();
  for (sym_object *o = S.objects; tag && o; o = o->next) {
    if (o->nadds == 0 || !o->searched || o->bad) continue;
    cprof_buf stamp = {0}, out = {0};
    char name[2 * 64 + 8];
    entry_name(o, name, sizeof name);
    int err = object_stamp(o, tag, &stamp);
    bool appended = !err && save_appended(o, &stamp, name);
    if (!err && !appended)
      err = cprof__symcache_write(o->have_view ? &o->view : NULL, o->adds,
                                  o->nadds, stamp.data, stamp.len, &out);
    if (!err && !appended) {
      cprof__cachedir_write(name, out.data, out.len);
      /* What was written is what the next save adds to. */
      object_take_file(o, out);
      out = (cprof_buf){0};
      o->have_view =
          cprof__symcache_parse(o->file.data, o->file.len, &o->view);
    }
    o->nadds = 0;
    cprof_buf_free(&stamp);
    cprof_buf_free(&out);
  }
  cprof__guard_exit();
}

/* Opens the session for the snapshot, once: for the first address the
 * symbol cache does not name. The caller holds the guard. */
static void ensure_session(void) {
  if (S.dwfl || !S.ready || S.session_tried || S.image) return;
  S.session_tried = true;
  open_session();
}

/* Whether pc lies in code of an object the loader mapped (the unwind
 * tables' index says), where the symbol cache keys it by file offset:
 * not a second mapping of a file, not a JIT's. */
static bool loader_mapped(uintptr_t pc) {
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  bool in = idx && cprof__cfi_code_range(idx, pc, NULL, NULL);
  cprof__cfi_read_end(idx);
  return in;
}

uint64_t cprof__sym_range_hits(void) { return S.range_hits; }

const cprof__sym_result *cprof__sym_lookup(uintptr_t pc) {
  /* One slot per synthetic pc, so results for different ones coexist. */
  static cprof__sym_result synthetic[CPROF__PC_SYNTHETIC_MAX + 1];
  static cprof__sym_frame synthetic_frames[CPROF__PC_SYNTHETIC_MAX + 1];
  if (cprof__pc_is_synthetic(pc)) {
    cprof__sym_result *r = &synthetic[pc];
    const char *name = cprof__synthetic_name(pc);
    synthetic_frames[pc] =
        (cprof__sym_frame){.name = name, .system_name = name, .file = ""};
    *r = (cprof__sym_result){.mapping = -1, .nframes = 1,
                             .has_function = true,
                             .frames = &synthetic_frames[pc]};
    return r;
  }
  if (!S.ready) cprof__sym_refresh();

  uint64_t val;
  if (cprof__hmap_get(&S.cache, pc, &val))
    return (const cprof__sym_result *)(uintptr_t)val;

  cprof__sym_result *r = arena_alloc(sizeof *r);
  if (!r) return NULL;
  memset(r, 0, sizeof *r);
  r->mapping = mapping_of(pc);
  cprof__guard_enter();
  sym_object *o = r->mapping >= 0 && loader_mapped(pc)
                      ? cache_object(r->mapping, cache_tag())
                      : NULL;
  uint64_t off =
      o ? pc - S.maps[r->mapping].start + S.maps[r->mapping].offset : 0;
  bool ranged = false;
  if (!o || (!cached_result(o, off, pc, r, &ranged) &&
             !(entry_renewed(o, cache_tag()) &&
               cached_result(o, off, pc, r, &ranged)))) {
    ensure_session();
    uintptr_t at = loader_address(r->mapping, pc);
    if (at != pc) o = NULL;
    resolve(r, at);
    if (at != pc) r->range_lo = r->range_hi = 0; /* at's, not pc's */
    if (r->nframes == 0 && (r->mapping < 0 || S.maps[r->mapping].anon))
      resolve_jit(r, pc);
    if (o) note_result(o, r->mapping, off, pc, r);
  } else if (ranged) {
    /* Kept as an address of its own, with what is read of its code. */
    note_result(o, r->mapping, off, pc, r);
    S.range_hits++;
  }
  cprof__guard_exit();
  cprof__hmap_put(&S.cache, pc, (uint64_t)(uintptr_t)r);
  return r;
}

/*
 * Offline: an ELF image given as bytes, resolved as a loaded object's
 * addresses are (symbolize.h). Its "memory" (the .eh_frame_hdr table, PLT
 * stubs) is read from the file bytes of its loadable segments.
 */

static bool read_image(uint64_t addr, void *out, size_t len) {
  return read_file_bytes(S.image_elf, S.image, S.image_len, S.image_bias,
                         addr, out, len);
}

/* No separate debug file is looked for: the image is all there is. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                        GElf_Addr base, const char *file_name,
                        const char *debuglink_file, GElf_Word debuglink_crc,
                        char **debuginfo_file_name) {
  (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
  (void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
  return -1;
}

/* The addresses scan_image resolves: spread over the module, and each
 * function symbol's first address, last byte and one past it. */
#define SCAN_SPREAD 64
#define SCAN_SYMBOLS 128

static size_t resolve_checked(uintptr_t pc) {
  cprof__sym_result r;
  memset(&r, 0, sizeof r);
  r.mapping = -1;
  resolve(&r, pc);
  for (int i = 0; i < r.nframes; i++)
    if (!r.frames[i].name || !r.frames[i].system_name || !r.frames[i].file)
      abort(); /* a frame always has its strings */
  return r.nframes > 0;
}

int cprof__sym_scan_image(const unsigned char *data, size_t len,
                          size_t *resolved) {
  *resolved = 0;
  cprof__sym_lock();
  drop_state();
  if (!load_libdw()) {
    cprof__sym_unlock();
    return CPROF_ESYS;
  }
  int fd = memfd_create("cprof-image", MFD_CLOEXEC);
  int err = CPROF_ESYS;
  size_t done = 0;
  while (fd >= 0 && done < len) {
    ssize_t w = write(fd, data + done, len - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  static Dwfl_Callbacks offline = {.find_debuginfo = no_debuginfo};
  offline.section_address = libdw.dwfl_offline_section_address;
  cprof__guard_enter();
  S.dwfl = fd >= 0 && done == len ? libdw.dwfl_begin(&offline) : NULL;
  Dwfl_Module *mod = NULL;
  if (S.dwfl) {
    libdw.dwfl_report_begin(S.dwfl);
    /* libdw owns fd from here, and closes it at dwfl_end. */
    mod = libdw.dwfl_report_offline(S.dwfl, "image", "image", fd);
    fd = -1;
    if (libdw.dwfl_report_end(S.dwfl, NULL, NULL) != 0) mod = NULL;
  }
  Dwarf_Addr low = 0, high = 0, bias = 0;
  if (mod) {
    libdw.dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
    S.image_elf = libdw.dwfl_module_getelf(mod, &bias);
  }
  if (mod && S.image_elf && high > low) {
    S.image = data;
    S.image_len = len;
    S.image_bias = bias;
    S.ready = true;
    err = 0;
    for (uint64_t k = 0; k < SCAN_SPREAD; k++)
      *resolved += resolve_checked(low + (high - low) / SCAN_SPREAD * k);
    module_syms *m = syms_of(mod);
    for (size_t i = 0; m && i < m->n && i < SCAN_SYMBOLS; i++) {
      const func_sym *f = &m->syms[i];
      *resolved += resolve_checked(f->addr);
      if (f->size) {
        *resolved += resolve_checked(f->addr + f->size - 1);
        *resolved += resolve_checked(f->addr + f->size);
      }
    }
  }
  cprof__guard_exit();
  if (fd >= 0) close(fd);
  S.image = NULL;
  S.image_len = 0;
  S.image_elf = NULL;
  drop_state();
  cprof__sym_unlock();
  return err;
}
