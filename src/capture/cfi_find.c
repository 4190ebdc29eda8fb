/*
 * The lookup. This file answers questions about a pc from the published
 * index, which it searches by pc (cprof__cfi_index_lookup): the unwind
 * rule there (cprof__cfi_find, and cprof__cfi_table_find in one table),
 * the code range of the loaded object holding it (cprof__cfi_code_range),
 * and the first address of the function holding it (cprof__cfi_fde_start,
 * over the .eh_frame_hdr search it shares with the symbolizer). It owns no
 * index and no table: it reads the index that cfi_index.c publishes,
 * between the caller's read_begin and read_end, and the tables cfi_build.c
 * built; it owns only cprof__cfi_fde_start's cache of answers.
 * cprof__cfi_find, _code_range, _table_find and _index_lookup run in
 * signal handlers: they must never lock, allocate, make a system call or
 * loop beyond a binary search, and they read only the published index and
 * its tables. The rest runs in normal context: it may call
 * dl_iterate_phdr, cprof's own allocator (mem.h) and a trylock of cprof's
 * own (lock.h), and must never wait for a lock or read an object's memory
 * but through the fault-free reader (cprof__safe_read).
 */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "base/spin.h"
#include "base/mem.h"
#include "capture/saferead.h"
#include "capture/cfi.h"
#include "capture/cfi_build.h"
#include "capture/cfi_index.h"
#include "capture/stack.h"

/* The never-mapped first page: no .eh_frame_hdr lies there. */
#define PAGE ((uintptr_t)4096)

/* Signal-safe: a branch-light binary search for the last row at or below
 * off, among the rows of off's page when the table has a page index. A
 * table read from the cache has its rows and its index checked here, as
 * they are used, not when it is read (which would touch every page of
 * it): a row whose rule index is out of range has no rule, an index
 * entry out of range is not used, and rows or entries out of order make
 * the search find a wrong row, never read outside the table. */
CPROF__SIGNAL_SAFE bool cprof__cfi_table_find(const cprof__cfi_table *t, uintptr_t off,
                           cprof__cfi_rule *out) {
  memset(out, 0, sizeof *out);
  if (!t || t->nrows == 0 || off > UINT32_MAX) return false;
  const uint32_t *pc = t->pc;
  uint32_t x = (uint32_t)off;
  if (x < pc[0]) return false;
  size_t lo = 0, n = t->nrows;
  uint32_t j = (x >> CPROF__CFI_PAGE_SHIFT) - t->page_base;
  if (t->page && j < t->npages) {
    uint32_t a = t->page[j], b = t->page[j + 1];
    if (a <= b && b < t->nrows) {
      lo = a;
      n = (size_t)(b - a) + 1;
    }
  }
  while (n > 1) {
    size_t half = n / 2;
    if (pc[lo + half] <= x) lo += half;
    n -= half;
  }
  uint16_t r = t->rule[lo];
  if (r >= t->nrules) return false;
  *out = t->rules[r];
  return out->kind != CPROF__CFI_NONE;
}

CPROF__SIGNAL_SAFE bool cprof__cfi_find(const cprof__cfi_index *idx, uintptr_t pc,
                     cprof__cfi_rule *out) {
  memset(out, 0, sizeof *out);
#if defined(__x86_64__)
  const cprof__cfi_entry *e = cprof__cfi_index_lookup(idx, pc);
  if (!e || !e->table) return false;
  cprof__cfi_table_find(e->table, pc - e->base, out);
  return true;
#else
  (void)idx;
  (void)pc;
  return false;
#endif
}

CPROF__SIGNAL_SAFE bool cprof__cfi_code_range(const cprof__cfi_index *idx, uintptr_t pc,
                           uintptr_t *lo, uintptr_t *hi) {
  const cprof__cfi_entry *e = cprof__cfi_index_lookup(idx, pc);
  if (!e) return false;
  if (lo) *lo = e->lo;
  if (hi) *hi = e->hi;
  return true;
}

bool cprof__eh_hdr_table(uint64_t hdr,
                         bool (*rd)(uint64_t addr, void *out, size_t len),
                         uint64_t *table, uint32_t *count) {
  unsigned char h[4];
  if (!hdr || !rd(hdr, h, sizeof h) || h[0] != 1) return false;
  size_t ptr_size = (h[1] & 0x0f) == 0x03 || (h[1] & 0x0f) == 0x0b ? 4
                    : (h[1] & 0x0f) == 0x04 || (h[1] & 0x0f) == 0x0c || h[1] == 0
                        ? 8
                        : 0;
  if (!ptr_size || h[2] != 0x03 || h[3] != 0x3b ||
      !rd(hdr + 4 + ptr_size, count, sizeof *count) || *count == 0)
    return false;
  *table = hdr + 4 + ptr_size + 4;
  return true;
}

/* The first address of the function holding pc, by bisection of the
 * search table of the .eh_frame_hdr at hdr, read through rd. Only the
 * encoding every linker writes is understood (the table datarel sdata4). */
bool cprof__eh_hdr_fde_start(uint64_t hdr, uint64_t pc, uint64_t *start,
                             uint64_t *end,
                             bool (*rd)(uint64_t addr, void *out,
                                        size_t len)) {
  if (end) *end = 0;
  uint64_t table;
  uint32_t count;
  if (!cprof__eh_hdr_table(hdr, rd, &table, &count)) return false;
  /* The last entry whose first address is at or below pc. */
  int64_t want = (int64_t)(pc - hdr);
  uint32_t lo = 0, hi = count;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    int32_t e[2];
    if (!rd(table + 8 * (uint64_t)mid, e, sizeof e)) return false;
    if (e[0] <= want)
      lo = mid;
    else
      hi = mid;
  }
  int32_t e[2];
  if (!rd(table + 8 * (uint64_t)lo, e, sizeof e) || e[0] > want) return false;
  uint64_t first = hdr + (uint64_t)(int64_t)e[0];
  /* The FDE's range, when its address is pcrel sdata4 as usual: pc must
   * lie inside it (not in a gap between functions). */
  uint64_t fde = hdr + (uint64_t)(int64_t)e[1];
  uint32_t f[4]; /* length, CIE pointer, first address, range */
  bool ranged = rd(fde, f, sizeof f) && f[0] != 0xffffffffu &&
                fde + 8 + (uint64_t)(int64_t)(int32_t)f[2] == first;
  if (ranged && pc - first >= f[3]) return false;
  *start = first;
  /* Every address up to the FDE's end, and before the next entry's
   * first address, finds this entry. */
  if (end && ranged) {
    *end = first + f[3];
    if (lo + 1 < count) {
      if (!rd(table + 8 * ((uint64_t)lo + 1), e, sizeof e))
        *end = 0;
      else if (hdr + (uint64_t)(int64_t)e[0] < *end)
        *end = hdr + (uint64_t)(int64_t)e[0];
    }
  }
  return true;
}

static bool read_loaded(uint64_t addr, void *out, size_t len) {
  return addr >= PAGE && addr <= UINTPTR_MAX &&
         cprof__safe_read((uintptr_t)addr, out, len);
}

typedef struct {
  uintptr_t pc;
  uint64_t hdr;
} hdr_search;

/* dl_iterate_phdr's callback: the .eh_frame_hdr of the object whose
 * executable segment holds the pc. */
static int hdr_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  hdr_search *q = arg;
  uint64_t hdr = 0;
  bool holds = false;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t a = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->pc >= a &&
        q->pc - a < ph->p_memsz)
      holds = true;
    else if (ph->p_type == PT_GNU_EH_FRAME)
      hdr = a;
  }
  if (!holds) return 0;
  q->hdr = hdr;
  return 1;
}

/* Answers of cprof__cfi_fde_start by pc, for objects the index lists,
 * until the index changes (the generation is part of the key): a
 * bisection costs two system calls a step, and the goroutine profile asks
 * for the same few hundred pcs at every request (67% of its time). Taken
 * with a trylock only: a thread that finds it busy computes the answer
 * itself; a spin lock (base/spin.h), so a fork child whose parent held it
 * takes it over, with no fork handler. */
CPROF__SPIN_FUNCTIONS(__attribute__((unused)))
#define FDE_CACHE 4096
typedef struct {
  uint64_t gen; /* generation + 1; 0: empty */
  uintptr_t pc, start;
  bool found;
} fde_entry;
/* Allocated by the first lookup (128 KiB): a program that never asks
 * keeps that much address space, which a ulimit -v may count. */
static fde_entry *fde_cache;
static cprof__spin fde_cache_mu;

static size_t fde_slot(uintptr_t pc) {
  return (size_t)(((uint64_t)pc * 0x9e3779b97f4a7c15ull) >> 52) % FDE_CACHE;
}

bool cprof__cfi_fde_start(uintptr_t pc, uintptr_t *start) {
  const uint64_t gen = cprof__cfi_generation();
  const size_t slot = fde_slot(pc);
  if (spin_trylock(&fde_cache_mu)) {
    if (!fde_cache) fde_cache = cprof__calloc(FDE_CACHE, sizeof *fde_cache);
    bool hit = fde_cache && fde_cache[slot].gen == gen + 1 &&
               fde_cache[slot].pc == pc;
    bool found = hit && fde_cache[slot].found;
    uintptr_t first = hit ? fde_cache[slot].start : 0;
    spin_unlock(&fde_cache_mu);
    if (hit) {
      if (found) *start = first;
      return found;
    }
  }
  const cprof__cfi_index *idx = cprof__cfi_read_begin();
  const cprof__cfi_entry *e = cprof__cfi_index_lookup(idx, pc);
  uint64_t hdr = 0, first = 0;
  if (e) {
    const cprof__cfi_object *o = idx->objs[e - idx->e];
    if (o->hdr) hdr = (uint64_t)o->base + o->hdr;
  }
  cprof__cfi_read_end(idx);
  if (!e) {
    /* No table lists it (frame-pointer mode builds none, and an object
     * loaded since the last refresh is not listed yet): ask the loader. */
    hdr_search q = {pc, 0};
    dl_iterate_phdr(hdr_cb, &q);
    hdr = q.hdr;
  }
  bool found = cprof__eh_hdr_fde_start(hdr, pc, &first, NULL, read_loaded);
  if (e && spin_trylock(&fde_cache_mu)) {
    if (fde_cache)
      fde_cache[slot] = (fde_entry){gen + 1, pc, (uintptr_t)first, found};
    spin_unlock(&fde_cache_mu);
  }
  if (!found) return false;
  *start = (uintptr_t)first;
  return true;
}
