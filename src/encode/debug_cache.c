/*
 * The inflated-debug-file cache (debug_cache.h), an entry kind of the
 * private cache directory (base/cachedir.h), which keeps the directory,
 * its checks, its temporary names and its bound.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/cachedir.h"
#include "base/env.h"
#include "base/mem.h"
#include "encode/debug_cache.h"

#define CHUNK ((size_t)256 * 1024)

static void entry_name(char *out, size_t cap, const unsigned char *bits,
                       int n, const char *suffix) {
  size_t len = 0;
  for (int i = 0; i < n && len + 3 < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%02x", bits[i]);
  snprintf(out + len, cap - len, "%s", suffix);
}


/* Inflates the zlib stream in[0..len) to out at off; true when it gives
 * exactly size bytes. */
static bool inflate_to(int out, const unsigned char *in, size_t len,
                       unsigned long long size, off_t off, unsigned char *buf) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) return false;
  unsigned long long done = 0;
  int rc = Z_OK;
  bool ok = true;
  while (ok && rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      size_t take = len > UINT_MAX ? UINT_MAX : len;
      if (take == 0) break;
      z.next_in = (Bytef *)(uintptr_t)in;
      z.avail_in = (uInt)take;
      in += take;
      len -= take;
    }
    z.next_out = buf;
    z.avail_out = (uInt)CHUNK;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) ok = false;
    size_t got = CHUNK - z.avail_out;
    if (got > size - done) ok = false;
    if (ok && got)
      ok = cprof__cachedir_write_at(out, buf, got, off + (off_t)done);
    done += got;
    if (ok && rc == Z_OK && got == 0 && z.avail_in == 0 && len == 0)
      ok = false; /* input ended before the stream did */
  }
  inflateEnd(&z);
  return ok && rc == Z_STREAM_END && done == size;
}

int cprof__debug_cache_inflate(const unsigned char *image, size_t len,
                               int out, unsigned long long max) {
  Elf64_Ehdr eh;
  if (len < sizeof eh) return -1;
  memcpy(&eh, image, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shoff > len || (len - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return -1;
  size_t nsh = eh.e_shnum;
  Elf64_Shdr *sh = cprof__malloc(nsh * sizeof *sh);
  if (!sh) return -1;
  memcpy(sh, image + eh.e_shoff, nsh * sizeof *sh);
  unsigned long long total = (len + 15) & ~15ull;
  size_t compressed = 0;
  int rc = -1;
  if (total > max) goto done;
  for (size_t i = 0; i < nsh; i++) {
    if (!(sh[i].sh_flags & SHF_COMPRESSED) || sh[i].sh_type == SHT_NOBITS)
      continue;
    Elf64_Chdr ch;
    if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset ||
        sh[i].sh_size < sizeof ch)
      goto done;
    memcpy(&ch, image + sh[i].sh_offset, sizeof ch);
    if (ch.ch_type != ELFCOMPRESS_ZLIB) goto done; /* libdw's reading */
    if (ch.ch_size > max || total > max - ch.ch_size) goto done;
    total = (total + ch.ch_size + 15) & ~15ull;
    compressed++;
  }
  if (compressed == 0) {
    rc = 0;
    goto done;
  }
  if (nsh * sizeof *sh > max || total > max - nsh * sizeof *sh) goto done;
  if (out < 0) { /* only asked whether there is a copy to write */
    rc = 1;
    goto done;
  }
  unsigned char *buf = cprof__malloc(CHUNK);
  if (!buf) goto done;
  bool ok = cprof__cachedir_write_at(out, image, len, 0);
  off_t at = (off_t)((len + 15) & ~(size_t)15);
  for (size_t i = 0; ok && i < nsh; i++) {
    if (!(sh[i].sh_flags & SHF_COMPRESSED) || sh[i].sh_type == SHT_NOBITS)
      continue;
    Elf64_Chdr ch;
    memcpy(&ch, image + sh[i].sh_offset, sizeof ch);
    ok = inflate_to(out, image + sh[i].sh_offset + sizeof ch,
                    sh[i].sh_size - sizeof ch, ch.ch_size, at, buf);
    sh[i].sh_offset = (Elf64_Off)at;
    sh[i].sh_size = ch.ch_size;
    sh[i].sh_flags &= ~(Elf64_Xword)SHF_COMPRESSED;
    sh[i].sh_addralign = ch.ch_addralign;
    at = (off_t)(((unsigned long long)at + ch.ch_size + 15) & ~15ull);
  }
  cprof__free(buf);
  eh.e_shoff = (Elf64_Off)at;
  if (ok) ok = cprof__cachedir_write_at(out, sh, nsh * sizeof *sh, at);
  if (ok) ok = cprof__cachedir_write_at(out, &eh, sizeof eh, 0);
  rc = ok ? 1 : -1;
done:
  cprof__free(sh);
  return rc;
}

/* Writes the entry name from the file open at src (status sst): 1 written,
 * 0 nothing to write (not compressed), -1 not written. */
static int write_entry(int d, const char *name, int src,
                       const struct stat *sst) {
  if (sst->st_size <= 0 ||
      (unsigned long long)sst->st_size > cprof__cachedir_max())
    return -1;
  size_t len = (size_t)sst->st_size;
  void *image = mmap(NULL, len, PROT_READ, MAP_PRIVATE, src, 0);
  if (image == MAP_FAILED) return -1;
  int rc = cprof__debug_cache_inflate(image, len, -1, cprof__cachedir_max());
  if (rc != 1) {
    munmap(image, len);
    return rc;
  }
  char tmp[2 * 64 + 32];
  int out = cprof__cachedir_create_temporary(d, name, tmp, sizeof tmp);
  if (out < 0) {
    munmap(image, len);
    return -1;
  }
  rc = cprof__debug_cache_inflate(image, len, out, cprof__cachedir_max());
  munmap(image, len);
  if (close(out) != 0 && rc == 1) rc = -1;
  if (rc == 1 && renameat(d, tmp, d, name) != 0) rc = -1;
  if (rc != 1) (void)unlinkat(d, tmp, 0);
  if (rc == 1) cprof__cachedir_evict(d, name);
  return rc;
}

int cprof__debug_cache_open(int fd, const struct stat *st,
                            const unsigned char *bits, int n, char *path,
                            size_t cap, struct stat *out_st) {
  if (!cprof__cachedir_on() || n < 1 || n > 64) return -1;
  char name[2 * 64 + 16];
  entry_name(name, sizeof name, bits, n, ".debug");
  int d = cprof__cachedir_open();
  if (d < 0) return -1;
  int c = cprof__cachedir_open_entry(d, name, out_st);
  if (c < 0 && write_entry(d, name, fd, st) == 1)
    c = cprof__cachedir_open_entry(d, name, out_st);
  close(d);
  if (c >= 0 &&
      (size_t)snprintf(path, cap, "%s/%s", cprof__cachedir_path(), name) >=
          cap) {
    close(c);
    c = -1;
  }
  return c;
}

void cprof__debug_cache_drop(const unsigned char *bits, int n) {
  if (!cprof__cachedir_on() || n < 1 || n > 64) return;
  char name[2 * 64 + 16];
  entry_name(name, sizeof name, bits, n, ".debug");
  int d = cprof__cachedir_open();
  if (d < 0) return;
  (void)unlinkat(d, name, 0);
  close(d);
}

