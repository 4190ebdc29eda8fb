/*
 * Tests of the in-process symbolizer against this very binary (built -O1 -g)
 * and the libraries it has loaded: names, files and lines of our own
 * functions, an inlined call, libc, synthetic and unmapped pcs, the mapping
 * list with the main executable first, a refresh after dlopen, and the PLT
 * stubs of this binary (SYMBOL@plt, as objdump names them).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture/cfi_index.h"
#include "encode/symbolize.h"
#include "testutil.h"

static volatile uintptr_t sink;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void dump(const char *what, const cprof__sym_result *r) {
  if (!getenv("CPROFTEST_VERBOSE") || !r) return;
  fprintf(stderr, "  %s: mapping %d, %d frames%s%s\n", what, r->mapping,
          r->nframes, r->has_line ? ", lines" : "",
          r->has_inline ? ", inline" : "");
  for (int i = 0; i < r->nframes; i++)
    fprintf(stderr, "    %s (%s) %s:%d start %#llx\n", r->frames[i].name,
            r->frames[i].system_name, r->frames[i].file, r->frames[i].line,
            (unsigned long long)r->frames[i].start);
}

static const int target_line = __LINE__ + 2;
__attribute__((noinline)) int target_function(int x) {
  sink += (uintptr_t)x;
  return x * 3 + (int)sink;
}

__attribute__((noinline)) static uintptr_t return_address(void) {
  uintptr_t ra = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("");
  return ra;
}

static int caller_line;
__attribute__((noinline)) static uintptr_t caller(void) {
  caller_line = __LINE__ + 1;
  uintptr_t ra = return_address();
  sink += ra;
  return ra - 1;
}

static int inlined_line;
static inline __attribute__((always_inline)) uintptr_t inlined_leaf(void) {
  inlined_line = __LINE__ + 1;
  uintptr_t ra = return_address();
  sink += ra;
  return ra - 1;
}

static int outer_line;
__attribute__((noinline)) static uintptr_t inline_outer(void) {
  outer_line = __LINE__ + 1;
  uintptr_t pc = inlined_leaf();
  sink ^= pc;
  return pc;
}

static void test_own_function(void) {
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  uintptr_t pc = (uintptr_t)&target_function + 4;
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  dump("target_function+4", r);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_INT(r->mapping, 0);
    CHECK_EQ_INT(r->nframes, 1);
    CHECK(r->has_line);
    CHECK(!r->has_inline);
    CHECK_STREQ(r->frames[0].name, "target_function");
    CHECK_STREQ(r->frames[0].system_name, "target_function");
    CHECK(ends_with(r->frames[0].file, "test_symbolize.c"));
    CHECK(r->frames[0].line >= target_line - 1 &&
          r->frames[0].line <= target_line + 3);
    CHECK(r->frames[0].start == (uintptr_t)&target_function);
    /* The cache hands back the same result. */
    CHECK(cprof__sym_lookup(pc) == r);
  }
  cprof__sym_unlock();
}

static void test_call_site(void) {
  uintptr_t pc = caller();
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  dump("caller", r);
  CHECK(r && r->nframes == 1);
  if (r && r->nframes == 1) {
    CHECK_STREQ(r->frames[0].name, "caller");
    CHECK(ends_with(r->frames[0].file, "test_symbolize.c"));
    CHECK_EQ_INT(r->frames[0].line, caller_line);
  }
  cprof__sym_unlock();
}

static void test_inlined(void) {
  uintptr_t pc = inline_outer();
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  dump("inline_outer", r);
  CHECK(r && r->nframes == 2);
  if (r && r->nframes == 2) {
    CHECK(r->has_inline);
    CHECK(r->has_line);
    CHECK_STREQ(r->frames[0].name, "inlined_leaf");
    CHECK(ends_with(r->frames[0].file, "test_symbolize.c"));
    CHECK_EQ_INT(r->frames[0].line, inlined_line);
    CHECK_STREQ(r->frames[1].name, "inline_outer");
    CHECK(ends_with(r->frames[1].file, "test_symbolize.c"));
    CHECK_EQ_INT(r->frames[1].line, outer_line);
    CHECK(r->frames[1].start == (uintptr_t)&inline_outer);
  }
  cprof__sym_unlock();
}

static bool is_hex(const char *s, size_t n) {
  if (strlen(s) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

static void test_mappings(void) {
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  size_t n = cprof__sym_nmappings();
  CHECK(n >= 2);
  const cprof__sym_mapping *m = cprof__sym_mapping_at(0);
  CHECK(m != NULL);
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(len > 0);
  if (m && len > 0) {
    exe[len] = '\0';
    CHECK(m->is_main);
    CHECK_STREQ(m->path, exe);
    CHECK(is_hex(m->build_id, 40));
    CHECK(m->start < m->limit);
    uintptr_t fn = (uintptr_t)&target_function;
    CHECK(fn >= m->start && fn < m->limit);
    if (getenv("CPROFTEST_VERBOSE"))
      fprintf(stderr, "  main %llx-%llx @%llx %s %s\n",
              (unsigned long long)m->start, (unsigned long long)m->limit,
              (unsigned long long)m->offset, m->path, m->build_id);
  }
  int mains = 0, vdsos = 0;
  for (size_t i = 0; i < n; i++) {
    const cprof__sym_mapping *mi = cprof__sym_mapping_at(i);
    mains += mi->is_main;
    /* Files, and the vDSO, whose code walks pass through. */
    CHECK(mi->path[0] == '/' || strcmp(mi->path, "[vdso]") == 0);
    vdsos += strcmp(mi->path, "[vdso]") == 0;
  }
  CHECK_EQ_INT(mains, 1);
  CHECK_EQ_INT(vdsos, 1);
  CHECK(cprof__sym_mapping_at(n) == NULL);
  cprof__sym_unlock();
}

static void test_libc(void) {
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  uintptr_t pc = (uintptr_t)&getpid + 1;
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  dump("getpid+1", r);
  CHECK(r && r->mapping > 0);
  if (r && r->mapping > 0) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at((size_t)r->mapping);
    CHECK(strstr(m->path, "libc.so") != NULL);
    CHECK(!m->is_main);
    CHECK(r->nframes >= 1);
    if (r->nframes >= 1) CHECK(strstr(r->frames[r->nframes - 1].name, "getpid"));
  }
  cprof__sym_unlock();
}

static void test_synthetic_and_unknown(void) {
  cprof__sym_lock();
  const uintptr_t synth[] = {CPROF__PC_TRUNCATED, CPROF__PC_OVERFLOW,
                             CPROF__PC_LOST};
  const cprof__sym_result *rs[3];
  for (size_t i = 0; i < 3; i++) {
    const cprof__sym_result *r = rs[i] = cprof__sym_lookup(synth[i]);
    CHECK(r != NULL);
    if (!r) continue;
    CHECK_EQ_INT(r->mapping, -1);
    CHECK_EQ_INT(r->nframes, 1);
    CHECK_STREQ(r->frames[0].name, cprof__synthetic_name(synth[i]));
    CHECK_STREQ(r->frames[0].system_name, cprof__synthetic_name(synth[i]));
    CHECK_STREQ(r->frames[0].file, "");
  }
  /* Earlier results survive later synthetic lookups. */
  CHECK_STREQ(rs[0]->frames[0].name, "[cprof: stack truncated]");

  const cprof__sym_result *r = cprof__sym_lookup(0x10000);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_INT(r->mapping, -1);
    CHECK_EQ_INT(r->nframes, 0);
    CHECK(!r->has_line);
  }
  cprof__sym_unlock();
}

static int find_mapping(uintptr_t pc) {
  for (size_t i = 0; i < cprof__sym_nmappings(); i++) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at(i);
    if (pc >= m->start && pc < m->limit) return (int)i;
  }
  return -1;
}

/* dlopens lib, refreshes, and symbolizes sym in it. libz is always loaded
 * already (cprof links it); libm usually is not, so it shows a new mapping
 * appearing and the cache being dropped. */
static void check_dlopen(const char *lib, const char *sym) {
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  size_t before = cprof__sym_nmappings();
  const cprof__sym_result *own =
      cprof__sym_lookup((uintptr_t)&target_function + 4);
  cprof__sym_unlock();

  void *pre = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  bool loaded = pre != NULL;
  if (pre) dlclose(pre);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  if (!h) return;
  void *fn = dlsym(h, sym);
  CHECK(fn != NULL);

  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  if (!loaded) {
    CHECK(cprof__sym_nmappings() > before);
    /* The rebuild dropped the cache: a fresh result, same answer. */
    const cprof__sym_result *again =
        cprof__sym_lookup((uintptr_t)&target_function + 4);
    CHECK(again && again != own && again->nframes == 1 &&
          strcmp(again->frames[0].name, "target_function") == 0);
  }
  int mi = find_mapping((uintptr_t)fn);
  CHECK(mi > 0);
  const cprof__sym_result *r = cprof__sym_lookup((uintptr_t)fn + 1);
  dump(sym, r);
  CHECK(r && r->mapping == mi && r->nframes >= 1);
  if (mi > 0) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at((size_t)mi);
    CHECK(strstr(m->path, lib) != NULL);
    CHECK(is_hex(m->build_id, 40));
  }
  if (r && r->nframes >= 1)
    CHECK(strstr(r->frames[r->nframes - 1].name, sym) != NULL);
  cprof__sym_unlock();
  dlclose(h);
}

static void test_dlopen(void) {
  check_dlopen("libz.so.1", "deflate");
  check_dlopen("libm.so.6", "cbrt");
}

/* The name of the function at pc in a library without debug information,
 * where symbols share addresses (progs/libsymorder.c): the global one over
 * the local one listed first, a sized function over a label. */
static void test_symbol_order(void) {
  char exe[4096], path[4200];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  if (n <= 0) return;
  exe[n] = 0;
  *strrchr(exe, '/') = 0;
  snprintf(path, sizeof path, "%s/progs/libsymorder.so", exe);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  if (!h) return;
  static const char *names[] = {"symorder_pair", "symorder_after"};
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    void *fn = dlsym(h, names[i]);
    CHECK(fn != NULL);
    if (!fn) continue;
    const cprof__sym_result *r = cprof__sym_lookup((uintptr_t)fn + 2);
    dump(names[i], r);
    CHECK(r && r->nframes == 1 && strcmp(r->frames[0].name, names[i]) == 0);
  }
  cprof__sym_unlock();
  dlclose(h);
}

/* A refresh without a change keeps the cache (and the results). */
static void test_refresh_keeps_cache(void) {
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *a = cprof__sym_lookup((uintptr_t)&caller + 2);
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *b = cprof__sym_lookup((uintptr_t)&caller + 2);
  CHECK(a == b);
  cprof__sym_unlock();
}

/* A second direct call to return_address, asked about only here. */
__attribute__((noinline)) static uintptr_t caller2(void) {
  uintptr_t ra = return_address();
  sink += ra;
  return ra - 1;
}

/* What a call calls is read from the code, after the first 64 reads of a
 * hold from page copies: the call in caller2 is asked about after 4,000
 * other addresses (every byte of this test's code around it, across
 * several pages), and still found to call return_address. */
static void test_callee_from_copies(void) {
  uintptr_t pc = caller2();
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  uintptr_t from = (uintptr_t)&test_own_function;
  for (uintptr_t a = from; a < from + 4000; a++)
    if (a != pc) (void)cprof__sym_callee_of(a);
  const cprof__sym_callee *c = cprof__sym_callee_of(pc);
  CHECK(c && c->target == (uintptr_t)&return_address);
  if (c) CHECK_STREQ(c->frame.name, "return_address");
  cprof__sym_unlock();
}

/* Saves held (a dump writing several profiles) are made once, at the
 * last release: nothing is written to the symbol cache before it. */
static size_t sym_entries(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += ends_with(e->d_name, ".sym");
  if (d) closedir(d);
  return n;
}

static const char *cache_dir;

static void test_held_saves(void) {
  cprof__sym_hold_saves();
  cprof__sym_hold_saves();
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *r = cprof__sym_lookup(caller());
  CHECK(r && r->nframes > 0);
  cprof__sym_save();
  cprof__sym_unlock();
  CHECK_EQ_INT((int)sym_entries(cache_dir), 0);
  cprof__sym_release_saves();
  CHECK_EQ_INT((int)sym_entries(cache_dir), 0);
  cprof__sym_release_saves();
  CHECK(sym_entries(cache_dir) >= 1);
}

/* A call no other test asks about, so that its first lookup is here. */
__attribute__((noinline)) static uintptr_t kept_caller(void) {
  uintptr_t ra = return_address();
  sink += ra;
  return ra - 1;
}

/* What a call calls is a fact of the program's bytes, kept in the symbol
 * cache with the call site's names, so that a later process's exit dump
 * reads no code back for it: the call in kept_caller() is read here, after
 * its names and before the save; the test's second process
 * (test_call_found_kept) finds it in the entry before anything asked
 * about it there, at its own load address. */
static void test_call_kept(void) {
  uintptr_t pc = kept_caller();
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  CHECK(r && r->call == CPROF__CODE_UNREAD);
  const cprof__sym_callee *c = cprof__sym_callee_of(pc);
  CHECK(c && c->target == (uintptr_t)&return_address);
  CHECK(r && r->call == CPROF__CODE_YES &&
        pc + 1 + (uintptr_t)(intptr_t)r->call_disp ==
            (uintptr_t)&return_address);
  /* A function's first address ends no call. */
  const cprof__sym_result *t = cprof__sym_lookup((uintptr_t)&kept_caller);
  CHECK(t && t->call == CPROF__CODE_UNREAD);
  (void)cprof__sym_callee_of((uintptr_t)&kept_caller);
  CHECK(t && t->call == CPROF__CODE_NO);
  cprof__sym_save();
  cprof__sym_unlock();
}

static void test_call_found_kept(void) {
  uintptr_t pc = kept_caller();
  /* The unwind tables' index tells the loader's mappings (the ones the
   * symbol cache keeps), as the library's start builds it. */
  CHECK_EQ_INT(cprof__cfi_refresh(), 0);
  cprof__sym_lock();
  CHECK_EQ_INT(cprof__sym_refresh(), 0);
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  CHECK(r && r->nframes > 0 && strcmp(r->frames[r->nframes - 1].name,
                                      "kept_caller") == 0);
  CHECK(r && r->call == CPROF__CODE_YES);
  const cprof__sym_callee *c = cprof__sym_callee_of(pc);
  CHECK(c && c->target == (uintptr_t)&return_address);
  if (c) CHECK_STREQ(c->frame.name, "return_address");
  r = cprof__sym_lookup((uintptr_t)&kept_caller);
  CHECK(r && r->call == CPROF__CODE_NO);
  cprof__sym_unlock();
}

/* The runtime address of the first stub in this binary's PLT section
 * name that jumps through the GOT (entry 1 of .plt, whose entry 0 calls
 * the loader; entry 0 of .plt.sec and .plt.got), read from
 * /proc/self/exe's section headers; 0 if there is no such section. */
static int64_t main_bias = -1;
static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  main_bias = (int64_t)info->dlpi_addr;
  return 1;
}

static uintptr_t plt_stub_in(const char *section) {
  int fd = open("/proc/self/exe", O_RDONLY);
  if (fd < 0) return 0;
  static char names[1 << 16];
  Elf64_Ehdr eh;
  uintptr_t found = 0;
  if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
      eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum < 256 &&
      eh.e_shstrndx < eh.e_shnum) {
    Elf64_Shdr sh[256];
    size_t len = (size_t)eh.e_shnum * sizeof *sh;
    if (pread(fd, sh, len, (off_t)eh.e_shoff) == (ssize_t)len &&
        sh[eh.e_shstrndx].sh_size < sizeof names &&
        pread(fd, names, sh[eh.e_shstrndx].sh_size,
              (off_t)sh[eh.e_shstrndx].sh_offset) > 0) {
      for (int i = 0; i < eh.e_shnum && !found; i++) {
        if (sh[i].sh_name >= sh[eh.e_shstrndx].sh_size ||
            strcmp(names + sh[i].sh_name, section) != 0)
          continue;
        uint64_t size = sh[i].sh_entsize ? sh[i].sh_entsize : 16;
        uint64_t at = sh[i].sh_addr + (strcmp(section, ".plt") == 0 ? size : 0);
        if (at + size <= sh[i].sh_addr + sh[i].sh_size) found = at;
      }
    }
  }
  close(fd);
  if (!found) return 0;
  dl_iterate_phdr(first_object, NULL);
  return main_bias < 0 ? 0 : (uintptr_t)(found + (uint64_t)main_bias);
}

/* A sample in a PLT stub is named SYMBOL@plt, a function the binary
 * imports, and counts as named: no other copy of the binary would name
 * it better, so its mapping can say it has functions. Every PLT section
 * this binary has is tried (gcc gives it .plt, and .plt.got for functions
 * whose address is also taken; with -fcf-protection, .plt.sec). */
static void test_plt_stub(void) {
  const char *sections[] = {".plt", ".plt.sec", ".plt.got"};
  int tried = 0;
  cprof__sym_lock();
  cprof__sym_refresh();
  for (size_t i = 0; i < 3; i++) {
    uintptr_t stub = plt_stub_in(sections[i]);
    if (!stub) continue;
    tried++;
    const cprof__sym_result *r = cprof__sym_lookup(stub + 4);
    dump(sections[i], r);
    CHECK(r != NULL && r->nframes == 1 && r->has_function);
    if (!r || r->nframes != 1) continue;
    const cprof__sym_frame *f = &r->frames[0];
    CHECK(ends_with(f->name, "@plt"));
    CHECK_STREQ(f->file, "");
    CHECK(f->start == stub);
    char sym[256];
    snprintf(sym, sizeof sym, "%.*s", (int)(strlen(f->name) - 4), f->name);
    CHECK(strlen(f->name) > 4 && dlsym(RTLD_DEFAULT, sym) != NULL);
  }
  cprof__sym_unlock();
  CHECK(tried > 0); /* gcc's default links always give a .plt */
}

/* The fuzzer's entry (fuzz/fuzz_elfsym.c): this test's own executable,
 * given as bytes, resolves; a prefix of it and bytes that are no ELF file
 * are refused or resolve what they hold, without a crash; and the live
 * symbolizer works again afterwards. */
static void test_scan_image(void) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  size_t cap = 64 << 20, len = 0;
  unsigned char *img = malloc(cap);
  CHECK(img != NULL);
  ssize_t n;
  while (img && len < cap && (n = read(fd, img + len, cap - len)) > 0)
    len += (size_t)n;
  close(fd);
  size_t resolved = 0;
  CHECK_EQ_INT(cprof__sym_scan_image(img, len, &resolved), 0);
  /* 64 spread addresses, and three around each of this test's functions. */
  CHECK(resolved > 64);
  printf("  own executable: %zu addresses resolved\n", resolved);
  size_t part = 0;
  cprof__sym_scan_image(img, 4096, &part); /* headers only: anything goes */
  CHECK(part <= resolved);
  memset(img, 0x41, 4096);
  CHECK_EQ_INT(cprof__sym_scan_image(img, 4096, &resolved), CPROF_ESYS);
  CHECK_EQ_INT((int)resolved, 0);
  free(img);
  cprof__sym_lock();
  const cprof__sym_result *r = cprof__sym_lookup((uintptr_t)target_function);
  CHECK(r && r->nframes >= 1 && strcmp(r->frames[0].name, "target_function") == 0);
  cprof__sym_unlock();
}

int main(int argc, char **argv) {
  (void)argc;
  /* A symbol cache of the test's own, empty at the start (for
   * test_held_saves): the cache's directory is read as the library
   * starts, so the test runs itself again with it set. */
  cache_dir = getenv("CPROFTEST_SYMCACHE");
  if (!cache_dir) {
    static char dir[] = "/tmp/cprof-test-symcache-XXXXXX";
    if (!mkdtemp(dir) || setenv("CPROFTEST_SYMCACHE", dir, 1) ||
        setenv("CPROF_DEBUG_CACHE", dir, 1)) {
      perror("mkdtemp");
      return 1;
    }
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  if (getenv("CPROFTEST_SYMCACHE_AGAIN")) {
    RUN(test_call_found_kept);
    return TEST_RESULT();
  }
  RUN(test_own_function);
  RUN(test_call_site);
  RUN(test_inlined);
  RUN(test_mappings);
  RUN(test_libc);
  RUN(test_synthetic_and_unknown);
  RUN(test_plt_stub);
  RUN(test_scan_image);
  RUN(test_refresh_keeps_cache);
  RUN(test_dlopen);
  RUN(test_symbol_order);
  RUN(test_held_saves);
  RUN(test_callee_from_copies);
  RUN(test_call_kept);
  /* The second process: the same cache, every fact read from it. */
  {
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
      /* The library takes its settings out of the environment. */
      setenv("CPROF_DEBUG_CACHE", cache_dir, 1);
      setenv("CPROFTEST_SYMCACHE_AGAIN", "1", 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child &&
          WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf '%s'", cache_dir);
  if (system(rm) != 0) perror("rm");
  return TEST_RESULT();
}
