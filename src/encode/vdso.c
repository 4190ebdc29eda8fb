/*
 * The vDSO's function names (see vdso.h). The image is the kernel's, but
 * it is read as any outside ELF bytes are: every offset and count taken
 * from it is checked against the length the caller gives (the [vdso]
 * mapping's size), so a malformed image gives no name, never a read past
 * it. It reads the ELF header, the program headers, the dynamic section
 * and the dynamic symbol table (counted by DT_HASH or DT_GNU_HASH), as
 * the kernel's own example parser does; section headers are not needed.
 * It may call nothing but libc's getauxval; it never allocates.
 */
#include <elf.h>
#include <string.h>
#include <sys/auxv.h>

#include "encode/vdso.h"

/* Copies len bytes at off of the image into out, when they are all in it. */
static bool get(const unsigned char *image, size_t size, uint64_t off,
                void *out, size_t len) {
  if (off > size || len > size - off) return false;
  memcpy(out, image + off, len);
  return true;
}

typedef struct dyn_info {
  uint64_t symtab, strtab, strsz, syment, hash, gnu_hash; /* image offsets */
  bool has_hash, has_gnu_hash;
} dyn_info;

/* The number of dynamic symbols, from DT_HASH's chain count or else the
 * highest index DT_GNU_HASH's buckets and chains reach; 0 if neither
 * reads. */
static uint64_t symbol_count(const unsigned char *image, size_t size,
                             const dyn_info *d) {
  uint32_t w[4];
  if (d->has_hash && get(image, size, d->hash, w, 2 * sizeof w[0]))
    return w[1];
  if (!d->has_gnu_hash || !get(image, size, d->gnu_hash, w, sizeof w))
    return 0;
  uint64_t nbuckets = w[0], symoffset = w[1], bloom = w[2];
  uint64_t buckets = d->gnu_hash + 16 + bloom * 8;
  uint64_t chains = buckets + nbuckets * 4, last = 0;
  if (nbuckets > size / 4) return 0;
  for (uint64_t b = 0; b < nbuckets; b++) {
    uint32_t first;
    if (!get(image, size, buckets + b * 4, &first, sizeof first)) return 0;
    if (first > last) last = first;
  }
  if (last < symoffset) return symoffset; /* every bucket empty */
  /* The last bucket's chain ends at the entry with the low bit set. */
  for (uint64_t i = last;; i++) {
    uint32_t h;
    if (i - symoffset > size / 4 ||
        !get(image, size, chains + (i - symoffset) * 4, &h, sizeof h))
      return 0;
    if (h & 1) return i + 1;
  }
}

bool cprof__vdso_symbol(const unsigned char *image, size_t size, uint64_t off,
                        cprof__vdso_sym *out) {
  Elf64_Ehdr eh;
  if (!get(image, size, 0, &eh, sizeof eh) ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    return false;
  /* Virtual addresses become image offsets through the load segment. */
  uint64_t bias = 0, dyn_off = 0, dyn_size = 0;
  bool have_load = false, have_dyn = false;
  for (uint64_t i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (!get(image, size, eh.e_phoff + i * sizeof ph, &ph, sizeof ph))
      return false;
    if (ph.p_type == PT_LOAD && !have_load) {
      bias = ph.p_vaddr - ph.p_offset;
      have_load = true;
    } else if (ph.p_type == PT_DYNAMIC) {
      dyn_off = ph.p_offset;
      dyn_size = ph.p_filesz;
      have_dyn = true;
    }
  }
  if (!have_load || !have_dyn) return false;

  dyn_info d = {.syment = sizeof(Elf64_Sym)};
  bool has_symtab = false, has_strtab = false;
  for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dyn_size;
       at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn dy;
    if (!get(image, size, dyn_off + at, &dy, sizeof dy)) return false;
    if (dy.d_tag == DT_NULL) break;
    uint64_t v = dy.d_un.d_ptr - bias;
    switch (dy.d_tag) {
      case DT_SYMTAB: d.symtab = v, has_symtab = true; break;
      case DT_STRTAB: d.strtab = v, has_strtab = true; break;
      case DT_STRSZ: d.strsz = dy.d_un.d_val; break;
      case DT_SYMENT: d.syment = dy.d_un.d_val; break;
      case DT_HASH: d.hash = v, d.has_hash = true; break;
      case DT_GNU_HASH: d.gnu_hash = v, d.has_gnu_hash = true; break;
      default: break;
    }
  }
  if (!has_symtab || !has_strtab || d.syment < sizeof(Elf64_Sym) ||
      d.strtab > size || d.strsz > size - d.strtab)
    return false;

  uint64_t n = symbol_count(image, size, &d);
  bool found = false;
  int found_bind = 0;
  for (uint64_t i = 1; i < n; i++) {
    Elf64_Sym s;
    if (i > size / d.syment ||
        !get(image, size, d.symtab + i * d.syment, &s, sizeof s))
      break;
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF ||
        s.st_size == 0 || s.st_name >= d.strsz)
      continue;
    uint64_t start = s.st_value - bias;
    if (off < start || off - start >= s.st_size) continue;
    const char *name = (const char *)image + d.strtab + s.st_name;
    if (!memchr(name, '\0', d.strsz - s.st_name) || !*name) continue;
    int bind = ELF64_ST_BIND(s.st_info);
    /* The first name, unless a global one comes after a weak one. */
    if (found && !(bind == STB_GLOBAL && found_bind != STB_GLOBAL)) continue;
    out->name = name;
    out->start = start;
    found = true;
    found_bind = bind;
  }
  return found;
}

bool cprof__vdso_base(uintptr_t *base) {
  unsigned long at = getauxval(AT_SYSINFO_EHDR);
  *base = (uintptr_t)at;
  return at != 0;
}
