/*
 * The cprof command-line tool. Like curl's src/, it uses only the public
 * API in cprof.h. Each subcommand is one function with its own --help.
 */
#include <cprof.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof_ui_page.h"
#include "base/text.h"
#include "pem.h"
#include "pprofdec.h"

/* The library directory of an installation, relative to the directory of
 * the installed cprof (CMake passes the one it installs to). */
#ifndef CPROF_REL_LIBDIR
#define CPROF_REL_LIBDIR "../lib"
#endif

static const char usage[] =
    "usage: cprof <command> [arguments]\n"
    "\n"
    "Profiling for C and C++ programs, in pprof's format.\n"
    "\n"
    "commands:\n"
    "  run        run a program with cprof preloaded (profile an unmodified binary)\n"
    "  extract    turn the PEM dumps in a log back into profile files\n"
    "  profiles   list the profiles cprof can write, with descriptions\n"
    "  view       write a profile as one HTML page with a flame graph\n"
    "  top        print a profile's top functions, as go tool pprof -top does\n"
    "  version    print the library version\n"
    "  help       print this text\n"
    "\n"
    "Run `cprof <command> --help` for a command's options.\n";

static int wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
  return 0;
}

/* The environment variable that sets the limit on a profile's size. */
#define MAX_SIZE_ENV "CPROF_MAX_PROFILE_SIZE"
static const char limit_hint[] =
    "; raise it with --max-size or " MAX_SIZE_ENV;

/* The limit on a profile's decompressed size: arg (--max-size) when given,
 * else the environment's, else PPROFDEC_MAX_SIZE. Returns 0, or -1 after
 * saying what is wrong with the value. */
static int max_size(const char *cmd, const char *arg, size_t *out) {
  const char *env = arg ? NULL : getenv(MAX_SIZE_ENV);
  *out = PPROFDEC_MAX_SIZE;
  if (!arg && (!env || !*env)) return 0;
  if (pprofdec_parse_size(arg ? arg : env, out) == 0) return 0;
  fprintf(stderr,
          "cprof %s: %s%s: not a size (bytes, or a number with K, M, G or "
          "T)\n",
          cmd, arg ? "--max-size " : MAX_SIZE_ENV "=", arg ? arg : env);
  return -1;
}

static int find_library(char *out, size_t len);

/* The tool does not link the library: `cprof run` execs the program with
 * it preloaded, and the tool's own start-up (every `cprof run` pays it)
 * would run the library's constructor for nothing. The commands that ask
 * the library itself load the one `cprof run` would preload. */
static bool library_function(const char *cmd, const char *name, void **fn) {
  char lib[PATH_MAX];
  if (find_library(lib, sizeof lib) != 0) {
    fprintf(stderr,
            "cprof %s: cannot find libcprof.so next to cprof or in its "
            "install directory\n",
            cmd);
    return false;
  }
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  *fn = h ? dlsym(h, name) : NULL;
  if (!*fn) {
    fprintf(stderr, "cprof %s: %s: %s\n", cmd, lib, dlerror());
    return false;
  }
  return true;
}

static int cmd_version(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs("usage: cprof version\n\nPrints the version of libcprof in use.\n",
          stdout);
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "cprof version: unexpected argument '%s'\n", argv[1]);
    return 2;
  }
  const char *(*version)(void) = NULL;
  if (!library_function("version", "cprof_version", (void **)&version))
    return 1;
  printf("cprof %s\n", version());
  return 0;
}

static int cmd_profiles(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs("usage: cprof profiles\n\nLists the named profiles (Go's names) "
          "with what each one shows.\n",
          stdout);
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "cprof profiles: unexpected argument '%s'\n", argv[1]);
    return 2;
  }
  int (*info_at)(size_t, cprof_profile_info *) = NULL;
  if (!library_function("profiles", "cprof_profile_info_at",
                        (void **)&info_at))
    return 1;
  cprof_profile_info p;
  for (size_t i = 0; info_at(i, &p) == 0; i++) {
    printf("%-14s %s", p.name, p.description ? p.description : "");
    if (p.windowed)
      printf(" (taken over a window: /debug/pprof/%s?seconds=N, or --dump "
             "%s)",
             p.route, p.name);
    putchar('\n');
  }
  return 0;
}

static const char extract_help[] =
    "NAME\n"
    "    cprof extract - turn the profile dumps in a log back into files\n"
    "\n"
    "SYNOPSIS\n"
    "    cprof extract [-o DIR] [-v] [--max-size SIZE] [FILE...]\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads each FILE (standard input when none is given), finds every\n"
    "    PEM block cprof dumped (-----BEGIN PPROF <NAME>----- ... -----END\n"
    "    PPROF <NAME>-----) among any other log lines, and writes each to a\n"
    "    file that go tool pprof opens directly:\n"
    "        <profile>-<pid>-<seq>.pb.gz   for pprof dumps (debug=0)\n"
    "        <profile>-<pid>-<seq>.txt     for text dumps (debug=1, 2)\n"
    "    Blocks whose lines all carry a log prefix (a timestamp, a tag) are\n"
    "    recognised; lines the program logged in between are skipped.\n"
    "    A corrupt or truncated block is reported with the line it starts\n"
    "    on, and extraction carries on with the next one. Two blocks never\n"
    "    get the same file: the second gets the next free <seq>. The log is\n"
    "    read line by line, in bounded memory whatever its size; lines longer\n"
    "    than 64 KiB are cut (a block with one is refused), and a block\n"
    "    larger than the limit, or whose gzip data inflates beyond it, is\n"
    "    refused as a gzip bomb would be.\n"
    "\n"
    "OPTIONS (anywhere before --)\n"
    "    -o DIR            write the files into DIR (created if missing;\n"
    "                      default .)\n"
    "    -v                print each file written\n"
    "    --max-size SIZE   the largest profile accepted, decoded and\n"
    "                      decompressed: bytes, or with K, M, G (powers of\n"
    "                      1024); default $CPROF_MAX_PROFILE_SIZE, else 256M\n"
    "\n"
    "EXIT STATUS\n"
    "    0 when at least one block was extracted and none failed; 1 when a\n"
    "    block was corrupt, truncated or too large, a file could not be\n"
    "    read or written, or no block was found; 2 for a usage error.\n";

/* For each file name stem (<profile>-<pid>.<ext>), where the search for a
 * free sequence number goes on when a block's own number is taken: one
 * past the last number this run took or found taken, and, once the
 * numbers up to LLONG_MAX are used up (a Seq of INT64_MAX taken), from 1
 * up again. A number is tried at most once in each direction, so blocks
 * with the same name cost a try or two each instead of one open per file
 * written before them. */
typedef struct name_slot {
  char *stem; /* NULL for a free slot */
  long long next; /* the upward search resumes here; 0 before any */
  long long low;  /* the last number tried from 1 up */
  bool top;       /* LLONG_MAX is taken: the search is from 1 up */
} name_slot;

typedef struct name_table {
  name_slot *slots;
  size_t cap, n; /* cap is a power of two, at most half full */
} name_table;

static size_t stem_hash(const char *s) {
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)(h ^ h >> 32);
}

/* The slot of stem, added (with next 0) when missing; NULL when out of
 * memory. */
static name_slot *name_slot_for(name_table *t, const char *stem) {
  if (2 * (t->n + 1) > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    name_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return NULL;
    for (size_t i = 0; i < t->cap; i++) {
      if (!t->slots[i].stem) continue;
      size_t j = stem_hash(t->slots[i].stem) & (cap - 1);
      while (slots[j].stem) j = (j + 1) & (cap - 1);
      slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
  }
  size_t j = stem_hash(stem) & (t->cap - 1);
  while (t->slots[j].stem && strcmp(t->slots[j].stem, stem) != 0)
    j = (j + 1) & (t->cap - 1);
  if (!t->slots[j].stem) {
    if (!(t->slots[j].stem = strdup(stem))) return NULL;
    t->n++;
  }
  return &t->slots[j];
}

static void name_table_free(name_table *t) {
  for (size_t i = 0; i < t->cap; i++) free(t->slots[i].stem);
  free(t->slots);
}

typedef struct extract_ctx {
  const char *dir;
  const char *source;
  int verbose;
  int failed;
  size_t written;
  name_table names;
} extract_ctx;

static int write_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Keeps a name usable as part of a file name. */
static void safe_name(char *out, size_t len, const char *in) {
  size_t i;
  for (i = 0; in[i] && i + 1 < len; i++) {
    char c = in[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '-' || c == '_';
    out[i] = ok ? c : '_';
  }
  out[i] = '\0';
  if (i == 0) snprintf(out, len, "profile");
}

/* The number to try after seq (taken) for slot's name: past every number
 * this run took or found taken already, else, when none is left up to
 * LLONG_MAX, the next from 1 up; 0 when even those are used up. */
static long long next_seq(name_slot *slot, long long seq) {
  long long up = seq < LLONG_MAX && seq + 1 > slot->next ? seq + 1 : slot->next;
  if (up > 0 && (up < LLONG_MAX || !slot->top)) return up;
  slot->top = true;
  return slot->low < LLONG_MAX ? ++slot->low : 0;
}

/* Creates <dir>/<name>-<pid>-<seq>.<ext> for a block, never replacing a
 * file: the block's own Seq first (1 without one), then, when that is
 * taken, the next number not yet tried for that name. Returns the file
 * descriptor, or -1 with errno set; path gets the name tried last. */
static int create_output(extract_ctx *x, const pem_block *b, char *path,
                         size_t len) {
  char name[32], stem[96];
  safe_name(name, sizeof name, b->profile);
  const char *ext = b->debug ? "txt" : "pb.gz";
  snprintf(stem, sizeof stem, "%s-%ld.%s", name, b->pid, ext);
  name_slot *slot = name_slot_for(&x->names, stem);
  if (!slot) {
    snprintf(path, len, "%s/%s", x->dir, stem);
    errno = ENOMEM;
    return -1;
  }
  long long seq = b->seq > 0 ? b->seq : 1;
  for (int tries = 0; tries < 100000 && seq > 0; tries++) {
    snprintf(path, len, "%s/%s-%ld-%lld.%s", x->dir, name, b->pid, seq, ext);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return -1;
    if (seq == LLONG_MAX)
      slot->top = true;
    else if (seq >= slot->next)
      slot->next = seq + 1;
    if (fd >= 0) return fd;
    seq = next_seq(slot, seq);
  }
  errno = EEXIST;
  return -1;
}

static void on_block(const pem_block *b, void *arg) {
  extract_ctx *x = arg;
  char path[PATH_MAX];
  int fd = create_output(x, b, path, sizeof path);
  if (fd < 0 || write_all(fd, b->data, b->len) != 0) {
    fprintf(stderr, "cprof extract: %s: %s\n", path, strerror(errno));
    x->failed = 1;
  } else {
    x->written++;
    if (x->verbose)
      printf("%s: line %zu: %s -> %s (%zu bytes)\n", x->source, b->line,
             b->label, path, b->len);
  }
  if (fd >= 0) close(fd);
}

static void on_bad_block(size_t line, const char *label, const char *why,
                         void *arg) {
  extract_ctx *x = arg;
  fprintf(stderr, "cprof extract: %s: line %zu: %s block: %s\n", x->source,
          line, label, why);
  x->failed = 1;
}

/* Options come anywhere before "--", as GNU getopt allows, whatever
 * POSIXLY_CORRECT says: the option strings start with "-", so getopt hands
 * each operand over in order (as option 1), and this adds those after
 * "--". */
static void add_operands(int argc, char **argv, const char **ops, int *n) {
  for (int i = optind; i < argc; i++) ops[(*n)++] = argv[i];
}

static int cmd_extract(int argc, char **argv) {
  extract_ctx x = {".", NULL, 0, 0, 0, {NULL, 0, 0}};
  enum { O_MAX = 1000 };
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'},
      {"max-size", required_argument, NULL, O_MAX},
      {NULL, 0, NULL, 0}};
  static const char use[] =
      "usage: cprof extract [-o DIR] [-v] [--max-size SIZE] [FILE...]\n";
  const char **files = calloc((size_t)argc + 1, sizeof *files);
  const char *max_arg = NULL;
  int nfiles = 0, opt;
  if (!files) return 1;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "-o:vh", longopts, NULL)) != -1) {
    switch (opt) {
      case 1: files[nfiles++] = optarg; break;
      case 'o': x.dir = optarg; break;
      case 'v': x.verbose = 1; break;
      case O_MAX: max_arg = optarg; break;
      case 'h': fputs(extract_help, stdout); free(files); return 0;
      default: fputs(use, stderr); free(files); return 2;
    }
  }
  add_operands(argc, argv, files, &nfiles);
  pem_callbacks cb = {on_block, on_bad_block, &x, 0, 0, limit_hint};
  if (max_size("extract", max_arg, &cb.max_size) != 0) {
    free(files);
    return 2;
  }
  if (mkdir(x.dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "cprof extract: %s: %s\n", x.dir, strerror(errno));
    free(files);
    return 1;
  }
  for (int i = 0; i < (nfiles ? nfiles : 1); i++) {
    const char *name = nfiles ? files[i] : "-";
    FILE *f = strcmp(name, "-") == 0 ? stdin : fopen(name, "rb");
    x.source = strcmp(name, "-") == 0 ? "(stdin)" : name;
    size_t good;
    if (!f || pem_scan_file(f, &cb, &good) != 0) {
      fprintf(stderr, "cprof extract: %s: %s\n", name, strerror(errno));
      x.failed = 1;
    }
    if (f && f != stdin) fclose(f);
  }
  free(files);
  name_table_free(&x.names);
  if (x.written == 0 && !x.failed)
    fputs("cprof extract: no profile blocks found\n", stderr);
  printf("cprof extract: %zu profile%s written to %s\n", x.written,
         x.written == 1 ? "" : "s", x.dir);
  return x.failed || x.written == 0 ? 1 : 0;
}

/* Reads a whole file ("-": standard input) of at most max bytes into
 * memory. Returns 0, -1 with errno set, or PPROFDEC_ETOOBIG. */
static int read_file(const char *name, size_t max, unsigned char **data,
                     size_t *len) {
  FILE *f = strcmp(name, "-") == 0 ? stdin : fopen(name, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  int rc = buf ? 0 : -1;
  while (rc == 0) {
    if (n == cap) {
      if (cap > max) {
        rc = PPROFDEC_ETOOBIG;
        break;
      }
      /* Room for one byte past max, which tells a file of max bytes from
       * a larger one. */
      size_t ncap = cap > max / 2 ? max + 1 : cap * 2;
      unsigned char *b = realloc(buf, ncap);
      if (!b) {
        rc = -1;
        break;
      }
      buf = b;
      cap = ncap;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) {
      if (ferror(f)) rc = -1;
      break;
    }
  }
  if (rc == 0 && n > max) rc = PPROFDEC_ETOOBIG;
  int saved = errno;
  if (f != stdin) fclose(f);
  if (rc != 0) {
    free(buf);
    errno = saved;
    return rc;
  }
  *data = buf;
  *len = n;
  return 0;
}

/* Reads and decodes a pprof file of at most max bytes (decompressed),
 * printing why when it cannot. */
static int load_profile(const char *cmd, const char *name, size_t max,
                        unsigned char **data, size_t *len,
                        pprofdec_profile *p) {
  char err[256];
  /* The file may be a little larger than its content: gzip's framing (the
   * limit itself is checked when decoding). */
  size_t slack = (max >> 6) + 65536;
  size_t max_file = max > SIZE_MAX - 1 - slack ? SIZE_MAX - 1 : max + slack;
  int rc = read_file(name, max_file, data, len);
  if (rc == PPROFDEC_ETOOBIG) {
    pprofdec_format_size(err, sizeof err, max);
    fprintf(stderr,
            "cprof %s: %s: the file is larger than the %s limit allows%s\n",
            cmd, name, err, limit_hint);
    return -1;
  }
  if (rc != 0) {
    fprintf(stderr, "cprof %s: %s: %s\n", cmd, name, strerror(errno));
    return -1;
  }
  rc = pprofdec_decode_max(*data, *len, max, p, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "cprof %s: %s: %s%s\n", cmd, name, err,
            rc == PPROFDEC_ETOOBIG ? limit_hint : "");
    free(*data);
    return -1;
  }
  return 0;
}

static const char view_help[] =
    "NAME\n"
    "    cprof view - write a profile as a standalone HTML flame graph\n"
    "\n"
    "SYNOPSIS\n"
    "    cprof view [-o OUT.html] [--max-size SIZE] FILE\n"
    "\n"
    "DESCRIPTION\n"
    "    Embeds the pprof FILE (gzipped or not, written by cprof, by Go or by\n"
    "    any pprof producer; - for standard input) in the page that\n"
    "    /debug/pprof/ui/ serves, and writes it as one HTML file that needs\n"
    "    nothing else: open it in a browser to get an interactive flame graph\n"
    "    (click to zoom, hover for details, search) and a sortable top table,\n"
    "    with a choice of sample type. The file is checked to be a pprof\n"
    "    profile first. Unless OUT is -, the name of the page written is\n"
    "    printed on standard error.\n"
    "\n"
    "OPTIONS (anywhere before --)\n"
    "    -o OUT            the file to write (- for standard output); the\n"
    "                      default is FILE without .gz and .pb, plus .html,\n"
    "                      in the current directory\n"
    "    --max-size SIZE   the largest profile accepted, decompressed: bytes,\n"
    "                      or with K, M, G (powers of 1024); default\n"
    "                      $CPROF_MAX_PROFILE_SIZE, else 256M\n"
    "\n"
    "EXIT STATUS\n"
    "    0 when the page was written; 1 when FILE cannot be read, is not a\n"
    "    pprof profile or is larger than the limit, or OUT cannot be\n"
    "    written; 2 for a usage error.\n";

static void put_base64(FILE *out, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i += CPROF__BASE64_LINE_BYTES) {
    size_t k = n - i < CPROF__BASE64_LINE_BYTES ? n - i
                                                : CPROF__BASE64_LINE_BYTES;
    char line[4 * CPROF__BASE64_LINE_BYTES / 3 + 1];
    size_t len = cprof__base64(p + i, k, line);
    line[len++] = '\n';
    fwrite(line, 1, len, out);
  }
}

static void put_html_escaped(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '&': fputs("&amp;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&#39;", out); break;
      default: fputc(*s, out);
    }
  }
}

/* Where a marker of the page starts, or NULL. */
static const unsigned char *find_marker(const char *marker) {
  return memmem(cprof_ui_page, CPROF_UI_PAGE_LEN, marker, strlen(marker));
}

static int cmd_view(int argc, char **argv) {
  const char *outname = NULL, *max_arg = NULL, *ops[2];
  enum { O_MAX = 1000 };
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'},
      {"max-size", required_argument, NULL, O_MAX},
      {NULL, 0, NULL, 0}};
  static const char use[] =
      "usage: cprof view [-o OUT.html] [--max-size SIZE] FILE\n";
  int opt, nops = 0;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "-o:h", longopts, NULL)) != -1) {
    switch (opt) {
      case 1:
        if (nops == 2) break;
        ops[nops++] = optarg;
        break;
      case 'o': outname = optarg; break;
      case O_MAX: max_arg = optarg; break;
      case 'h': fputs(view_help, stdout); return 0;
      default: fputs(use, stderr); return 2;
    }
  }
  if (nops + argc - optind != 1) {
    fputs(use, stderr);
    return 2;
  }
  if (nops == 0) ops[nops++] = argv[optind];
  size_t max;
  if (max_size("view", max_arg, &max) != 0) return 2;
  const char *in = ops[0];
  const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
  if (strcmp(in, "-") == 0) base = "stdin";
  char defname[PATH_MAX];
  if (!outname) {
    snprintf(defname, sizeof defname, "%s", base);
    size_t n = strlen(defname);
    if (n > 3 && strcmp(defname + n - 3, ".gz") == 0) defname[n -= 3] = 0;
    if (n > 3 && strcmp(defname + n - 3, ".pb") == 0) defname[n -= 3] = 0;
    if (n + 6 > sizeof defname) return 1;
    strcat(defname, ".html");
    outname = defname;
  }
  unsigned char *data;
  size_t len;
  pprofdec_profile prof;
  if (load_profile("view", in, max, &data, &len, &prof) != 0) return 1;
  pprofdec_free(&prof);

  const unsigned char *name_at = find_marker("@@PROFILE_NAME@@");
  const unsigned char *data_at = find_marker("@@PROFILE_DATA@@");
  if (!name_at || !data_at || data_at < name_at) {
    fputs("cprof view: the embedded page has no profile markers\n", stderr);
    free(data);
    return 1;
  }
  FILE *out = strcmp(outname, "-") == 0 ? stdout : fopen(outname, "w");
  if (!out) {
    fprintf(stderr, "cprof view: %s: %s\n", outname, strerror(errno));
    free(data);
    return 1;
  }
  const unsigned char *page = cprof_ui_page, *end = page + CPROF_UI_PAGE_LEN;
  fwrite(page, 1, (size_t)(name_at - page), out);
  put_html_escaped(out, base);
  name_at += strlen("@@PROFILE_NAME@@");
  fwrite(name_at, 1, (size_t)(data_at - name_at), out);
  put_base64(out, data, len);
  data_at += strlen("@@PROFILE_DATA@@");
  fwrite(data_at, 1, (size_t)(end - data_at), out);
  free(data);
  int bad = ferror(out);
  if (out != stdout ? fclose(out) != 0 : fflush(out) != 0) bad = 1;
  if (bad) {
    fprintf(stderr, "cprof view: %s: %s\n", outname, strerror(errno));
    return 1;
  }
  if (out != stdout) fprintf(stderr, "cprof view: wrote %s\n", outname);
  return 0;
}

static const char top_help[] =
    "NAME\n"
    "    cprof top - print a profile's top functions, like go tool pprof -top\n"
    "\n"
    "SYNOPSIS\n"
    "    cprof top [-n N] [-cum] [-sample_index TYPE] [-unit UNIT]\n"
    "              [-nodefraction F] [-max-size SIZE] FILE\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads the pprof FILE (gzipped or not; - for standard input) and\n"
    "    prints go tool pprof -top's table, with its numbers: flat is the\n"
    "    value of the samples whose innermost frame is the function, cum the\n"
    "    value of the samples with the function anywhere on their stack\n"
    "    (once per sample), rows sorted by flat. Frames are merged by\n"
    "    function name, inlined frames included. Unlike pprof, cprof top\n"
    "    ignores the profile's drop_frames and keep_frames, and has no\n"
    "    filters (focus, ignore, show, hide) and no other granularity\n"
    "    (-lines, -files, -addresses): for those, it names the go tool\n"
    "    pprof command that has them.\n"
    "\n"
    "OPTIONS (anywhere before --; one dash or two)\n"
    "    -n N, -nodecount N\n"
    "                      print at most N rows (default: all)\n"
    "    -cum              sort by cum (then name, then flat), as pprof -cum\n"
    "    -flat             sort by flat (the default)\n"
    "    -sample_index T   the sample type, by name (e.g. alloc_space) or\n"
    "                      index; default: the profile's default_sample_type,\n"
    "                      else the last type, as pprof chooses\n"
    "    -unit U           print values in U (e.g. ns, ms, B, MB); default\n"
    "                      minimum, pprof's: one unit chosen for the table\n"
    "    -nodefraction F   leave out functions whose cum is below F of the\n"
    "                      total (default 0.005, as pprof)\n"
    "    -max-size SIZE    the largest profile accepted, decompressed: bytes,\n"
    "                      or with K, M, G (powers of 1024); default\n"
    "                      $CPROF_MAX_PROFILE_SIZE, else 256M\n"
    "\n"
    "EXIT STATUS\n"
    "    0 on success; 1 when FILE cannot be read, is not a pprof profile or\n"
    "    is larger than the limit; 2 for a usage error.\n";

/* Go's time layout "Jan 2, 2006 at 3:04pm (MST)", in local time. */
static void go_time(char *out, size_t len, int64_t ns) {
  time_t t = (time_t)(ns / 1000000000);
  struct tm tm;
  if (!localtime_r(&t, &tm)) {
    snprintf(out, len, "?");
    return;
  }
  static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  int h = tm.tm_hour % 12;
  snprintf(out, len, "%s %d, %d at %d:%02d%s (%s)", mon[tm.tm_mon % 12],
           tm.tm_mday, tm.tm_year + 1900, h ? h : 12, tm.tm_min,
           tm.tm_hour < 12 ? "am" : "pm", tm.tm_zone ? tm.tm_zone : "");
}

/* pprof's measurement.Percentage. */
static void go_pct(char *out, size_t len, int64_t v, int64_t total) {
  double r = total ? (double)v / (double)total * 100 : 0;
  if (r < 0) r = -r;
  if (r >= 99.95 && r <= 100.05)
    snprintf(out, len, "  100%%");
  else if (r >= 1.0)
    snprintf(out, len, "%5.2f%%", r);
  else
    snprintf(out, len, "%5.2g%%", r);
}

/* pprof -cum's order (its CumNameOrder): |cum| descending, then name,
 * then |flat| descending. */
static int cum_order(const void *a, const void *b) {
  const pprofdec_row *l = a, *r = b;
  int64_t lc = l->cum < 0 ? -l->cum : l->cum, rc = r->cum < 0 ? -r->cum : r->cum;
  if (lc != rc) return lc > rc ? -1 : 1;
  int c = strcmp(l->name, r->name);
  if (c) return c;
  int64_t lf = l->flat < 0 ? -l->flat : l->flat;
  int64_t rf = r->flat < 0 ? -r->flat : r->flat;
  return lf == rf ? 0 : lf > rf ? -1 : 1;
}

/* An option cprof top does not have: one of go tool pprof's gets the
 * pprof command that has it. */
static void top_unknown_option(const char *arg) {
  static const char *const pprof_only[] = {
      "lines", "files", "addresses", "functions", "focus", "ignore",
      "show", "hide", "tagfocus", "tagignore", "tagshow", "taghide",
      "show_from", "http", "web", "output", "o", "call_tree", "trim",
      "compact_labels", "seconds", "symbolize", "edgefraction",
      "noinlines", "relative_percentages", "list", "peek",
      "disasm", "weblist", "traces", "raw", "tree", "text", "top",
      "diff_base", "base", "normalize", "filefunctions", "mean"};
  const char *name = arg;
  while (*name == '-') name++;
  size_t len = strcspn(name, "=");
  for (size_t i = 0; i < sizeof pprof_only / sizeof pprof_only[0]; i++) {
    if (strlen(pprof_only[i]) == len && strncmp(name, pprof_only[i], len) == 0) {
      fprintf(stderr,
              "cprof top: %s is go tool pprof's and not cprof top's: run "
              "go tool pprof -top %s FILE\n",
              arg, arg);
      return;
    }
  }
  fprintf(stderr, "cprof top: unknown option %s\n", arg);
}

static int cmd_top(int argc, char **argv) {
  enum { O_N = 1000, O_INDEX, O_UNIT, O_FRACTION, O_MAX, O_CUM, O_FLAT };
  static const struct option longopts[] = {
      {"n", required_argument, NULL, O_N},
      {"nodecount", required_argument, NULL, O_N},
      {"cum", no_argument, NULL, O_CUM},
      {"flat", no_argument, NULL, O_FLAT},
      {"max-size", required_argument, NULL, O_MAX},
      {"sample_index", required_argument, NULL, O_INDEX},
      {"unit", required_argument, NULL, O_UNIT},
      {"nodefraction", required_argument, NULL, O_FRACTION},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static const char use[] =
      "usage: cprof top [-n N] [-cum] [-sample_index TYPE] [-unit UNIT] "
      "[-nodefraction F] [-max-size SIZE] FILE\n";
  bool by_cum = false;
  long maxrows = 0;
  const char *index = NULL, *unit = "minimum", *max_arg = NULL, *ops[2];
  double fraction = 0.005;
  int opt, nops = 0;
  char *end;
  optind = 1;
  opterr = 0;
  /* No short options: -help is the long one, and an option such as
   * -http=:8080 is never read as -h. */
  while ((opt = getopt_long_only(argc, argv, "-:", longopts, NULL)) != -1) {
    switch (opt) {
      case 1:
        if (nops == 2) break;
        ops[nops++] = optarg;
        break;
      case O_CUM: by_cum = true; break;
      case O_FLAT: by_cum = false; break;
      case O_N:
        maxrows = strtol(optarg, &end, 10);
        if (*end || maxrows < 0) {
          fprintf(stderr, "cprof top: -n %s: not a count\n", optarg);
          return 2;
        }
        break;
      case O_INDEX: index = optarg; break;
      case O_UNIT: unit = optarg; break;
      case O_FRACTION:
        fraction = strtod(optarg, &end);
        if (*end || !(fraction >= 0 && fraction <= 1)) {
          fprintf(stderr, "cprof top: -nodefraction %s: not in [0, 1]\n",
                  optarg);
          return 2;
        }
        break;
      case O_MAX: max_arg = optarg; break;
      case 'h': fputs(top_help, stdout); return 0;
      case ':':
        fprintf(stderr, "cprof top: %s needs a value\n", argv[optind - 1]);
        return 2;
      default:
        top_unknown_option(argv[optind - 1]);
        fputs(use, stderr);
        return 2;
    }
  }
  if (nops + argc - optind != 1) {
    fputs(use, stderr);
    return 2;
  }
  if (nops == 0) ops[nops++] = argv[optind];
  size_t max;
  if (max_size("top", max_arg, &max) != 0) return 2;
  const char *in = ops[0];
  unsigned char *data;
  size_t len;
  pprofdec_profile p;
  if (load_profile("top", in, max, &data, &len, &p) != 0) return 1;
  free(data);
  size_t vi = pprofdec_default_index(&p);
  if (index) {
    long i = pprofdec_find_index(&p, index);
    if (i < 0) {
      fprintf(stderr, "cprof top: %s: no sample type '%s' (it has:", in, index);
      for (size_t k = 0; k < p.nsample_types; k++)
        fprintf(stderr, " %s", p.sample_types[k].type);
      fputs(")\n", stderr);
      pprofdec_free(&p);
      return 1;
    }
    vi = (size_t)i;
  }
  pprofdec_top t;
  char err[256];
  if (pprofdec_compute_top(&p, vi, &t, err, sizeof err) != 0) {
    fprintf(stderr, "cprof top: %s: %s\n", in, err);
    pprofdec_free(&p);
    return 1;
  }
  if (by_cum) qsort(t.rows, t.nrows, sizeof *t.rows, cum_order);
  const char *sunit = p.sample_types[vi].unit;
  /* pprof's node cutoff: rows whose |cum| is below it are left out. */
  int64_t cutoff = (int64_t)((double)t.total * fraction);
  if (cutoff < 0) cutoff = -cutoff;
  size_t kept = 0;
  for (size_t i = 0; i < t.nrows; i++) {
    int64_t c = t.rows[i].cum < 0 ? -t.rows[i].cum : t.rows[i].cum;
    if (cutoff > 0 && c < cutoff) {
      free(t.rows[i].name);
      continue;
    }
    t.rows[kept++] = t.rows[i];
  }
  size_t dropped = t.nrows - kept;
  t.nrows = kept;
  size_t shown = maxrows > 0 && (size_t)maxrows < kept ? (size_t)maxrows : kept;
  /* The (inline) labels come from the graph of the shown functions alone,
   * which pprof rebuilds from the samples after its cuts, without the edges
   * below its edge cutoff (-edgefraction, 0.001 of the total by default). */
  int64_t edge_cutoff = (int64_t)((double)t.total * 0.001);
  if (edge_cutoff < 0) edge_cutoff = -edge_cutoff;
  if (pprofdec_top_calls(&p, vi, &t, shown, edge_cutoff, err, sizeof err) !=
      0) {
    fprintf(stderr, "cprof top: %s: %s\n", in, err);
    pprofdec_top_free(&t);
    pprofdec_free(&p);
    return 1;
  }
  char outunit[16];
  if (strcmp(unit, "minimum") == 0)
    pprofdec_select_unit(outunit, sizeof outunit, &t, shown, sunit);
  else
    snprintf(outunit, sizeof outunit, "%s", unit);

  char a[64], b[64], c[64], d[64];
  if (p.main_file[0]) {
    const char *slash = strrchr(p.main_file, '/');
    printf("File: %s\n", slash && slash[1] ? slash + 1 : p.main_file);
  }
  if (p.main_build_id[0]) printf("Build ID: %s\n", p.main_build_id);
  for (size_t i = 0; i < p.ncomments; i++)
    if (p.comments[i][0] != '#') printf("%s\n", p.comments[i]);
  printf("Type: %s\n", p.sample_types[vi].type);
  if (p.time_nanos) {
    go_time(a, sizeof a, p.time_nanos);
    printf("Time: %s\n", a);
  }
  if (p.duration_nanos) {
    pprofdec_format(a, sizeof a, p.duration_nanos, "nanoseconds", "auto");
    pprofdec_format(b, sizeof b, t.total, sunit, outunit);
    const char *u = "";
    pprofdec_format(c, sizeof c, 1, sunit, "ns");
    u = strcmp(c, "1ns") == 0 ? "ns" : "";
    d[0] = 0;
    if (*u && t.total) {
      char pc[32];
      go_pct(pc, sizeof pc, t.total, p.duration_nanos);
      snprintf(d, sizeof d, "(%s)", pc);
    }
    printf("Duration: %s, Total samples = %s %s\n", a, b, d);
  }
  int64_t flatsum = 0;
  for (size_t i = 0; i < shown; i++) flatsum += t.rows[i].flat;
  pprofdec_format(a, sizeof a, flatsum, sunit, outunit);
  go_pct(b, sizeof b, flatsum, t.total);
  pprofdec_format(c, sizeof c, t.total, sunit, outunit);
  printf("Showing nodes accounting for %s, %s of %s total\n", a,
         b + strspn(b, " "), c);
  if (t.total && dropped) {
    pprofdec_format(a, sizeof a, cutoff, sunit, outunit);
    printf("Dropped %zu node%s (cum <= %s)\n", dropped, dropped > 1 ? "s" : "",
           a);
  }
  if (t.total && shown && shown < kept)
    printf("Showing top %zu nodes out of %zu\n", shown, kept);
  printf("%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum", "cum");
  int64_t sum = 0;
  for (size_t i = 0; i < shown; i++) {
    const pprofdec_row *r = &t.rows[i];
    sum += r->flat;
    char fp[32], sp[32], cp[32];
    pprofdec_format(a, sizeof a, r->flat, sunit, outunit);
    pprofdec_format(c, sizeof c, r->cum, sunit, outunit);
    go_pct(fp, sizeof fp, r->flat, t.total);
    go_pct(sp, sizeof sp, sum, t.total);
    go_pct(cp, sizeof cp, r->cum, t.total);
    const char *inl = !(r->calls & PPROFDEC_INLINED) ? ""
                      : r->calls & PPROFDEC_CALLED   ? " (partial-inline)"
                                                     : " (inline)";
    printf("%10s %s %s %10s %s  %s%s\n", a, fp, sp, c, cp, r->name, inl);
  }
  pprofdec_top_free(&t);
  pprofdec_free(&p);
  return fflush(stdout) == 0 ? 0 : 1;
}

static const char run_help[] =
    "NAME\n"
    "    cprof run - profile an unmodified program\n"
    "\n"
    "SYNOPSIS\n"
    "    cprof run [--http ADDR] [--token TOKEN] [--dump SPEC] [--dump-out FILE]\n"
    "              [--dump-signals LIST]\n"
    "              [--heap-rate N] [--cpu-hz N] [--mutex-fraction N]\n"
    "              [--block-rate NS] [--unwind MODE] [--follow-exec]\n"
    "              -- PROG [ARGS...]\n"
    "\n"
    "DESCRIPTION\n"
    "    Runs PROG with libcprof preloaded (LD_PRELOAD, added in front of any\n"
    "    preload already set) and cprof configured through its environment\n"
    "    variables. PROG replaces cprof (exec), so its exit status, or the\n"
    "    signal that ended it, is what the caller sees. The library is looked\n"
    "    for next to the cprof binary, then in the library directory beside\n"
    "    it (../lib where it is installed), then in the directory it was\n"
    "    configured to be installed to.\n"
    "\n"
    "    Programs PROG execs run unprofiled: the library takes its variables\n"
    "    and its LD_PRELOAD entry out of PROG's environment once it has read\n"
    "    them. An exec that keeps the pid (a wrapper script's exec \"$@\")\n"
    "    is still PROG and stays profiled. Children PROG forks without exec\n"
    "    are profiled, and their dumps carry their own pid.\n"
    "\n"
    "OPTIONS (before PROG)\n"
    "    Options end at -- or at the first argument that is not one, which\n"
    "    is PROG: everything after it is PROG's, options included.\n"
    "\n"
    "    --http ADDR          serve /debug/pprof/ on ADDR (CPROF_HTTP), e.g.\n"
    "                         127.0.0.1:6060 or unix:/run/app.sock\n"
    "    --token TOKEN        the endpoint answers only requests that carry\n"
    "                         TOKEN (CPROF_HTTP_TOKEN): Authorization: Bearer\n"
    "                         TOKEN, or as the password of HTTP Basic\n"
    "                         credentials, as go tool pprof sends\n"
    "                         http://pprof:TOKEN@host/... (the value is seen\n"
    "                         by other users in ps; the variable is not)\n"
    "    --dump SPEC          dump profiles on SIGTERM, SIGINT, SIGUSR1 and at\n"
    "                         exit (CPROF_DUMP), e.g. cpu,heap=debug=1\n"
    "    --dump-out FILE      append dumps to FILE instead of stderr\n"
    "                         (CPROF_DUMP_OUT)\n"
    "    --dump-signals LIST  the signals that dump (CPROF_DUMP_SIGNALS): none,\n"
    "                         or a list of TERM, INT, HUP (final dump), USR1,\n"
    "                         USR2, RTMIN+N (dump and go on); default\n"
    "                         TERM,INT,USR1\n"
    "    --heap-rate N        heap sampling rate in bytes (CPROF_HEAP_RATE);\n"
    "                         without it, dumps that name no heap profile\n"
    "                         (heap, allocs, heap_peak) and no --http turn\n"
    "                         heap sampling off\n"
    "    --cpu-hz N           CPU sampling rate (CPROF_CPU_HZ)\n"
    "    --mutex-fraction N   mutex profile fraction (CPROF_MUTEX_FRACTION)\n"
    "    --block-rate NS      block profile rate in ns (CPROF_BLOCK_RATE)\n"
    "    --unwind MODE        how stacks are walked (CPROF_UNWIND): auto (CFI\n"
    "                         where there is any, frame pointers elsewhere;\n"
    "                         the default), fp or cfi\n"
    "    --follow-exec        profile the programs PROG execs too, each with\n"
    "                         dumps marked with its pid (CPROF_FOLLOW_EXEC=1);\n"
    "                         --http goes to them only when ADDR has a %p,\n"
    "                         which each process reads as its pid\n"
    "\n"
    "DEFAULT OUTPUT\n"
    "    With no output named (no --http, --dump or --dump-out, and none of\n"
    "    CPROF_HTTP, CPROF_DUMP, CPROF_PUSH_URL set), PROG runs with\n"
    "    --dump cpu,heap into ./cprof-PID.log, PID being PROG's, as perf\n"
    "    record writes perf.data: cprof run then starts PROG as its child,\n"
    "    passes SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 on to it, waits for it,\n"
    "    and prints one line on stderr naming the log and the command that\n"
    "    opens its CPU profile. --dump-out without --dump dumps nothing,\n"
    "    and says so.\n"
    "\n"
    "EXIT STATUS\n"
    "    PROG's own (a PROG killed by a signal kills cprof run with it);\n"
    "    126 when PROG is not executable, 127 when it is not found, 2 for a\n"
    "    usage error.\n";

/* The directory this executable is in. */
static int self_dir(char *out, size_t len) {
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  if (n <= 0) return -1;
  out[n] = '\0';
  char *slash = strrchr(out, '/');
  if (!slash) return -1;
  *slash = '\0';
  return 0;
}

static int find_library(char *out, size_t len) {
  char dir[PATH_MAX];
  if (self_dir(dir, sizeof dir) == 0) {
    /* The build tree keeps the library next to cprof; an installation
     * keeps it in the library directory, wherever the prefix is. */
    const char *rel[] = {"/libcprof.so", "/" CPROF_REL_LIBDIR "/libcprof.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
      if (snprintf(out, len, "%s%s", dir, rel[i]) >= (int)len) continue;
      if (access(out, R_OK) == 0) {
        char real[PATH_MAX];
        if (realpath(out, real) && strlen(real) < len) strcpy(out, real);
        return 0;
      }
    }
  }
#ifdef CPROF_INSTALL_LIBDIR
  snprintf(out, len, "%s/libcprof.so", CPROF_INSTALL_LIBDIR);
  if (access(out, R_OK) == 0) return 0;
#endif
  return -1;
}

/* The library leaves the environment of the process it is in as it is
 * when the process defines this (cprof.h): this tool reads CPROF_*
 * variables of its own and sets those `cprof run` passes on (it is
 * exported for the library `cprof version` and `cprof profiles` load). */
CPROF_EXPORT const int cprof_keep_environment = 1;

static bool getenv_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

/* Runs PROG in this process's place; when it cannot, says why and
 * returns the shell's status for it: 126 not executable, 127 not found. */
static int exec_prog(char **prog) {
  execvp(prog[0], prog);
  int err = errno;
  fprintf(stderr, "cprof run: %s: %s\n", prog[0], strerror(err));
  return err == EACCES ? 126 : 127;
}

/* The child cprof run waits for in its default output mode, for the
 * signals it passes on. */
static volatile sig_atomic_t run_child;

static void pass_on(int sig) {
  if (run_child > 0) kill((pid_t)run_child, sig);
}

/* `cprof run` with no output named: PROG, as a child, dumps cpu and heap
 * into ./cprof-PID.log at exit; then one line says where they are and
 * how to open them, and PROG's status is passed on. */
static int run_default(char **prog) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) {
    fprintf(stderr, "cprof run: the current directory: %s\n", strerror(errno));
    return 127;
  }
  /* The terminal's signals reach PROG through the process group; others
   * sent to cprof run are passed on. */
  struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = pass_on};
  sigemptyset(&ign.sa_mask);
  sigemptyset(&fwd.sa_mask);
  fwd.sa_flags = SA_RESTART;
  struct sigaction old_int, old_quit, old_chld;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  /* An ignored SIGCHLD (inherited from the caller) would reap PROG before
   * its status could be read; PROG itself gets what was inherited. */
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, &old_chld);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "cprof run: fork: %s\n", strerror(errno));
    return 127;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
    char out[PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/cprof-%ld.log", cwd, (long)getpid());
    setenv("CPROF_DUMP", "cpu,heap", 1);
    setenv("CPROF_DUMP_OUT", out, 1);
    _exit(exec_prog(prog));
  }
  run_child = pid;
  static const int passed[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++)
    sigaction(passed[i], &fwd, NULL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  char log[64];
  snprintf(log, sizeof log, "cprof-%ld.log", (long)pid);
  struct stat st;
  bool ran = !(WIFEXITED(status) &&
               (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127) &&
               stat(log, &st) != 0);
  if (ran) {
    if (stat(log, &st) == 0 && st.st_size > 0)
      fprintf(stderr,
              "cprof run: profiles of pid %ld are in %s; open them with: "
              "cprof extract -o cprof-%ld %s && go tool pprof -top "
              "cprof-%ld/cpu-%ld-*.pb.gz\n",
              (long)pid, log, (long)pid, log, (long)pid, (long)pid);
    else
      fprintf(stderr,
              "cprof run: %s ended before it could dump its profiles "
              "(nothing in %s)\n",
              prog[0], log);
  }
  if (WIFSIGNALED(status)) {
    /* Dies of PROG's signal, without a core of its own (PROG's is
     * PROG's business). */
    int sig = WTERMSIG(status);
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int cmd_run(int argc, char **argv) {
  enum {
    O_HTTP = 1,
    O_DUMP,
    O_DUMP_OUT,
    O_DUMP_SIGNALS,
    O_HEAP,
    O_CPU,
    O_MUTEX,
    O_BLOCK,
    O_UNWIND,
    O_TOKEN,
    O_FOLLOW_EXEC
  };
  static const struct option longopts[] = {
      {"http", required_argument, NULL, O_HTTP},
      {"dump", required_argument, NULL, O_DUMP},
      {"dump-out", required_argument, NULL, O_DUMP_OUT},
      {"dump-signals", required_argument, NULL, O_DUMP_SIGNALS},
      {"heap-rate", required_argument, NULL, O_HEAP},
      {"cpu-hz", required_argument, NULL, O_CPU},
      {"mutex-fraction", required_argument, NULL, O_MUTEX},
      {"block-rate", required_argument, NULL, O_BLOCK},
      {"unwind", required_argument, NULL, O_UNWIND},
      {"token", required_argument, NULL, O_TOKEN},
      {"follow-exec", no_argument, NULL, O_FOLLOW_EXEC},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static const char *const env_of[] = {
      [O_HTTP] = "CPROF_HTTP",           [O_DUMP] = "CPROF_DUMP",
      [O_DUMP_OUT] = "CPROF_DUMP_OUT",   [O_DUMP_SIGNALS] = "CPROF_DUMP_SIGNALS",
      [O_HEAP] = "CPROF_HEAP_RATE",
      [O_CPU] = "CPROF_CPU_HZ",          [O_MUTEX] = "CPROF_MUTEX_FRACTION",
      [O_BLOCK] = "CPROF_BLOCK_RATE",    [O_UNWIND] = "CPROF_UNWIND",
      [O_TOKEN] = "CPROF_HTTP_TOKEN",    [O_FOLLOW_EXEC] = "CPROF_FOLLOW_EXEC"};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
    if (opt == 'h') {
      fputs(run_help, stdout);
      return 0;
    }
    if (opt == O_FOLLOW_EXEC) {
      setenv(env_of[opt], "1", 1);
      continue;
    }
    if (opt < O_HTTP || opt > O_TOKEN) {
      fputs("usage: cprof run [OPTIONS] -- PROG [ARGS...]\n", stderr);
      return 2;
    }
    /* The library checks each value when it loads and says what is wrong
     * with it; here only emptiness is refused, since an empty variable
     * means "unset" there. */
    /* No value starts with "--": `--http -- PROG` lacks the address. */
    if (!*optarg || strncmp(optarg, "--", 2) == 0) {
      fprintf(stderr, "cprof run: --%s needs a value\n", longopts[opt - 1].name);
      return 2;
    }
    setenv(env_of[opt], optarg, 1);
  }
  if (optind >= argc) {
    fputs("cprof run: no program given (cprof run [OPTIONS] -- PROG [ARGS...])\n",
          stderr);
    return 2;
  }
  const bool named_dump = getenv_set("CPROF_DUMP");
  if (!named_dump && getenv_set("CPROF_DUMP_OUT"))
    fputs("cprof run: --dump-out names a file but no profile is dumped into "
          "it: add --dump SPEC (e.g. --dump cpu,heap)\n",
          stderr);
  const bool default_output = !named_dump && !getenv_set("CPROF_DUMP_OUT") &&
                              !getenv_set("CPROF_HTTP") &&
                              !getenv_set("CPROF_PUSH_URL");
  char lib[PATH_MAX];
  if (find_library(lib, sizeof lib) != 0) {
    fputs("cprof run: cannot find libcprof.so next to cprof or in its install "
          "directory\n",
          stderr);
    return 127;
  }
  /* cprof goes first, so its interposers see the program's calls before
   * another preloaded allocator does; only a sanitizer runtime, which must
   * be the very first library, stays ahead of it. */
  const char *old = getenv("LD_PRELOAD");
  char preload[2 * PATH_MAX];
  if (old && *old && (strstr(old, "libasan") || strstr(old, "libtsan")))
    snprintf(preload, sizeof preload, "%s:%s", old, lib);
  else if (old && *old)
    snprintf(preload, sizeof preload, "%s:%s", lib, old);
  else
    snprintf(preload, sizeof preload, "%s", lib);
  setenv("LD_PRELOAD", preload, 1);
  if (default_output) return run_default(argv + optind);
  return exec_prog(argv + optind);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  /* Each command sees itself as "cprof CMD" in its argv[0], so that
   * getopt's messages carry the prefix every other error has. */
  char self[32];
  snprintf(self, sizeof self, "cprof %s", cmd + strspn(cmd, "-"));
  argv[1] = self;
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
    return cmd_version(argc - 1, argv + 1);
  if (strcmp(cmd, "profiles") == 0) return cmd_profiles(argc - 1, argv + 1);
  if (strcmp(cmd, "extract") == 0) return cmd_extract(argc - 1, argv + 1);
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(cmd, "view") == 0) return cmd_view(argc - 1, argv + 1);
  if (strcmp(cmd, "top") == 0) return cmd_top(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
      strcmp(cmd, "-h") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  fprintf(stderr, "cprof: unknown command '%s'\n\n%s", cmd, usage);
  return 2;
}
