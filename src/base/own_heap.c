/*
 * cprof's own heap (own_heap.h). Small blocks are carved from one range
 * with a 16-byte header in front (size class, offset to the carved
 * block's start) and kept on a free list per class once freed; large ones
 * are mappings of their own, listed in an open-addressed table that
 * readers search without a lock. One spinlock serialises the writers: cprof's
 * allocations are few next to a program's, and never on its fast path.
 * Calls only base/ and the kernel; runs uninstrumented, since the exported
 * free() reaches it on any thread.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "base/own_heap.h"
#include "base/real_alloc.h"
#include "base/spin.h"
#include "base/sys.h"

/* Uninstrumented where the heap is used; under a sanitizer it is off
 * (own_heap.h), and gcc 12 fails on these functions with the attribute. */
#if CPROF__OWN_ENABLED
#define NO_SAN __attribute__((no_sanitize("address", "thread", "undefined")))
#else
#define NO_SAN
#endif
#define PAGE ((size_t)4096)
#define HDR ((size_t)16)
#define MAGIC 0xc9f0u

/* Size classes of whole blocks (header included): 16-byte steps up to 256,
 * then four per power of two up to CPROF__OWN_SMALL_MAX + HDR. */
#define NCLASSES (16 + 4 * 9)

NO_SAN static size_t class_size(unsigned c) {
  if (c < 16) return (c + 1) * 16;
  unsigned k = (c - 16) / 4, q = (c - 16) % 4;
  size_t base = (size_t)256 << k;
  return base + (q + 1) * (base / 4);
}

NO_SAN static unsigned class_of(size_t n) {
  if (n <= 256) return (unsigned)((n + 15) / 16) - (n > 0);
  unsigned c = 16;
  while (class_size(c) < n) c++;
  return c;
}

typedef struct hdr {
  uint16_t magic;
  uint16_t cls;
  uint32_t offset; /* from the carved block's start to this header */
  uint64_t unused;
} hdr;

/* The writers' lock: a fork handler holds it across fork, and a taker in
 * the child (another library's child handler that allocates) takes it
 * over from the parent's holder (base/spin.h). */
static CPROF__FORK_LOCK cprof__spin lock;
CPROF__SPIN_FUNCTIONS(NO_SAN)
static unsigned char *range;   /* null until mapped */
static bool range_failed;      /* the mapping was refused once */
static size_t range_used;      /* bytes carved from the start */
static void *free_lists[NCLASSES];
/* A fork child's parent's free lists, used only once the range is full:
 * reusing a freed block of the parent's writes a page the child shares
 * with it (a copy on write for a block of a few bytes), where a block
 * carved from the range's untouched end shares the child's new pages with
 * the blocks carved next to it. */
static void *inherited_lists[NCLASSES];
static cprof__own_stats stats;

/* Large blocks: address and length, open addressing, linear probing.
 * Slots are written under the lock; lookups read them without it, and
 * only for an address whose summary bit is set (own_heap.h). A freed
 * slot becomes a tombstone (1) unless the next slot is empty. */
#define LARGE_SLOTS 2048
#define LARGE_MAX 1024 /* live at once; more go to the allocator underneath */
static _Atomic uintptr_t large_addr[LARGE_SLOTS];
static size_t large_len[LARGE_SLOTS];
static size_t large_live; /* under the lock */

_Alignas(64) struct cprof__own_hot cprof__own_hot = {.tag = UINTPTR_MAX};
static uint16_t large_hashed[CPROF__OWN_SUMMARY_BITS]; /* under the lock */

NO_SAN static size_t large_hash(uintptr_t p) {
  return (size_t)((p >> 12) * 0x9e3779b97f4a7c15ull >> 53) % LARGE_SLOTS;
}

/* Counts a live block's address in the summary (+1) or takes it out (-1);
 * under the lock. */
NO_SAN static void summary_add(uintptr_t p, int d) {
  unsigned h = cprof__own_summary_of(p);
  large_hashed[h] = (uint16_t)(large_hashed[h] + d);
  uint64_t bit = (uint64_t)1 << (h % 64);
  if (d > 0 && large_hashed[h] == 1)
    atomic_fetch_or_explicit(&cprof__own_hot.large_bits[h / 64], bit,
                             memory_order_release);
  else if (d < 0 && large_hashed[h] == 0)
    atomic_fetch_and_explicit(&cprof__own_hot.large_bits[h / 64], ~bit,
                              memory_order_release);
}

NO_SAN static long large_slot(uintptr_t p) {
  size_t i = large_hash(p);
  for (size_t probes = 0; probes < LARGE_SLOTS; probes++) {
    uintptr_t a = atomic_load_explicit(&large_addr[i], memory_order_acquire);
    if (a == p) return (long)i;
    if (a == 0) return -1;
    i = (i + 1) % LARGE_SLOTS;
  }
  return -1;
}

NO_SAN bool cprof__own_large_listed(const void *p) {
  return large_slot((uintptr_t)p) >= 0;
}

NO_SAN static void *large_alloc(size_t n, size_t align) {
  if (n > SIZE_MAX - 2 * align - PAGE) return NULL;
  size_t len = (n + PAGE - 1) & ~(PAGE - 1);
  if (len == 0) len = PAGE;
  size_t map = align > PAGE ? len + align : len;
  spin_lock(&lock);
  if (large_live >= LARGE_MAX) {
    spin_unlock(&lock);
    return NULL;
  }
  unsigned char *m = cprof__sys_map(map);
  if (!m) {
    spin_unlock(&lock);
    return NULL;
  }
  unsigned char *p = m;
  if (map != len) { /* trim to the alignment asked */
    p = (unsigned char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (p > m) cprof__sys_unmap(m, (size_t)(p - m));
    size_t tail = (size_t)(m + map - (p + len));
    if (tail) cprof__sys_unmap(p + len, tail);
  }
  size_t i = large_hash((uintptr_t)p);
  while (atomic_load(&large_addr[i]) > 1) i = (i + 1) % LARGE_SLOTS;
  large_len[i] = len;
  atomic_store_explicit(&large_addr[i], (uintptr_t)p, memory_order_release);
  summary_add((uintptr_t)p, 1);
  large_live++;
  stats.large_blocks++;
  stats.large_bytes += len;
  spin_unlock(&lock);
  return p;
}

/* Maps the range on first use: twice its size, trimmed to its alignment. */
NO_SAN static bool range_ready(void) {
  if (range) return true;
  if (range_failed) return false;
  unsigned char *m = cprof__sys_map(2 * CPROF__OWN_RANGE);
  if (!m) {
    range_failed = true;
    return false;
  }
  unsigned char *r = (unsigned char *)(((uintptr_t)m + CPROF__OWN_RANGE - 1) &
                                       ~(uintptr_t)(CPROF__OWN_RANGE - 1));
  if (r > m) cprof__sys_unmap(m, (size_t)(r - m));
  size_t tail = (size_t)(m + 2 * CPROF__OWN_RANGE - (r + CPROF__OWN_RANGE));
  if (tail) cprof__sys_unmap(r + CPROF__OWN_RANGE, tail);
  range = r;
  atomic_store_explicit(&cprof__own_hot.tag,
                        (uintptr_t)r >> CPROF__OWN_RANGE_SHIFT,
                        memory_order_release);
  return true;
}

/* A small block whose user part of n bytes starts at a multiple of align
 * (at most a page), or NULL when the range cannot serve it. */
NO_SAN static void *small_alloc(size_t n, size_t align) {
  size_t slack = align > HDR ? align - HDR : 0;
  size_t whole = n + HDR + slack;
  if (whole < n || whole > CPROF__OWN_SMALL_MAX + HDR) return NULL;
  unsigned c = class_of(whole);
  size_t size = class_size(c);
  spin_lock(&lock);
  unsigned char *b = free_lists[c];
  if (b) {
    memcpy(&free_lists[c], b, sizeof(void *));
  } else if (range_ready() && CPROF__OWN_RANGE - range_used >= size) {
    b = range + range_used;
    range_used += size;
    stats.range_used = range_used;
  } else if ((b = inherited_lists[c]) != NULL) {
    memcpy(&inherited_lists[c], b, sizeof(void *));
  }
  if (b) {
    stats.small_blocks++;
    stats.small_bytes += size;
  }
  spin_unlock(&lock);
  if (!b) return NULL;
  uintptr_t user = ((uintptr_t)b + HDR + align - 1) & ~(uintptr_t)(align - 1);
  if (align <= HDR) user = (uintptr_t)b + HDR;
  hdr h = {MAGIC, (uint16_t)c, (uint32_t)(user - HDR - (uintptr_t)b), 0};
  memcpy((void *)(user - HDR), &h, sizeof h);
  return (void *)user;
}

NO_SAN static hdr small_hdr(const void *p) {
  hdr h;
  memcpy(&h, (const unsigned char *)p - HDR, sizeof h);
  return h;
}

NO_SAN static void *own_alloc(size_t n, size_t align) {
  int saved = errno;
  void *p = small_alloc(n, align);
  if (!p && n + align > CPROF__OWN_SMALL_MAX) p = large_alloc(n, align);
  if (p) {
    errno = saved;
    return p;
  }
  spin_lock(&lock);
  stats.fallbacks++;
  spin_unlock(&lock);
  errno = saved;
  /* The allocator underneath, as if this heap did not exist. */
  if (align <= HDR) return CPROF__ALLOC_GET(malloc)(n);
  cprof__memalign_fn f = CPROF__ALLOC_GET(memalign);
  if (!f) {
    errno = ENOMEM;
    return NULL;
  }
  return f(align, n);
}

NO_SAN void *cprof__own_malloc(size_t n) { return own_alloc(n, HDR); }

NO_SAN void *cprof__own_calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = own_alloc(total, HDR);
  /* Freed small blocks are reused, so they are cleared; fresh pages of
   * the range and large mappings are zero already, but clearing them is
   * what the fallback's calloc would cost too. */
  if (p) memset(p, 0, total);
  return p;
}

NO_SAN void *cprof__own_memalign(size_t align, size_t n) {
  if (align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  if (align > PAGE) {
    int saved = errno;
    void *p = large_alloc(n, align);
    errno = saved;
    if (p) return p;
    cprof__memalign_fn f = CPROF__ALLOC_GET(memalign);
    return f ? f(align, n) : NULL;
  }
  return own_alloc(n, align);
}

NO_SAN size_t cprof__own_usable_size(const void *p) {
  if (cprof__own_small(p)) {
    hdr h = small_hdr(p);
    return class_size(h.cls) - h.offset - HDR;
  }
  long i = large_slot((uintptr_t)p);
  return i >= 0 ? large_len[i] : 0;
}

NO_SAN void cprof__own_free(void *p) {
  if (cprof__own_small(p)) {
    hdr h = small_hdr(p);
    if (h.magic != MAGIC || h.cls >= NCLASSES) return; /* not a block */
    unsigned char *b = (unsigned char *)p - HDR - h.offset;
    spin_lock(&lock);
    memcpy(b, &free_lists[h.cls], sizeof(void *));
    free_lists[h.cls] = b;
    stats.small_blocks--;
    stats.small_bytes -= class_size(h.cls);
    spin_unlock(&lock);
    return;
  }
  spin_lock(&lock);
  long i = large_slot((uintptr_t)p);
  if (i >= 0) {
    size_t len = large_len[i];
    size_t next = ((size_t)i + 1) % LARGE_SLOTS;
    atomic_store_explicit(&large_addr[i],
                          atomic_load(&large_addr[next]) == 0 ? 0 : 1,
                          memory_order_release);
    summary_add((uintptr_t)p, -1);
    large_live--;
    stats.large_blocks--;
    stats.large_bytes -= len;
    cprof__sys_unmap(p, len);
  }
  spin_unlock(&lock);
}

NO_SAN void *cprof__own_realloc(void *p, size_t n) {
  if (!p) return cprof__own_malloc(n);
  if (n == 0) { /* as glibc's realloc: the block is freed */
    cprof__own_free(p);
    return NULL;
  }
  size_t old = cprof__own_usable_size(p);
  if (n <= old && (n > old / 2 || old <= 64)) return p;
  void *q = cprof__own_malloc(n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  /* q may be the allocator underneath's (this heap full): then it is
   * freed by the exported free like any of that allocator's blocks. */
  cprof__own_free(p);
  return q;
}

void cprof__own_stats_get(cprof__own_stats *s) {
  spin_lock(&lock);
  *s = stats;
  spin_unlock(&lock);
}

void cprof__own_atfork_prepare(void) { spin_lock(&lock); }

void cprof__own_atfork_parent(void) { spin_unlock(&lock); }

void cprof__own_atfork_child(void) {
  spin_release_stale(&lock);
  /* What the parent freed is reused after the range's fresh end (see
   * inherited_lists). A grandchild joins its parent's list to the one
   * inherited before it, unless the list is long (a walk of it here
   * would cost more than its reuse saves): that class keeps its list. */
  for (unsigned c = 0; c < NCLASSES; c++) {
    void *b = free_lists[c];
    if (!b) continue;
    if (inherited_lists[c]) {
      unsigned char *tail = b, *next;
      unsigned walked = 0;
      for (;; walked++) {
        memcpy(&next, tail, sizeof next);
        if (!next || walked == 64) break;
        tail = next;
      }
      if (next) continue;
      memcpy(tail, &inherited_lists[c], sizeof(void *));
    }
    free_lists[c] = NULL;
    inherited_lists[c] = b;
  }
}
