/*
 * The index of loaded objects. This file owns the published index of
 * every loaded object's unwind table, the writer's record of each object,
 * the writer lock that serialises refreshes and the fork handlers that
 * keep it consistent, and the readers' side of publication
 * (cprof__cfi_read_begin and _read_end). A refresh (cprof__cfi_refresh,
 * _shutdown, the stats) runs in normal context only: it may call
 * dl_iterate_phdr, cprof's own allocator (mem.h), mmap, sched_yield,
 * nanosleep, process_vm_readv and the builder (cfi_build.h), and must
 * never take a pthread mutex (cprof interposes them) or load a byte of an
 * object's memory directly: a loaded object's pages can fault (a library
 * whose file was truncated after it was mapped raises SIGBUS on every page
 * past the file's new end), so its unwind data is first copied out with
 * process_vm_readv, which reports the pages it cannot read instead of
 * faulting, and only the copy is given to the builder. The readers' side
 * runs in signal handlers: it must never lock, allocate, make a system
 * call or loop beyond a binary search, and it reads only memory this file
 * allocated and published.
 *
 * Publishing: the index is immutable once published. Readers add one to a
 * reader count (their thread's shard of it, below) before they load the
 * index pointer and subtract one when done (all seq_cst). The writer
 * stores the new pointer (seq_cst) and then waits until it reads every
 * shard's count as zero before it frees the old index
 * or a table only the old index held. That is safe because all these
 * operations fall in one total order: a reader that got the old pointer
 * loaded it before the writer's store, so its increment came before the
 * store too, and the writer's load of the count, which comes after the
 * store, reads a value that includes the increment, nonzero until that
 * reader's decrement (a release the writer's load acquires, so the
 * reader's last use happens before the free). A reader whose increment
 * comes after the writer's load of the count loads the pointer after the
 * store, so it gets the new index. The wait is bounded (about a second:
 * a walk takes microseconds, but a reader can be preempted); when it
 * times out, the old index stays on a retired list that a later refresh
 * (or shutdown) frees. Counts that all readers share mean readers that
 * never pause would starve the wait; a profiler's handlers run for
 * microseconds at most a few thousand times a second, which leaves the
 * counts at zero nearly all the time. Readers never touch the objects'
 * own memory, so dlclose needs no further grace. Around fork, the writer
 * lock is held so that a child never inherits it taken, and the child,
 * which has no other threads, starts with no readers.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/cachedir.h"
#include "base/fork.h"
#include "base/mem.h"
#include "base/spin.h"
#include "base/sys.h"
#include "capture/saferead.h"
#include "capture/cfi.h"
#include "capture/cfi_build.h"
#include "capture/cfi_index.h"
#include "capture/stack.h"

/* How long a refresh waits for readers before it retires an index. */
#define GRACE_NS 1000000000ll
/* The most bytes of one object's unwind data copied for a build; real
 * objects have a few hundred KiB (libstdc++: 250 KiB). */
#define MAX_UNWIND_COPY ((uint64_t)256 << 20)
/* Pages per process_vm_readv call when unwind data is copied, and the
 * page size (x86-64's, the one architecture tables are built for). */
#define COPY_PAGES 64
#define PAGE ((uintptr_t)4096)

static _Atomic(cprof__cfi_index *) current_index;

/* The reader count, split in shards of a cache line each, a thread's
 * shard chosen by its thread pointer: every walk adds to its count and
 * subtracts from it, and with one count for all threads that line went
 * from core to core at every sample two threads took in turn. The
 * argument above holds for each shard, as a reader's pair of operations
 * is on one shard; the writer waits for every shard to read zero. */
#define READER_SHARDS 16
static struct {
  _Alignas(64) atomic_long n;
} readers[READER_SHARDS];

CPROF__SIGNAL_SAFE static inline atomic_long *reader_count(void) {
#if defined(__x86_64__) || defined(__aarch64__)
  uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
  return &readers[(tp >> 12) * 0x9e3779b97f4a7c15ull >> 60].n;
#else
  return &readers[0].n;
#endif
}
_Static_assert(READER_SHARDS == 16, "the shard is a hash's top 4 bits");
static CPROF__FORK_LOCK cprof__spin writer_lock;
CPROF__SPIN_FUNCTIONS()

/* The writer's state, under writer_lock. */
static struct {
  bool seen; /* adds/subs hold the counters current_index was built at */
  unsigned long long adds, subs;
  cprof__cfi_index *retired;
  uint64_t refreshes, rebuilds;
  int64_t last_build_ns;
} w;

CPROF__SIGNAL_SAFE const cprof__cfi_index *cprof__cfi_read_begin(void) {
  atomic_long *n = reader_count();
  atomic_fetch_add_explicit(n, 1, memory_order_seq_cst);
  const cprof__cfi_index *idx =
      atomic_load_explicit(&current_index, memory_order_seq_cst);
  if (!idx) atomic_fetch_sub_explicit(n, 1, memory_order_seq_cst);
  return idx;
}

CPROF__SIGNAL_SAFE void cprof__cfi_read_end(const cprof__cfi_index *idx) {
  if (idx) atomic_fetch_sub_explicit(reader_count(), 1, memory_order_seq_cst);
}

/* Whether some reader holds an index (the writer's load of the counts,
 * after its store of the new pointer). */
static bool readers_active(void) {
  for (int i = 0; i < READER_SHARDS; i++)
    if (atomic_load_explicit(&readers[i].n, memory_order_seq_cst) != 0)
      return true;
  return false;
}

/* Bumped by every refresh that publishes a new index. */
static _Atomic uint64_t generation;

static void lock_writer(void) { spin_lock(&writer_lock); }

static void unlock_writer(void) { spin_unlock(&writer_lock); }

static void object_free(cprof__cfi_object *o) {
  cprof__cfi_table_free(o->table);
  cprof__free(o->name);
  cprof__free(o);
}

static void index_free(cprof__cfi_index *idx) {
  for (size_t i = 0; i < idx->n; i++)
    if (--idx->objs[i]->refs == 0) object_free(idx->objs[i]);
  cprof__free(idx);
}

/* Frees the retired indexes once no reader can hold them: immediately
 * when the reader count reads zero, else after waiting up to max_ns. */
static void reclaim(int64_t max_ns) {
  if (!w.retired) return;
  int64_t deadline = 0;
  for (int spins = 0; readers_active(); spins++) {
    if (max_ns <= 0) return;
    if (spins == 0) deadline = cprof__mono_ns() + max_ns;
    if (spins < 100) {
      sched_yield();
    } else {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
      if (cprof__mono_ns() > deadline) return;
    }
  }
  while (w.retired) {
    cprof__cfi_index *idx = w.retired;
    w.retired = idx->next_retired;
    index_free(idx);
  }
}

/* Unpublishes the current index (replacing it by next) and retires it. */
static void publish(cprof__cfi_index *next) {
  cprof__cfi_index *old =
      atomic_exchange_explicit(&current_index, next, memory_order_seq_cst);
  if (old) {
    old->next_retired = w.retired;
    w.retired = old;
  }
}

#if defined(__x86_64__)
/* A child must not inherit the writer lock taken, nor a count of readers
 * on threads it does not have. */
static atomic_flag atfork_registered = ATOMIC_FLAG_INIT;

static void atfork_prepare(void) { lock_writer(); }

static void atfork_parent(void) { unlock_writer(); }

static void atfork_child(void) {
  for (int i = 0; i < READER_SHARDS; i++)
    atomic_store_explicit(&readers[i].n, 0, memory_order_seq_cst);
  spin_release_stale(&writer_lock);
}

/* Everything dl_iterate_phdr tells about one object, checked. */
typedef struct {
  cprof__cfi_image im;
  uint64_t hdr;
  bool has_hdr;
  bool large;
  uintptr_t exec_lo, exec_hi; /* exec_hi == 0: no executable segment */
  uint64_t fingerprint;
} object_desc;

/* Copies n bytes of this process's memory at addr into out, page by page:
 * through process_vm_readv, COPY_PAGES pages a call, or where that call is
 * refused (a seccomp filter), each page proved readable by a probe before
 * it is copied. Stops at the first page that cannot be read, and returns
 * the bytes copied: what can be read from addr on. Never faults. */
static size_t copy_memory(uintptr_t addr, uint8_t *out, size_t n) {
  static atomic_int refused;
  const uintptr_t page = PAGE;
  size_t done = 0;
  if (n > 0 && !atomic_load_explicit(&refused, memory_order_relaxed)) {
    /* Nearly always all of it is readable: one call for the whole. */
    struct iovec local = {out, n}, remote = {(void *)addr, n};
    long got = cprof__sys6(SYS_process_vm_readv, (long)getpid(),
                           (long)&local, 1L, (long)&remote, 1L, 0L);
    if (got == (long)n) return n;
  }
  while (done < n && !atomic_load_explicit(&refused, memory_order_relaxed)) {
    struct iovec local[COPY_PAGES], remote[COPY_PAGES];
    size_t want = 0;
    long nv = 0;
    for (uintptr_t a = addr + done; nv < COPY_PAGES && done + want < n;
         nv++) {
      size_t len = (size_t)(((a & ~(page - 1)) + page) - a);
      if (len > n - done - want) len = n - done - want;
      local[nv] = (struct iovec){out + done + want, len};
      remote[nv] = (struct iovec){(void *)a, len};
      want += len;
      a += len;
    }
    long got = cprof__sys6(SYS_process_vm_readv, (long)getpid(), (long)local,
                           nv, (long)remote, nv, 0L);
    if (got < 0 && got != -EFAULT) {
      atomic_store_explicit(&refused, 1, memory_order_relaxed);
      break;
    }
    if (got > 0) done += (size_t)got;
    if (got != (long)want) return done;
  }
  while (done < n) {
    uintptr_t a = addr + done;
    size_t len = (size_t)(((a & ~(page - 1)) + page) - a);
    if (len > n - done) len = n - done;
    if (!cprof__stack_readable(a & ~(page - 1))) break;
    memcpy(out + done, (const void *)a, len);
    done += len;
  }
  return done;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}

static void describe(const struct dl_phdr_info *info, object_desc *d) {
  memset(d, 0, sizeof *d);
  d->im.host = (uintptr_t)info->dlpi_addr;
  /* The program headers change with any relink, so a library rebuilt and
   * reloaded at the same address is not mistaken for the old one. */
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    h = fnv(h, ph, sizeof *ph);
    if (ph->p_type == PT_LOAD && ph->p_memsz > 0) {
      uint64_t lo = ph->p_vaddr, hi = lo + ph->p_memsz;
      if (hi < lo || hi > UINT32_MAX) d->large = true;
      if ((ph->p_flags & PF_R) && d->im.nsegs < CPROF__CFI_MAX_SEGS) {
        d->im.segs[d->im.nsegs].lo = lo;
        d->im.segs[d->im.nsegs].hi = hi;
        d->im.nsegs++;
      }
      if (ph->p_flags & PF_X) {
        uintptr_t a = (uintptr_t)info->dlpi_addr + (uintptr_t)lo;
        uintptr_t z = a + (uintptr_t)ph->p_memsz;
        if (d->exec_hi == 0 || a < d->exec_lo) d->exec_lo = a;
        if (z > d->exec_hi) d->exec_hi = z;
      }
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      d->hdr = ph->p_vaddr;
      d->has_hdr = true;
    }
  }
  uint64_t avail;
  uint8_t head[16];
  if (d->has_hdr && cprof__cfi_img_span(&d->im, d->hdr, 1, &avail)) {
    size_t n = avail < sizeof head ? (size_t)avail : sizeof head;
    n = copy_memory(d->im.host + (uintptr_t)d->hdr, head, n);
    h = fnv(h, head, n);
  }
  d->fingerprint = h;
}

typedef struct {
  cprof__cfi_index *old;
  cprof__cfi_object **objs;
  size_t n, cap;
  bool seen;
  unsigned long long adds, subs;
  int err;
  cprof__cfi_builder b;
  uint8_t *copy; /* the unwind data of the object being built */
  size_t copy_cap;
  bool use_cache; /* the unwind tables' cache: tables are read from it */
  /* Tables read from the cache before the scan, outside the loader's
   * lock: a cache directory on a slow disk must not hold up dlopen in
   * other threads. Taken by the scan (set to NULL), the rest freed; the
   * scan also takes the build IDs from here. */
  struct pre_read {
    char id[2 * 64 + 1];
    uintptr_t base; /* the object's load bias, which the scan finds it by */
    uint64_t hdr;
    cprof__cfi_table *table;
  } *pre;
  size_t npre, pre_cap;
  bool save;      /* ... and the ones built are written to it */
  /* Tables built from a whole copy, to write once the loader's lock is
   * released. */
  struct to_save {
    cprof__cfi_object *o;
    char id[2 * 64 + 1];
  } *saves;
  size_t nsaves, saves_cap;
} scan_ctx;


/*
 * The unwind tables' cache (docs/unwinding.md): a table depends only on
 * its object's bytes, which its GNU build ID names, so a table built once
 * is kept in the cache directory (base/cachedir.h) as BUILDID.cfi and read
 * by later processes and runs instead of being built again. An entry
 * records the .eh_frame_hdr address it was built from and cprof's own
 * build ID (a table of another cprof's builder is never read); its
 * rules are checked when it is read, its rows as lookups use them
 * (cprof__cfi_table_read, cprof__cfi_table_find). Only tables built
 * from a copy of the whole unwind data are kept: one that lost records to
 * unreadable pages (a truncated library) is its process's alone.
 */

bool cprof__object_build_id(const struct dl_phdr_info *info, char *out,
                            size_t cap) {
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE || ph->p_memsz < 12) continue;
    uint8_t notes[1024];
    size_t n = ph->p_memsz < sizeof notes ? (size_t)ph->p_memsz : sizeof notes;
    n = copy_memory((uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr,
                    notes, n);
    for (size_t at = 0; at + 12 <= n;) {
      uint32_t namesz, descsz, type;
      memcpy(&namesz, notes + at, 4);
      memcpy(&descsz, notes + at + 4, 4);
      memcpy(&type, notes + at + 8, 4);
      size_t name_at = at + 12;
      size_t desc_at = name_at + ((namesz + 3u) & ~(size_t)3);
      if (namesz > n || descsz > n || desc_at + descsz > n) break;
      if (type == NT_GNU_BUILD_ID && namesz == 4 &&
          memcmp(notes + name_at, "GNU", 4) == 0 && descsz >= 8 &&
          descsz <= 64 && 2 * (size_t)descsz < cap) {
        for (size_t j = 0; j < descsz; j++) {
          static const char hex[] = "0123456789abcdef";
          out[2 * j] = hex[notes[desc_at + j] >> 4];
          out[2 * j + 1] = hex[notes[desc_at + j] & 15];
        }
        out[2 * descsz] = '\0';
        return true;
      }
      at = desc_at + ((descsz + 3u) & ~(size_t)3);
    }
  }
  return false;
}

/* The tag of this cprof's entries: its own object's build ID. */
static char own_tag[2 * 64 + 16];
static int own_tag_state; /* 0 not looked for, 1 found, 2 none; writer's */

static int own_tag_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  const uintptr_t self = (uintptr_t)cprof__cfi_refresh;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || self < lo ||
        self - lo >= ph->p_memsz)
      continue;
    char id[2 * 64 + 1];
    if (cprof__object_build_id(info, id, sizeof id)) {
      snprintf(own_tag, sizeof own_tag, "cfi 1 %s", id);
      own_tag_state = 1;
    }
    return 1;
  }
  return 0;
}

/* Whether the cache serves this refresh (and reads the tag once). */
static bool cache_usable(void) {
  if (!cprof__cachedir_on()) return false;
  if (own_tag_state == 0) {
    own_tag_state = 2;
    dl_iterate_phdr(own_tag_cb, NULL);
  }
  return own_tag_state == 1;
}

/* The most bytes of a cached table (2 GiB of .eh_frame would not fit). */
#define MAX_TABLE_FILE ((size_t)512 << 20)

/* The cached table of the object with build ID id, or NULL. */
static cprof__cfi_table *cached_table(const char *id, uint64_t hdr) {
  char name[2 * 64 + 8];
  snprintf(name, sizeof name, "%s.cfi", id);
  struct stat st;
  int fd = cprof__cachedir_open_named(name, &st);
  if (fd < 0) return NULL;
  cprof__cfi_table *t = NULL;
  if ((size_t)st.st_size <= MAX_TABLE_FILE)
    (void)cprof__cfi_table_read(fd, (size_t)st.st_size, hdr, own_tag, &t);
  close(fd);
  return t;
}

/* Writes the tables noted for saving; the loader's lock is not held. */
static void save_tables(scan_ctx *ctx) {
  cprof__guard_enter();
  for (size_t i = 0; i < ctx->nsaves; i++) {
    const cprof__cfi_object *o = ctx->saves[i].o;
    cprof_buf buf = {0};
    char name[2 * 64 + 8];
    snprintf(name, sizeof name, "%s.cfi", ctx->saves[i].id);
    if (o->table && cprof__cfi_table_save(o->table, o->hdr, own_tag, &buf) == 0)
      cprof__cachedir_write(name, buf.data, buf.len);
    cprof_buf_free(&buf);
  }
  cprof__guard_exit();
  cprof__free(ctx->saves);
  ctx->saves = NULL;
  ctx->nsaves = ctx->saves_cap = 0;
}

/* Notes o's table (built from a whole copy) to be saved under id. */
static void note_save(scan_ctx *ctx, cprof__cfi_object *o, const char *id) {
  if (ctx->nsaves == ctx->saves_cap) {
    size_t cap = ctx->saves_cap ? 2 * ctx->saves_cap : 16;
    struct to_save *v = cprof__realloc(ctx->saves, cap * sizeof *v);
    if (!v) return;
    ctx->saves = v;
    ctx->saves_cap = cap;
  }
  ctx->saves[ctx->nsaves].o = o;
  snprintf(ctx->saves[ctx->nsaves].id, sizeof ctx->saves[ctx->nsaves].id,
           "%s", id);
  ctx->nsaves++;
}

/* The smallest copy buffer; it grows to twice what it held at least, so
 * that a refresh maps a few at most. */
#define COPY_MIN ((size_t)64 << 10)

/* Replaces ctx->copy by a buffer of at least n bytes: a mapping whose
 * pages are all populated by the one call (MAP_POPULATE), cheaper than
 * the page faults of a fresh buffer; unmapped when the refresh ends. */
static bool grow_copy(scan_ctx *ctx, size_t n) {
  size_t cap = n < 2 * ctx->copy_cap ? 2 * ctx->copy_cap : n;
  if (cap < COPY_MIN) cap = COPY_MIN;
  cap = (cap + PAGE - 1) & ~(size_t)(PAGE - 1);
  if (ctx->copy) munmap(ctx->copy, ctx->copy_cap);
  ctx->copy = NULL;
  ctx->copy_cap = 0;
  void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return false;
  ctx->copy = p;
  ctx->copy_cap = cap;
  return true;
}

/*
 * The object's unwind data, copied out of its memory (copy_memory) into
 * ctx->copy, and *im set to parse the copy: from .eh_frame_hdr, or from
 * .eh_frame when it comes first, to the end of the segment holding the
 * later of the two (linkers put both at the end of a read-only segment,
 * so that is about all the copy holds). What cannot be read is left out:
 * records that lie in it are dropped as malformed ones are. False when not
 * even the header can be read, or memory ran out (ctx->err says which).
 */
static bool copy_unwind(scan_ctx *ctx, const object_desc *d,
                        cprof__cfi_image *im, bool *whole) {
  const cprof__cfi_image *live = &d->im;
  uint64_t avail;
  uint8_t h[16];
  if (!cprof__cfi_img_span(live, d->hdr, 4, &avail)) return false;
  size_t hn = avail < sizeof h ? (size_t)avail : sizeof h;
  if (copy_memory(live->host + (uintptr_t)d->hdr, h, hn) != hn) return false;
  uint64_t eh = d->hdr, v;
  if (cprof__cfi_hdr_eh_frame(h, hn, d->hdr, &v) &&
      cprof__cfi_img_span(live, v, 1, NULL))
    eh = v;
  uint64_t lo = eh < d->hdr ? eh : d->hdr, far = eh < d->hdr ? d->hdr : eh;
  cprof__cfi_img_span(live, far, 1, &avail);
  uint64_t n = far - lo + avail;
  if (n > MAX_UNWIND_COPY) n = MAX_UNWIND_COPY;
  if (n > ctx->copy_cap && !grow_copy(ctx, (size_t)n)) {
    ctx->err = CPROF_ENOMEM;
    return false;
  }
  size_t got = copy_memory(live->host + (uintptr_t)lo, ctx->copy, (size_t)n);
  *whole = got == n && n < MAX_UNWIND_COPY;
  memset(im, 0, sizeof *im);
  im->host = (uintptr_t)ctx->copy - (uintptr_t)lo;
  im->nsegs = 1;
  im->segs[0].lo = lo;
  im->segs[0].hi = lo + got;
  return got >= hn;
}

static bool has_counters(size_t size) {
  return size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                     sizeof(((struct dl_phdr_info *)0)->dlpi_subs);
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  scan_ctx *ctx = arg;
  if (has_counters(size)) {
    ctx->seen = true;
    ctx->adds = info->dlpi_adds;
    ctx->subs = info->dlpi_subs;
  }
  return 1; /* the counters are the same in every call */
}

/*
 * The loader's names of its objects are written by the thread that loaded
 * them, under the loader's lock, which dl_iterate_phdr holds while its
 * callback runs but which ThreadSanitizer cannot see (the loader is not
 * instrumented). They are read here byte by byte through volatile
 * pointers, so that the compiler makes no strlen or memcpy of the loops
 * (which the sanitizer would intercept), and uninstrumented.
 */
__attribute__((no_sanitize("thread"))) static size_t loader_strlen(
    const char *s) {
  const volatile char *v = s;
  size_t n = 0;
  while (v[n]) n++;
  return n;
}

__attribute__((no_sanitize("thread"))) static char *loader_strdup(
    const char *s) {
  size_t n = loader_strlen(s);
  char *d = cprof__malloc(n + 1);
  if (!d) return NULL;
  const volatile char *v = s;
  for (size_t i = 0; i <= n; i++) d[i] = v[i];
  return d;
}

__attribute__((no_sanitize("thread"))) static bool loader_streq(
    const char *mine, const char *theirs) {
  const volatile char *v = theirs;
  size_t i = 0;
  for (; mine[i] && mine[i] == v[i]; i++) {
  }
  return mine[i] == v[i];
}

/* The old index's object with the same identity, or NULL. */
static cprof__cfi_object *find_old(const cprof__cfi_index *old,
                                   const struct dl_phdr_info *info,
                                   const object_desc *d) {
  const cprof__cfi_entry *e = cprof__cfi_index_lookup(old, d->exec_lo);
  if (!e || e->lo != d->exec_lo) return NULL;
  cprof__cfi_object *o = old->objs[e - old->e];
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (o->base != (uintptr_t)info->dlpi_addr || o->phdr != info->dlpi_phdr ||
      o->fingerprint != d->fingerprint || o->exec_hi != d->exec_hi ||
      !loader_streq(o->name, name))
    return NULL;
  return o;
}

/* The first pass: the build ID, load bias and .eh_frame_hdr of each
 * object whose table the scan would have to make, noted to be read from
 * the cache (and, for one the cache lacks, to name the table built). */
static int pre_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  scan_ctx *ctx = arg;
  object_desc d;
  describe(info, &d);
  if (d.exec_hi == 0 || !d.has_hdr || d.large || find_old(ctx->old, info, &d))
    return 0;
  if (ctx->npre == ctx->pre_cap) {
    size_t cap = ctx->pre_cap ? 2 * ctx->pre_cap : 16;
    struct pre_read *v = cprof__realloc(ctx->pre, cap * sizeof *v);
    if (!v) return 1;
    ctx->pre = v;
    ctx->pre_cap = cap;
  }
  struct pre_read *p = &ctx->pre[ctx->npre];
  if (!cprof__object_build_id(info, p->id, sizeof p->id)) return 0;
  p->base = (uintptr_t)info->dlpi_addr;
  p->hdr = d.hdr;
  p->table = NULL;
  ctx->npre++;
  return 0;
}

/* Reads the noted objects' tables from the cache (the loader's lock not
 * held). */
static void pre_read_tables(scan_ctx *ctx) {
  dl_iterate_phdr(pre_cb, ctx);
  for (size_t i = 0; i < ctx->npre; i++)
    ctx->pre[i].table = cached_table(ctx->pre[i].id, ctx->pre[i].hdr);
}

/* The first pass's note of the object at base whose .eh_frame_hdr is at
 * hdr (its build ID, and its table when the cache had one, which the
 * caller takes), or NULL when the first pass found no build ID for it. */
static struct pre_read *pre_read_of(scan_ctx *ctx, uintptr_t base,
                                    uint64_t hdr) {
  for (size_t i = 0; i < ctx->npre; i++)
    if (ctx->pre[i].base == base && ctx->pre[i].hdr == hdr)
      return &ctx->pre[i];
  return NULL;
}

static void free_pre_read(scan_ctx *ctx) {
  for (size_t i = 0; i < ctx->npre; i++)
    cprof__cfi_table_free(ctx->pre[i].table);
  cprof__free(ctx->pre);
  ctx->pre = NULL;
  ctx->npre = ctx->pre_cap = 0;
}

/* Runs with the loader's lock held, so no object can be unmapped while
 * its CFI is read. */
static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  scan_ctx *ctx = arg;
  if (!ctx->seen) counters_cb(info, size, arg);
  object_desc d;
  describe(info, &d);
  if (d.exec_hi == 0) return 0; /* no code, nothing to unwind */
  cprof__cfi_object *o = find_old(ctx->old, info, &d);
  bool fresh = !o;
  if (fresh) {
    o = cprof__calloc(1, sizeof *o);
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (!o || !(o->name = loader_strdup(name))) goto oom;
    o->base = (uintptr_t)info->dlpi_addr;
    o->phdr = info->dlpi_phdr;
    o->fingerprint = d.fingerprint;
    o->hdr = d.has_hdr ? d.hdr : 0;
    o->exec_lo = d.exec_lo;
    o->exec_hi = d.exec_hi;
    if (!d.has_hdr) {
      o->status = CPROF__CFI_OBJ_NO_EH;
    } else if (d.large) {
      o->status = CPROF__CFI_OBJ_LARGE;
    } else {
      int64_t t0 = cprof__mono_ns();
      struct pre_read *pre =
          ctx->use_cache ? pre_read_of(ctx, o->base, d.hdr) : NULL;
      o->table = pre ? pre->table : NULL;
      if (pre) pre->table = NULL;
      int rc = 0;
      if (o->table) {
        o->fdes_bad = o->table->fdes_bad;
      } else {
        cprof__cfi_image copy;
        bool whole = false;
        rc = copy_unwind(ctx, &d, &copy, &whole)
                 ? cprof__cfi_build(&ctx->b, &copy, d.hdr, &o->table)
                 : ctx->err ? ctx->err : CPROF_EINVAL;
        ctx->err = 0;
        o->fdes_bad = ctx->b.fdes_bad;
        if (rc == 0 && whole && pre && ctx->save && o->table->nrows > 0)
          note_save(ctx, o, pre->id);
      }
      o->build_ns = cprof__mono_ns() - t0;
      if (rc == CPROF_ENOMEM) goto oom;
      if (rc != 0) {
        o->status = CPROF__CFI_OBJ_BAD;
      } else if (o->table->nrows == 0) {
        o->status = CPROF__CFI_OBJ_EMPTY;
        cprof__cfi_table_free(o->table);
        o->table = NULL;
      }
    }
  }
  if (ctx->n == ctx->cap) {
    size_t cap = ctx->cap ? ctx->cap * 2 : 64;
    cprof__cfi_object **v = cprof__realloc(ctx->objs, cap * sizeof *v);
    if (!v) goto oom;
    ctx->objs = v;
    ctx->cap = cap;
  }
  ctx->objs[ctx->n++] = o;
  return 0;
oom:
  if (fresh && o) object_free(o);
  ctx->err = CPROF_ENOMEM;
  return 1;
}

/* Frees the scanned objects no index holds. */
static void drop_unlisted(scan_ctx *ctx) {
  for (size_t i = 0; i < ctx->n; i++)
    if (ctx->objs[i]->refs == 0) object_free(ctx->objs[i]);
}

/* The new index over the scanned objects, in address order; an object
 * whose span overlaps the one before it is left out, so the search stays
 * sound. */
static cprof__cfi_index *make_index(scan_ctx *ctx) {
  cprof__cfi_object **v = ctx->objs;
  for (size_t i = 1; i < ctx->n; i++) {
    cprof__cfi_object *o = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1]->exec_lo > o->exec_lo; j--) v[j] = v[j - 1];
    v[j] = o;
  }
  size_t bytes = sizeof(cprof__cfi_index) + ctx->n * sizeof(cprof__cfi_entry) +
                 ctx->n * sizeof(cprof__cfi_object *);
  cprof__cfi_index *idx = cprof__calloc(1, bytes);
  if (!idx) return NULL;
  idx->bytes = bytes;
  idx->objs = (cprof__cfi_object **)&idx->e[ctx->n];
  for (size_t i = 0; i < ctx->n; i++) {
    cprof__cfi_object *o = v[i];
    if (idx->n > 0 && o->exec_lo < idx->e[idx->n - 1].hi) continue;
    idx->e[idx->n] =
        (cprof__cfi_entry){o->exec_lo, o->exec_hi, o->base, o->table};
    idx->objs[idx->n] = o;
    o->refs++;
    idx->n++;
  }
  return idx;
}
#endif

CPROF__SIGNAL_SAFE uint64_t cprof__cfi_generation(void) {
  return atomic_load_explicit(&generation, memory_order_acquire);
}

#if defined(__x86_64__)
/* The refresh, with the writer lock held; grace_ns bounds the wait for
 * readers of the index it replaces. */
static int refresh_held(int64_t grace_ns) {
  w.refreshes++;
  scan_ctx ctx = {0};
  dl_iterate_phdr(counters_cb, &ctx);
  cprof__cfi_index *old =
      atomic_load_explicit(&current_index, memory_order_relaxed);
  if (old && w.seen && ctx.seen && ctx.adds == w.adds && ctx.subs == w.subs) {
    reclaim(0);
    return 0;
  }
  int64_t t0 = cprof__mono_ns();
  memset(&ctx, 0, sizeof ctx);
  ctx.old = old;
  ctx.use_cache = cache_usable();
  /* The heap sampler's refresh, which must not wait, saves what it built
   * too: a heap-only program has no other refresh, and would otherwise
   * build every table again in each run. The write is after the scan,
   * outside the loader's lock, and costs less than the build it spares. */
  ctx.save = ctx.use_cache;
  if (ctx.use_cache) pre_read_tables(&ctx);
  dl_iterate_phdr(scan_cb, &ctx);
  free_pre_read(&ctx);
  cprof__cfi_builder_free(&ctx.b);
  if (ctx.copy) munmap(ctx.copy, ctx.copy_cap);
  cprof__cfi_index *idx = ctx.err ? NULL : make_index(&ctx);
  if (idx) save_tables(&ctx);
  cprof__free(ctx.saves);
  drop_unlisted(&ctx);
  cprof__free(ctx.objs);
  if (!idx) return CPROF_ENOMEM;
  publish(idx);
  atomic_fetch_add_explicit(&generation, 1, memory_order_release);
  w.seen = ctx.seen;
  w.adds = ctx.adds;
  w.subs = ctx.subs;
  w.rebuilds++;
  w.last_build_ns = cprof__mono_ns() - t0;
  reclaim(grace_ns);
  return 0;
}

/* 1 once the fork handlers are registered. */
static atomic_int atfork_done;
#endif

void cprof__cfi_init(void) {
#if defined(__x86_64__)
  /* Registered outside the lock: fork runs the handlers holding the
   * lock pthread_atfork takes. */
  if (!atomic_flag_test_and_set(&atfork_registered)) {
    cprof__atfork(CPROF__FORK_UNWIND, atfork_prepare, atfork_parent,
                  atfork_child);
    atomic_store(&atfork_done, 1);
  }
#endif
}

int cprof__cfi_refresh(void) {
#if defined(__x86_64__)
  cprof__cfi_init();
  lock_writer();
  int err = refresh_held(GRACE_NS);
  unlock_writer();
  return err;
#else
  return CPROF_EUNSUPPORTED;
#endif
}

int cprof__cfi_refresh_try(void) {
#if defined(__x86_64__)
  /* pthread_atfork is not called here: this may run inside a fork
   * handler, which holds the lock pthread_atfork takes. Without the
   * handlers a fork in mid-refresh would leave the child's lock taken. */
  if (!atomic_load(&atfork_done)) return CPROF_EBUSY;
  if (!spin_trylock(&writer_lock)) return CPROF_EBUSY;
  int err = refresh_held(0);
  unlock_writer();
  return err;
#else
  return CPROF_EUNSUPPORTED;
#endif
}

void cprof__cfi_shutdown(void) {
  lock_writer();
  publish(NULL);
  reclaim(GRACE_NS);
  w.seen = false;
  unlock_writer();
}

void cprof__cfi_stats(cprof__cfi_stats_t *out) {
  memset(out, 0, sizeof *out);
  lock_writer();
  const cprof__cfi_index *idx =
      atomic_load_explicit(&current_index, memory_order_relaxed);
  for (size_t i = 0; idx && i < idx->n; i++) {
    const cprof__cfi_object *o = idx->objs[i];
    const cprof__cfi_table *t = o->table;
    out->fdes_bad += o->fdes_bad;
    out->tables_build_ns += o->build_ns;
    switch (o->status) {
      case CPROF__CFI_OBJ_OK:
        out->objects++;
        out->fdes += t->fdes;
        out->rows += t->nrows;
        out->table_bytes += t->bytes;
        out->eh_frame_bytes += t->eh_bytes;
        break;
      case CPROF__CFI_OBJ_NO_EH:
        out->skipped_no_eh++;
        break;
      case CPROF__CFI_OBJ_LARGE:
        out->skipped_large++;
        break;
      case CPROF__CFI_OBJ_EMPTY:
        out->skipped_empty++;
        break;
      default:
        out->skipped_bad++;
        break;
    }
  }
  if (idx) out->index_bytes = idx->bytes;
  out->last_build_ns = w.last_build_ns;
  out->refreshes = w.refreshes;
  out->rebuilds = w.rebuilds;
  for (const cprof__cfi_index *r = w.retired; r; r = r->next_retired)
    out->retired++;
  unlock_writer();
}

int cprof__cfi_objects(int (*fn)(const cprof__cfi_object_info *, void *),
                       void *ctx) {
  int rc = 0;
  lock_writer();
  const cprof__cfi_index *idx =
      atomic_load_explicit(&current_index, memory_order_relaxed);
  for (size_t i = 0; idx && i < idx->n && rc == 0; i++) {
    const cprof__cfi_object *o = idx->objs[i];
    const cprof__cfi_table *t = o->table;
    cprof__cfi_object_info info = {
        .name = o->name,
        .base = o->base,
        .exec_lo = o->exec_lo,
        .exec_hi = o->exec_hi,
        .status = o->status,
        .fdes = t ? t->fdes : 0,
        .fdes_bad = o->fdes_bad,
        .rows = t ? t->nrows : 0,
        .table_bytes = t ? t->bytes : 0,
        .eh_frame_bytes = t ? t->eh_bytes : 0,
        .build_ns = o->build_ns,
        .table = t,
    };
    rc = fn(&info, ctx);
  }
  unlock_writer();
  return rc;
}

#if !defined(__x86_64__)
bool cprof__object_build_id(const struct dl_phdr_info *info, char *out,
                            size_t cap) {
  (void)info;
  (void)out;
  (void)cap;
  return false;
}
#endif
