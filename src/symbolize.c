/*
 * The process symbolizer (see symbolize.h). It owns one snapshot of the
 * executable file-backed mappings, an elfutils Dwfl session over the live
 * process, a per-address result cache and an arena holding every string and
 * result it hands out; all of it is replaced together when the mappings
 * change, or at a refresh when the cache has grown past CACHE_MAX. It may
 * call libdw, libc's file I/O and cprof's allocator; every libdw call runs
 * inside cprof__guard_enter()/cprof__guard_exit() because libdw allocates
 * with plain malloc. It must never be called from a signal
 * handler, never abort on a failure (it reports an error or an unknown
 * frame instead) and never fetch debug info over the network.
 *
 * libdw and libelf are loaded when the first session opens (dynload.h), not
 * when the program starts: with liblzma and libbz2 they cost every profiled
 * process about 1 ms of CPU and 0.5 MiB of RSS before main. Without them
 * the mappings are still listed (without build IDs), but no address gets a
 * name.
 */
#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dynload.h"
#include "env.h"
#include "hmap.h"
#include "maps.h"
#include "mem.h"
#include "symbolize.h"
#include "lock.h"

#define ARENA_CHUNK (64 * 1024)
/* The most addresses the cache keeps between batches (about 700 bytes
 * each): a refresh that finds more starts over, as after a dlopen. */
#define CACHE_MAX 32768
#define MAX_FRAMES ((int)CPROF__ARRAY_LEN(((cprof__sym_result *)0)->frames))

/* libdw and libelf, loaded when the first session opens (dynload.h). The
 * members keep the libraries' own names: libdw has two prefixes, dwfl_ and
 * dwarf_. */
static struct {
  __typeof__(dwarf_attr) *dwarf_attr;
  __typeof__(dwarf_attr_integrate) *dwarf_attr_integrate;
  __typeof__(dwarf_filesrc) *dwarf_filesrc;
  __typeof__(dwarf_formstring) *dwarf_formstring;
  __typeof__(dwarf_formudata) *dwarf_formudata;
  __typeof__(dwarf_getscopes) *dwarf_getscopes;
  __typeof__(dwarf_getsrcfiles) *dwarf_getsrcfiles;
  __typeof__(dwarf_lowpc) *dwarf_lowpc;
  __typeof__(dwarf_tag) *dwarf_tag;
  __typeof__(dwfl_addrmodule) *dwfl_addrmodule;
  __typeof__(dwfl_begin) *dwfl_begin;
  __typeof__(dwfl_end) *dwfl_end;
  __typeof__(dwfl_lineinfo) *dwfl_lineinfo;
  __typeof__(dwfl_linux_proc_find_elf) *dwfl_linux_proc_find_elf;
  __typeof__(dwfl_linux_proc_report) *dwfl_linux_proc_report;
  __typeof__(dwfl_module_addrdie) *dwfl_module_addrdie;
  __typeof__(dwfl_module_build_id) *dwfl_module_build_id;
  __typeof__(dwfl_module_getelf) *dwfl_module_getelf;
  __typeof__(dwfl_module_getsrc) *dwfl_module_getsrc;
  __typeof__(dwfl_module_getsym_info) *dwfl_module_getsym_info;
  __typeof__(dwfl_module_getsymtab) *dwfl_module_getsymtab;
  __typeof__(dwfl_report_begin) *dwfl_report_begin;
  __typeof__(dwfl_report_end) *dwfl_report_end;
  __typeof__(dwfl_standard_find_debuginfo) *dwfl_standard_find_debuginfo;
} libdw;

static const cprof__dynsym libdw_syms[] = {
    {"dwarf_attr", (void **)&libdw.dwarf_attr},
    {"dwarf_attr_integrate", (void **)&libdw.dwarf_attr_integrate},
    {"dwarf_filesrc", (void **)&libdw.dwarf_filesrc},
    {"dwarf_formstring", (void **)&libdw.dwarf_formstring},
    {"dwarf_formudata", (void **)&libdw.dwarf_formudata},
    {"dwarf_getscopes", (void **)&libdw.dwarf_getscopes},
    {"dwarf_getsrcfiles", (void **)&libdw.dwarf_getsrcfiles},
    {"dwarf_lowpc", (void **)&libdw.dwarf_lowpc},
    {"dwarf_tag", (void **)&libdw.dwarf_tag},
    {"dwfl_addrmodule", (void **)&libdw.dwfl_addrmodule},
    {"dwfl_begin", (void **)&libdw.dwfl_begin},
    {"dwfl_end", (void **)&libdw.dwfl_end},
    {"dwfl_lineinfo", (void **)&libdw.dwfl_lineinfo},
    {"dwfl_linux_proc_find_elf", (void **)&libdw.dwfl_linux_proc_find_elf},
    {"dwfl_linux_proc_report", (void **)&libdw.dwfl_linux_proc_report},
    {"dwfl_module_addrdie", (void **)&libdw.dwfl_module_addrdie},
    {"dwfl_module_build_id", (void **)&libdw.dwfl_module_build_id},
    {"dwfl_module_getelf", (void **)&libdw.dwfl_module_getelf},
    {"dwfl_module_getsrc", (void **)&libdw.dwfl_module_getsrc},
    {"dwfl_module_getsym_info", (void **)&libdw.dwfl_module_getsym_info},
    {"dwfl_module_getsymtab", (void **)&libdw.dwfl_module_getsymtab},
    {"dwfl_report_begin", (void **)&libdw.dwfl_report_begin},
    {"dwfl_report_end", (void **)&libdw.dwfl_report_end},
    {"dwfl_standard_find_debuginfo", (void **)&libdw.dwfl_standard_find_debuginfo},
};
static const char *const libdw_sonames[] = {"libdw.so.1", NULL};
static cprof__dynlib libdw_lib = {libdw_sonames, libdw_syms,
                                  CPROF__ARRAY_LEN(libdw_syms), 0, ""};

static struct {
  __typeof__(elf_getscn) *elf_getscn;
  __typeof__(gelf_getshdr) *gelf_getshdr;
} libelf;

static const cprof__dynsym libelf_syms[] = {
    {"elf_getscn", (void **)&libelf.elf_getscn},
    {"gelf_getshdr", (void **)&libelf.gelf_getshdr},
};
static const char *const libelf_sonames[] = {"libelf.so.1", NULL};
static cprof__dynlib libelf_lib = {libelf_sonames, libelf_syms,
                                   CPROF__ARRAY_LEN(libelf_syms), 0, ""};

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
  cprof__sym_mapping *maps;
  size_t nmaps;
  Dwfl *dwfl;
  arena_chunk *arena;
  cprof__hmap cache;   /* pc -> cprof__sym_result * */
  cprof__hmap strings; /* content hash -> interned char * */
  demangle_fn demangle;
  struct module_syms *modsyms; /* a list, one per module looked up */
} S;

static pthread_mutex_t sym_mu = PTHREAD_MUTEX_INITIALIZER;

void cprof__sym_lock(void) { cprof__lock(&sym_mu); }
void cprof__sym_unlock(void) { cprof__unlock(&sym_mu); }

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
 * Debug info lookup. libdw's standard search asks a debuginfod server when
 * DEBUGINFOD_URLS is set, which could download hundreds of megabytes from
 * inside the profiled program; in that case only the local build-id tree is
 * searched.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, GElf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc,
                          char **debuginfo_file_name) {
  const char *urls = getenv("DEBUGINFOD_URLS");
  if (!urls || !*urls)
    return libdw.dwfl_standard_find_debuginfo(
        mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
        debuginfo_file_name);
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = libdw.dwfl_module_build_id(mod, &bits, &vaddr);
  if (n < 2) return -1;
  char path[sizeof "/usr/lib/debug/.build-id/" + 2 * 64 + 8];
  int len = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/",
                     bits[0]);
  for (int i = 1; i < n && len + 8 < (int)sizeof path; i++)
    len += snprintf(path + len, sizeof path - (size_t)len, "%02x", bits[i]);
  snprintf(path + len, sizeof path - (size_t)len, ".debug");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0 && debuginfo_file_name) *debuginfo_file_name = strdup(path);
  return fd;
}

/* find_elf is libdw's own, filled in when libdw loads (load_libdw). */
static Dwfl_Callbacks callbacks = {.find_debuginfo = find_debuginfo};

/* Loads libdw and libelf on the first call; later calls return the first
 * answer. A failure is reported once, on stderr, and symbolization stays
 * off: every session then fails to open, as when dwfl_begin fails. Called
 * with the symbolizer's lock held. */
static bool load_libdw(void) {
  static bool warned;
  cprof__dynlib *failed = NULL;
  if (cprof__dynload(&libdw_lib) != 0)
    failed = &libdw_lib;
  else if (cprof__dynload(&libelf_lib) != 0)
    failed = &libelf_lib;
  if (!failed) {
    callbacks.find_elf = libdw.dwfl_linux_proc_find_elf;
    return true;
  }
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

/* Executable mappings of files, and the vDSO: a walk can pass through the
 * vDSO's code (clock_gettime, gettimeofday), so its frames need a mapping
 * too. */
static bool wanted(const cprof__map_entry *e) {
  static const char vdso[] = "[vdso]";
  if (!e->executable || e->path_len == 0) return false;
  return e->path[0] == '/' ||
         (e->path_len == sizeof vdso - 1 &&
          memcmp(e->path, vdso, sizeof vdso - 1) == 0);
}

/* The signature: one canonical line per wanted mapping, inode included so
 * that a different file reloaded at the same place counts as a change. */
static int sign_entry(const cprof__map_entry *e, void *ctx) {
  if (!wanted(e)) return 0;
  return cprof__buf_printf(ctx, "%llx %llx %llx %llu %.*s\n",
                           (unsigned long long)e->start,
                           (unsigned long long)e->end,
                           (unsigned long long)e->offset,
                           (unsigned long long)e->inode, (int)e->path_len,
                           e->path);
}

typedef struct collect_ctx {
  size_t n;
} collect_ctx;

static int collect_entry(const cprof__map_entry *e, void *ctx) {
  collect_ctx *cc = ctx;
  if (!wanted(e)) return 0;
  cprof__sym_mapping *m = &S.maps[cc->n++];
  m->start = e->start;
  m->limit = e->end;
  m->offset = e->offset;
  m->path = intern_n(e->path, e->path_len);
  m->build_id = "";
  m->is_main = false;
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
  cprof__hmap_free(&S.cache);
  cprof__hmap_free(&S.strings);
  arena_free();
  S.modsyms = NULL;
  S.maps = NULL;
  S.nmaps = 0;
  S.ready = false;
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
static bool open_session(void) {
  if (!load_libdw()) return false;
  cprof__guard_enter();
  S.dwfl = libdw.dwfl_begin(&callbacks);
  if (S.dwfl) {
    libdw.dwfl_report_begin(S.dwfl);
    int rc = libdw.dwfl_linux_proc_report(S.dwfl, getpid());
    if (libdw.dwfl_report_end(S.dwfl, NULL, NULL) != 0 || rc != 0) {
      libdw.dwfl_end(S.dwfl);
      S.dwfl = NULL;
    }
  }
  for (size_t i = 0; S.dwfl && i < S.nmaps; i++) {
    cprof__sym_mapping *m = &S.maps[i];
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
  cprof__guard_exit();
  return S.dwfl != NULL;
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

int cprof__sym_refresh(void) {
  char *text = NULL;
  size_t len = 0;
  cprof_buf sig = {0};
  int err = current_signature(&sig, &text, &len);
  if (err) return err;
  if (S.ready && S.cache.len <= CACHE_MAX && same_signature(&sig, &S.signature))
    goto out;

  drop_state();
  cprof_buf_free(&S.signature);
  cprof__guard_enter();
  S.demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
  cprof__guard_exit();
  size_t count = 0;
  cprof__maps_parse(text, len, count_entry, &count);
  S.maps = arena_alloc((count ? count : 1) * sizeof *S.maps);
  if (!S.maps) {
    err = CPROF_ENOMEM;
    goto out;
  }
  collect_ctx cc = {0};
  err = cprof__maps_parse(text, len, collect_entry, &cc);
  if (err) goto out;
  S.nmaps = cc.n;
  put_main_first();
  S.ready = true;
  if (!open_session()) {
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
  if (current_signature(&after, &text2, &len2) == 0 &&
      same_signature(&sig, &after)) {
    S.signature = sig;
    sig = (cprof_buf){0};
  }
  cprof_buf_free(&after);
  cprof__free(text2);

out:
  if (err && !S.ready) drop_state();
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
    int status = -1;
    char *d = S.demangle(sym, NULL, NULL, &status);
    if (d && status == 0) {
      const char *name = intern(d);
      if (name) f->name = name;
    }
    free(d); /* __cxa_demangle allocated it with malloc */
  }
  return true;
}

/*
 * Symbol tables. dwfl_module_addrinfo scans a module's whole symbol table on
 * every call (about 300 us per lookup in libc with its debug symbols), so
 * each module's function symbols are sorted once, on its first lookup, and
 * searched by bisection. The choice follows dwfl_module_addrinfo: a sized
 * symbol must contain the address, a sizeless one (assembly) covers up to
 * the next symbol, and among aliases global beats weak beats local.
 */
typedef struct func_sym {
  uint64_t addr, size;
  uint64_t section_end; /* a sizeless symbol covers no further */
  const char *name;     /* libdw's, valid for the session */
  int rank;             /* 2 global, 1 weak, 0 local */
  int index;            /* in the table: the first alias wins, as in libdw */
} func_sym;

typedef struct module_syms {
  struct module_syms *next;
  Dwfl_Module *mod;
  func_sym *syms;
  size_t n;
} module_syms;

static int sym_order(const void *a, const void *b) {
  const func_sym *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  if (x->rank != y->rank) return y->rank - x->rank;
  if ((x->size != 0) != (y->size != 0)) return x->size ? -1 : 1;
  return x->index - y->index;
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
  for (int i = 1; i < total; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    Elf *elf = NULL;
    const char *name =
        libdw.dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, NULL);
    int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
    if (!name || !*name || shndx == SHN_UNDEF || shndx == SHN_ABS) continue;
    if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
      continue;
    GElf_Shdr shdr;
    Elf_Scn *scn = elf ? libelf.elf_getscn(elf, shndx) : NULL;
    uint64_t section_end = addr + sym.st_size;
    if (scn && libelf.gelf_getshdr(scn, &shdr) && sym.st_value >= shdr.sh_addr)
      section_end = addr - (sym.st_value - shdr.sh_addr) + shdr.sh_size;
    m->syms[m->n++] = (func_sym){
        .addr = addr,
        .size = sym.st_size,
        .section_end = section_end,
        .name = name,
        .rank = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0,
        .index = i,
    };
  }
  qsort(m->syms, m->n, sizeof *m->syms, sym_order);
  return m;
}

/* The function symbol containing pc, or NULL. */
static const func_sym *find_sym(Dwfl_Module *mod, uint64_t pc) {
  module_syms *m = syms_of(mod);
  if (!m || m->n == 0) return NULL;
  size_t lo = 0, hi = m->n; /* the first symbol above pc is at hi */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->syms[mid].addr <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Walk back over the nearest addresses (a sized symbol further down can
   * still contain pc when sizeless labels sit inside it); within one
   * address the sort put the best candidate first. */
  const func_sym *sizeless = NULL;
  for (size_t i = hi, groups = 0; i > 0 && groups < 8; groups++) {
    size_t first = i - 1;
    while (first > 0 && m->syms[first - 1].addr == m->syms[i - 1].addr)
      first--;
    for (size_t j = first; j < i; j++) {
      const func_sym *f = &m->syms[j];
      if (f->size != 0 && pc - f->addr < f->size) return f;
      if (f->size == 0 && groups == 0 && !sizeless && pc < f->section_end)
        sizeless = f;
    }
    i = first;
  }
  return sizeless;
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

/* Fills r's frames for a real pc; the caller holds the guard. */
static void resolve(cprof__sym_result *r, uintptr_t pc) {
  Dwfl_Module *mod = S.dwfl ? libdw.dwfl_addrmodule(S.dwfl, pc) : NULL;
  if (!mod) return;

  const func_sym *fs = find_sym(mod, pc);
  const char *symname = fs ? fs->name : NULL;
  const char *file = NULL;
  int line = 0;
  Dwfl_Line *dl = libdw.dwfl_module_getsrc(mod, pc);
  if (dl) file = libdw.dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);

  Dwarf_Addr bias = 0;
  Dwarf_Die *cudie = libdw.dwfl_module_addrdie(mod, pc, &bias);
  Dwarf_Die *scopes = NULL;
  int nscopes = cudie ? libdw.dwarf_getscopes(cudie, pc - bias, &scopes) : 0;
  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  if (cudie && libdw.dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
    files = NULL;

  /* Inlined instances innermost first, up to the containing function. */
  int inl[MAX_FRAMES - 1], ninl = 0, last_inl = -1, sub = -1;
  for (int i = 0; i < nscopes; i++) {
    int tag = libdw.dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_inlined_subroutine) {
      if (ninl < (int)CPROF__ARRAY_LEN(inl)) inl[ninl++] = i;
      last_inl = i;
    } else if (tag == DW_TAG_subprogram) {
      sub = i;
      break;
    }
  }

  uint64_t start = 0;
  if (symname) {
    start = fs->addr;
  } else if (sub >= 0) {
    Dwarf_Addr low;
    symname = die_symbol(&scopes[sub]);
    if (libdw.dwarf_lowpc(&scopes[sub], &low) == 0) start = low + bias;
  }
  if (!symname) goto done;

  int n = 0;
  for (int k = 0; k < ninl; k++) {
    const char *name = die_symbol(&scopes[inl[k]]);
    const char *f = file;
    int l = line;
    if (k > 0) call_site(&scopes[inl[k - 1]], files, nfiles, &f, &l);
    if (!set_frame(&r->frames[n], name ? name : "??", f, l, 0)) goto done;
    n++;
  }
  {
    const char *f = file;
    int l = line;
    if (last_inl >= 0) call_site(&scopes[last_inl], files, nfiles, &f, &l);
    if (!set_frame(&r->frames[n], symname, f, l, start)) goto done;
    n++;
  }
  r->nframes = n;
  r->has_line = r->frames[0].line > 0;
  r->has_inline = n > 1;

done:
  free(scopes); /* libdw allocated it with malloc */
}

static int mapping_of(uintptr_t pc) {
  for (size_t i = 0; i < S.nmaps; i++)
    if (pc >= S.maps[i].start && pc < S.maps[i].limit) return (int)i;
  return -1;
}

const cprof__sym_result *cprof__sym_lookup(uintptr_t pc) {
  /* One slot per synthetic pc, so results for different ones coexist. */
  static cprof__sym_result synthetic[CPROF__PC_SYNTHETIC_MAX + 1];
  if (cprof__pc_is_synthetic(pc)) {
    cprof__sym_result *r = &synthetic[pc];
    const char *name = cprof__synthetic_name(pc);
    *r = (cprof__sym_result){.mapping = -1, .nframes = 1};
    r->frames[0] =
        (cprof__sym_frame){.name = name, .system_name = name, .file = ""};
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
  resolve(r, pc);
  cprof__guard_exit();
  cprof__hmap_put(&S.cache, pc, (uint64_t)(uintptr_t)r);
  return r;
}
