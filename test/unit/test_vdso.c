/*
 * Tests of the vDSO's function names (encode/vdso.h): against this
 * process's own vDSO, whose functions the dynamic loader finds by name
 * (dlsym on linux-vdso.so.1), and against a small image built here, which
 * counts its symbols by DT_GNU_HASH or by DT_HASH and is loaded at a high
 * address as older kernels' vDSO was. Every image is also given cut short
 * at every length, from a buffer of exactly that length, so that ASan
 * catches a read past the end.
 */
#include <dlfcn.h>
#include <elf.h>
#include <stdbool.h>
#include <stdint.h>

#include "encode/vdso.h"
#include "testutil.h"

/* Calls cprof__vdso_symbol on the first len bytes of image, copied to a
 * buffer of exactly that size. */
static bool lookup_cut(const unsigned char *image, size_t len, uint64_t off,
                       cprof__vdso_sym *out, char *name, size_t name_size) {
  unsigned char *copy = malloc(len ? len : 1);
  if (!copy) return false;
  memcpy(copy, image, len);
  bool ok = cprof__vdso_symbol(copy, len, off, out);
  if (ok) snprintf(name, name_size, "%s", out->name);
  free(copy);
  return ok;
}

/* Every cut of the image: none reads past its end, and none names a
 * function the whole image does not. */
static void check_cuts(const unsigned char *image, size_t len, uint64_t off,
                       const char *whole_name) {
  for (size_t cut = 0; cut < len; cut++) {
    cprof__vdso_sym s;
    char name[128];
    if (lookup_cut(image, cut, off, &s, name, sizeof name))
      CHECK_STREQ(name, whole_name);
  }
}

/* The size of the [vdso] mapping starting at base, 0 if none. */
static size_t mapping_size(uintptr_t base) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  size_t size = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long s, e;
    if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &s, &e) == 2 &&
        s == base)
      size = (size_t)(e - s);
  }
  if (f) fclose(f);
  return size;
}

static void test_live(void) {
  uintptr_t base;
  if (!cprof__vdso_base(&base)) {
    fprintf(stderr, "no vDSO in this process (vdso=0): only the built image is checked\n");
    return;
  }
  size_t size = mapping_size(base);
  CHECK(size > 0);
  void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
  CHECK(h != NULL);
  if (!h || !size) return;
  /* The functions x86-64's vDSO exports, each under a global name and a
   * weak alias; the global name must be the one given. */
  static const char *const names[][2] = {
      {"__vdso_clock_gettime", "clock_gettime"},
      {"__vdso_gettimeofday", "gettimeofday"},
      {"__vdso_time", "time"},
      {"__vdso_getcpu", "getcpu"},
      {"__vdso_clock_getres", "clock_getres"},
  };
  int found = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *fn = dlsym(h, names[i][0]);
    if (!fn) continue;
    found++;
    uint64_t off = (uint64_t)((uintptr_t)fn - base);
    void *alias = dlsym(h, names[i][1]);
    fprintf(stderr, "vDSO: %s at +%#llx (%s %s)\n", names[i][0],
            (unsigned long long)off, names[i][1],
            alias == fn ? "at the same address" : "elsewhere or absent");
    cprof__vdso_sym s;
    CHECK(cprof__vdso_symbol((const unsigned char *)base, size, off, &s));
    CHECK_STREQ(s.name, names[i][0]);
    CHECK_EQ_INT(s.start, off);
    CHECK(cprof__vdso_symbol((const unsigned char *)base, size, off + 1, &s));
    CHECK_STREQ(s.name, names[i][0]);
    CHECK_EQ_INT(s.start, off);
  }
  /* clock_gettime is in every x86-64 vDSO since 2.6. */
  CHECK(dlsym(h, "__vdso_clock_gettime") != NULL);
  CHECK(found > 0);
  /* The ELF header is no function. */
  cprof__vdso_sym s;
  CHECK(!cprof__vdso_symbol((const unsigned char *)base, size, 0, &s));
  void *cg = dlsym(h, "__vdso_clock_gettime");
  if (cg) check_cuts((const unsigned char *)base, size,
                     (uint64_t)((uintptr_t)cg - base), "__vdso_clock_gettime");
  dlclose(h);
}

/* A 1 KiB image linked at BIAS: a weak f and a global __x_f at 0x380, g at
 * 0x390, and h at 0x3a0 without a size. */
#define BIAS 0xffffffffff700000ull
#define IMAGE 0x400

static void put_sym(unsigned char *img, int i, uint32_t name, int bind,
                    uint64_t value, uint64_t size) {
  Elf64_Sym s = {.st_name = name, .st_info = ELF64_ST_INFO(bind, STT_FUNC),
                 .st_shndx = 12, .st_value = BIAS + value, .st_size = size};
  memcpy(img + 0x200 + i * sizeof s, &s, sizeof s);
}

static void build_image(unsigned char *img, bool gnu_hash) {
  memset(img, 0, IMAGE);
  Elf64_Ehdr eh = {.e_type = ET_DYN, .e_machine = EM_X86_64,
                   .e_version = EV_CURRENT, .e_phoff = 0x40,
                   .e_ehsize = sizeof eh, .e_phentsize = sizeof(Elf64_Phdr),
                   .e_phnum = 2};
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  memcpy(img, &eh, sizeof eh);
  Elf64_Phdr ph[2] = {
      {.p_type = PT_LOAD, .p_offset = 0, .p_vaddr = BIAS, .p_filesz = IMAGE,
       .p_memsz = IMAGE},
      {.p_type = PT_DYNAMIC, .p_offset = 0x100, .p_vaddr = BIAS + 0x100,
       .p_filesz = 6 * sizeof(Elf64_Dyn)},
  };
  memcpy(img + 0x40, ph, sizeof ph);
  Elf64_Dyn dyn[6] = {
      {DT_SYMTAB, {BIAS + 0x200}},
      {DT_STRTAB, {BIAS + 0x300}},
      {DT_STRSZ, {0x20}},
      {DT_SYMENT, {sizeof(Elf64_Sym)}},
      {gnu_hash ? DT_GNU_HASH : DT_HASH, {BIAS + 0x180}},
      {DT_NULL, {0}},
  };
  memcpy(img + 0x100, dyn, sizeof dyn);
  if (gnu_hash) {
    /* nbuckets 1, symoffset 1, one bloom word; bucket 0 starts at symbol
     * 1, and the chain of symbols 1-4 ends at 4. */
    uint32_t head[4] = {1, 1, 1, 0}, bucket = 1, chain[4] = {0, 0, 0, 1};
    memcpy(img + 0x180, head, sizeof head);
    memcpy(img + 0x180 + 16 + 8, &bucket, sizeof bucket);
    memcpy(img + 0x180 + 16 + 8 + 4, chain, sizeof chain);
  } else {
    uint32_t hash[2] = {1, 5}; /* nbucket, nchain: symbols 0-4 */
    memcpy(img + 0x180, hash, sizeof hash);
  }
  static const char strtab[] = "\0f\0__x_f\0g\0h";
  memcpy(img + 0x300, strtab, sizeof strtab);
  put_sym(img, 1, 1, STB_WEAK, 0x380, 0x10);
  put_sym(img, 2, 3, STB_GLOBAL, 0x380, 0x10);
  put_sym(img, 3, 9, STB_GLOBAL, 0x390, 0x10);
  put_sym(img, 4, 11, STB_GLOBAL, 0x3a0, 0);
}

static void check_built(bool gnu_hash) {
  unsigned char img[IMAGE];
  build_image(img, gnu_hash);
  cprof__vdso_sym s;
  CHECK(cprof__vdso_symbol(img, sizeof img, 0x385, &s));
  CHECK_STREQ(s.name, "__x_f");
  CHECK_EQ_INT(s.start, 0x380);
  CHECK(cprof__vdso_symbol(img, sizeof img, 0x39f, &s));
  CHECK_STREQ(s.name, "g");
  CHECK_EQ_INT(s.start, 0x390);
  CHECK(!cprof__vdso_symbol(img, sizeof img, 0x3a0, &s));
  CHECK(!cprof__vdso_symbol(img, sizeof img, 0x37f, &s));
  check_cuts(img, sizeof img, 0x385, "__x_f");
  /* A name running off the string table (DT_STRSZ cut to end inside
   * "g") is refused; the others stand. */
  uint64_t strsz = 10;
  memcpy(img + 0x100 + 2 * sizeof(Elf64_Dyn) + 8, &strsz, sizeof strsz);
  CHECK(cprof__vdso_symbol(img, sizeof img, 0x385, &s));
  CHECK(!cprof__vdso_symbol(img, sizeof img, 0x395, &s));
  /* Not an ELF image. */
  img[1] = 'X';
  CHECK(!cprof__vdso_symbol(img, sizeof img, 0x385, &s));
}

static void test_built_gnu_hash(void) { check_built(true); }
static void test_built_hash(void) { check_built(false); }

int main(void) {
  RUN(test_live);
  RUN(test_built_gnu_hash);
  RUN(test_built_hash);
  return TEST_RESULT();
}
