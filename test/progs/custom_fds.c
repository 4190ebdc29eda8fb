/*
 * A custom profile tracking open file descriptors, as Go programs track
 * resources with pprof.NewProfile: descriptors are added to the "fds"
 * profile where they are opened (open_a opens 3, open_b 2) and removed
 * when closed. Serves HTTP on a free loopback port (printed on stdout
 * after the name-rule checks) and dumps every custom profile at exit
 * (dump item "custom"), then follows commands on stdin:
 *   more    open 4 more at open_c       closeb  close open_b's
 *   quit    close the rest and exit
 * Each command is acknowledged with "done" on stdout.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cprof.h"

static cprof_profile *fds;
static int b_fds[2], c_fds[4]; /* c_fds stay open to the exit dump */

__attribute__((noinline)) static int tracked_open(void) {
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0 && cprof_profile_add(fds, (uintptr_t)fd, 1) != 0) return -1;
  return fd;
}

static void tracked_close(int fd) {
  cprof_profile_remove(fds, (uintptr_t)fd);
  close(fd);
}

__attribute__((noinline)) static int open_a(void) { return tracked_open(); }
__attribute__((noinline)) static int open_b(void) { return tracked_open(); }
__attribute__((noinline)) static int open_c(void) { return tracked_open(); }

int main(void) {
  char err[256];
  if (cprof_dump_configure("custom", err, sizeof err) != 0) {
    fprintf(stderr, "dump: %s\n", err);
    return 1;
  }
  if (cprof_profile_new("fds", "Open file descriptors", &fds) != 0) return 1;
  cprof_profile *other;
  printf("dup=%s\n", cprof_err_name(cprof_profile_new("fds", NULL, &other)));
  printf("builtin=%s\n", cprof_err_name(cprof_profile_new("heap", NULL, &other)));
  printf("empty=%s\n", cprof_err_name(cprof_profile_new("", NULL, &other)));
  printf("route=%s\n", cprof_err_name(cprof_profile_new("profile", NULL, &other)));
  printf("space=%s\n", cprof_err_name(cprof_profile_new("a b", NULL, &other)));
  int a[3];
  for (int i = 0; i < 3; i++) a[i] = open_a();
  for (int i = 0; i < 2; i++) b_fds[i] = open_b();
  printf("adddup=%s\n",
         cprof_err_name(cprof_profile_add(fds, (uintptr_t)a[0], 0)));
  printf("len=%ld\n", cprof_profile_len(fds));
  cprof_http_config cfg = {.addr = "127.0.0.1:0"};
  cprof_http *srv;
  if (cprof_http_start(&cfg, &srv) != 0) return 1;
  printf("port=%d\n", cprof_http_port(srv));
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "more", 4) == 0) {
      for (int i = 0; i < 4; i++) c_fds[i] = open_c();
    } else if (strncmp(line, "closeb", 6) == 0) {
      for (int i = 0; i < 2; i++) tracked_close(b_fds[i]);
    } else if (strncmp(line, "quit", 4) == 0) {
      break;
    }
    printf("done\n");
    fflush(stdout);
  }
  cprof_http_stop(srv);
  for (int i = 0; i < 3; i++) tracked_close(a[i]);
  return 0; /* the dump at exit shows open_c's four */
}
