/*
 * The cprof command-line tool. Like curl's src/, it uses only the public
 * API in cprof.h. Each subcommand is one function with its own --help.
 */
#include <cprof.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: cprof <command> [arguments]\n"
    "\n"
    "Profiling for C and C++ programs, in pprof's format.\n"
    "\n"
    "commands:\n"
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

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
    return cmd_version(argc - 1, argv + 1);
  if (strcmp(cmd, "profiles") == 0) return cmd_profiles(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
      strcmp(cmd, "-h") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  fprintf(stderr, "cprof: unknown command '%s'\n\n%s", cmd, usage);
  return 2;
}
