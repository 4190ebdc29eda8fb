/*
 * A daemon that closes every descriptor it did not open, first thing in
 * main, as classic daemons do, while cprof's HTTP endpoint (CPROF_HTTP,
 * started by the constructor) is on. Then it opens its data file and its
 * own listening socket, serves N connections (reads "hello I\n", answers
 * "ok I\n"), appends one known record per connection to the data file,
 * and exits.
 *
 *   fds_daemon HOW DATAFILE N
 *     HOW: loop         close(3..1023) one by one
 *          close_range  close_range(3, ~0U, 0)
 *          closefrom    closefrom(3)
 *          raw          the close_range system call itself, which no
 *                       interposer sees
 * Prints "port P data D listener L" on stdout once listening, and
 * "served S of N" on stderr at the end; exit 0 when every connection was
 * served. A connection that fails is reported and counted as not served.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s loop|close_range|closefrom|raw DATAFILE N\n",
            argv[0]);
    return 2;
  }
  const char *how = argv[1];
  if (strcmp(how, "loop") == 0) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
  } else if (strcmp(how, "close_range") == 0) {
    close_range(3, ~0U, 0);
  } else if (strcmp(how, "closefrom") == 0) {
    closefrom(3);
  } else if (strcmp(how, "raw") == 0) {
    syscall(SYS_close_range, 3, ~0U, 0);
  } else {
    fprintf(stderr, "unknown HOW %s\n", how);
    return 2;
  }
  int n = atoi(argv[3]);
  int data = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (data < 0 || ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(ls, 16) != 0 ||
      getsockname(ls, (struct sockaddr *)&a, &alen) != 0) {
    perror("fds_daemon: setup");
    return 1;
  }
  printf("port %d data %d listener %d\n", ntohs(a.sin_port), data, ls);
  fflush(stdout);
  int served = 0;
  for (int i = 0; i < n; i++) {
    int c = accept(ls, NULL, NULL);
    if (c < 0) {
      fprintf(stderr, "fds_daemon: accept: %s\n", strerror(errno));
      break;
    }
    char *req = malloc(64), want[32];
    if (!req) return 1;
    ssize_t got = 0, r;
    while (got < 63 && (r = read(c, req + got, 63 - (size_t)got)) > 0) {
      got += r;
      if (memchr(req, '\n', (size_t)got)) break;
    }
    req[got < 0 ? 0 : got] = 0;
    snprintf(want, sizeof want, "hello %d\n", i);
    char ans[32], rec[64];
    int alen2 = snprintf(ans, sizeof ans, "ok %d\n", i);
    if (strcmp(req, want) != 0) {
      fprintf(stderr, "fds_daemon: connection %d: got \"%.*s\"\n", i,
              (int)strcspn(req, "\n"), req);
    } else if (write(c, ans, (size_t)alen2) != alen2) {
      fprintf(stderr, "fds_daemon: connection %d: write: %s\n", i,
              strerror(errno));
    } else {
      int rlen = snprintf(rec, sizeof rec, "record %d: 0123456789abcdef\n", i);
      if (write(data, rec, (size_t)rlen) == rlen) served++;
    }
    close(c);
    free(req);
  }
  close(data);
  close(ls);
  fprintf(stderr, "fds_daemon: served %d of %d\n", served, n);
  return served == n ? 0 : 1;
}
