/*
 * The cprof command-line tool. Like curl's src/, it uses only the public
 * API in cprof.h. Each subcommand is one function with its own --help.
 */
#include <cprof.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pem.h"

static const char usage[] =
    "usage: cprof <command> [arguments]\n"
    "\n"
    "Profiling for C and C++ programs, in pprof's format.\n"
    "\n"
    "commands:\n"
    "  run        run a program with cprof preloaded (profile an unmodified binary)\n"
    "  extract    turn the PEM dumps in a log back into profile files\n"
    "  profiles   list the profiles cprof can write, with descriptions\n"
    "  version    print the library version\n"
    "  help       print this text\n"
    "\n"
    "Run `cprof <command> --help` for a command's options.\n";

static int wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
  return 0;
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
  printf("cprof %s\n", cprof_version());
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
  for (size_t i = 0; i < cprof_profile_count(); i++)
    printf("%-14s %s\n", cprof_profile_name(i), cprof_profile_description(i));
  return 0;
}

static const char extract_help[] =
    "NAME\n"
    "    cprof extract - turn the profile dumps in a log back into files\n"
    "\n"
    "SYNOPSIS\n"
    "    cprof extract [-o DIR] [-v] [FILE...]\n"
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
    "    on, and extraction carries on with the next one.\n"
    "\n"
    "OPTIONS\n"
    "    -o DIR   write the files into DIR (created if missing; default .)\n"
    "    -v       print each file written\n"
    "\n"
    "EXIT STATUS\n"
    "    0 when at least one block was extracted and none failed; 1 when a\n"
    "    block was corrupt or truncated, a file could not be written, or no\n"
    "    block was found; 2 for a usage error.\n";

typedef struct extract_ctx {
  const char *dir;
  const char *source;
  int verbose;
  int failed;
  size_t written;
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

static void on_block(const pem_block *b, void *arg) {
  extract_ctx *x = arg;
  char name[32], path[PATH_MAX];
  safe_name(name, sizeof name, b->profile);
  const char *ext = b->debug ? "txt" : "pb.gz";
  /* Without a Seq header, or when a file of that name was written in this
   * run already, count up so no block overwrites another. */
  long long seq = b->seq > 0 ? b->seq : 1;
  int fd = -1;
  for (int tries = 0; tries < 100000; tries++, seq++) {
    snprintf(path, sizeof path, "%s/%s-%ld-%lld.%s", x->dir, name, b->pid, seq,
             ext);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) break;
  }
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

static int read_whole(FILE *f, char **out, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) return -1;
  for (;;) {
    if (n == cap) {
      char *b = realloc(buf, cap *= 2);
      if (!b) {
        free(buf);
        return -1;
      }
      buf = b;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  if (ferror(f)) {
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

static int cmd_extract(int argc, char **argv) {
  extract_ctx x = {".", NULL, 0, 0, 0};
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "+o:vh", longopts, NULL)) != -1) {
    switch (opt) {
      case 'o': x.dir = optarg; break;
      case 'v': x.verbose = 1; break;
      case 'h': fputs(extract_help, stdout); return 0;
      default: fputs("usage: cprof extract [-o DIR] [-v] [FILE...]\n", stderr); return 2;
    }
  }
  if (mkdir(x.dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "cprof extract: %s: %s\n", x.dir, strerror(errno));
    return 1;
  }
  pem_callbacks cb = {on_block, on_bad_block, &x};
  int nfiles = argc - optind;
  for (int i = 0; i < (nfiles ? nfiles : 1); i++) {
    const char *name = nfiles ? argv[optind + i] : "-";
    FILE *f = strcmp(name, "-") == 0 ? stdin : fopen(name, "rb");
    x.source = strcmp(name, "-") == 0 ? "(stdin)" : name;
    char *text;
    size_t len;
    if (!f || read_whole(f, &text, &len) != 0) {
      fprintf(stderr, "cprof extract: %s: %s\n", name, strerror(errno));
      x.failed = 1;
      if (f && f != stdin) fclose(f);
      continue;
    }
    if (f != stdin) fclose(f);
    pem_scan(text, len, &cb);
    free(text);
  }
  if (x.written == 0 && !x.failed)
    fputs("cprof extract: no profile blocks found\n", stderr);
  printf("cprof extract: %zu profile%s written to %s\n", x.written,
         x.written == 1 ? "" : "s", x.dir);
  return x.failed || x.written == 0 ? 1 : 0;
}

static const char run_help[] =
    "NAME\n"
    "    cprof run - profile an unmodified program\n"
    "\n"
    "SYNOPSIS\n"
    "    cprof run [--http ADDR] [--dump SPEC] [--dump-out FILE]\n"
    "              [--heap-rate N] [--cpu-hz N] [--mutex-fraction N]\n"
    "              [--block-rate NS] -- PROG [ARGS...]\n"
    "\n"
    "DESCRIPTION\n"
    "    Runs PROG with libcprof preloaded (LD_PRELOAD, added in front of any\n"
    "    preload already set) and cprof configured through its environment\n"
    "    variables. PROG replaces cprof (exec), so its exit status, or the\n"
    "    signal that ended it, is what the caller sees. The library is looked\n"
    "    for next to the cprof binary, then in ../lib below it, then in the\n"
    "    directory it was installed to.\n"
    "\n"
    "OPTIONS\n"
    "    --http ADDR          serve /debug/pprof/ on ADDR (CPROF_HTTP), e.g.\n"
    "                         127.0.0.1:6060 or unix:/run/app.sock\n"
    "    --dump SPEC          dump profiles on SIGTERM, SIGINT, SIGUSR1 and at\n"
    "                         exit (CPROF_DUMP), e.g. cpu,heap=debug=1\n"
    "    --dump-out FILE      append dumps to FILE instead of stderr\n"
    "                         (CPROF_DUMP_OUT)\n"
    "    --heap-rate N        heap sampling rate in bytes (CPROF_HEAP_RATE)\n"
    "    --cpu-hz N           CPU sampling rate (CPROF_CPU_HZ)\n"
    "    --mutex-fraction N   mutex profile fraction (CPROF_MUTEX_FRACTION)\n"
    "    --block-rate NS      block profile rate in ns (CPROF_BLOCK_RATE)\n"
    "\n"
    "EXIT STATUS\n"
    "    PROG's own; 127 when PROG cannot be run, 2 for a usage error.\n";

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
    const char *rel[] = {"/libcprof.so", "/../lib/libcprof.so"};
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

static int cmd_run(int argc, char **argv) {
  enum { O_HTTP = 1, O_DUMP, O_DUMP_OUT, O_HEAP, O_CPU, O_MUTEX, O_BLOCK };
  static const struct option longopts[] = {
      {"http", required_argument, NULL, O_HTTP},
      {"dump", required_argument, NULL, O_DUMP},
      {"dump-out", required_argument, NULL, O_DUMP_OUT},
      {"heap-rate", required_argument, NULL, O_HEAP},
      {"cpu-hz", required_argument, NULL, O_CPU},
      {"mutex-fraction", required_argument, NULL, O_MUTEX},
      {"block-rate", required_argument, NULL, O_BLOCK},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static const char *const env_of[] = {
      [O_HTTP] = "CPROF_HTTP",           [O_DUMP] = "CPROF_DUMP",
      [O_DUMP_OUT] = "CPROF_DUMP_OUT",   [O_HEAP] = "CPROF_HEAP_RATE",
      [O_CPU] = "CPROF_CPU_HZ",          [O_MUTEX] = "CPROF_MUTEX_FRACTION",
      [O_BLOCK] = "CPROF_BLOCK_RATE"};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
    if (opt == 'h') {
      fputs(run_help, stdout);
      return 0;
    }
    if (opt < O_HTTP || opt > O_BLOCK) {
      fputs("usage: cprof run [OPTIONS] -- PROG [ARGS...]\n", stderr);
      return 2;
    }
    /* The library checks each value when it loads and says what is wrong
     * with it; here only emptiness is refused, since an empty variable
     * means "unset" there. */
    if (!*optarg) {
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
  char lib[PATH_MAX];
  if (find_library(lib, sizeof lib) != 0) {
    fputs("cprof run: cannot find libcprof.so next to cprof or in its install "
          "directory\n",
          stderr);
    return 127;
  }
  const char *old = getenv("LD_PRELOAD");
  char preload[2 * PATH_MAX];
  if (old && *old)
    snprintf(preload, sizeof preload, "%s:%s", lib, old);
  else
    snprintf(preload, sizeof preload, "%s", lib);
  setenv("LD_PRELOAD", preload, 1);
  execvp(argv[optind], argv + optind);
  fprintf(stderr, "cprof run: %s: %s\n", argv[optind], strerror(errno));
  return 127;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
    return cmd_version(argc - 1, argv + 1);
  if (strcmp(cmd, "profiles") == 0) return cmd_profiles(argc - 1, argv + 1);
  if (strcmp(cmd, "extract") == 0) return cmd_extract(argc - 1, argv + 1);
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
      strcmp(cmd, "-h") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  fprintf(stderr, "cprof: unknown command '%s'\n\n%s", cmd, usage);
  return 2;
}
