/*
 * How an application serves profiles over its own admin protocol with
 * cprof_profilez, instead of (or next to) the HTTP endpoint.
 *
 *   admin-server [PORT]     (default 0: any free port, printed on stdout)
 *
 * A TCP line protocol on 127.0.0.1, one command per line:
 *   ENABLE                      opt in to profiling      -> "OK"
 *   PROFILEZ <name> <debug> [seconds]
 *                               -> "OK <length>" then exactly <length> bytes
 *                                  of the profile, or "ERR <message>"
 *   QUIT                        close the connection
 * Profiling stays off until some client sends ENABLE, as the seed's server
 * keeps profilez off until its operator enables profiling.
 *
 * The server also runs a small workload (CPU, allocations, a condition
 * variable) so its profiles have something in them.
 */
#include <arpa/inet.h>
#include <cprof.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile uint64_t result;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static int queued;

__attribute__((noinline)) static void hash_requests(void) {
  uint64_t h = result;
  for (int i = 0; i < 2000000; i++) h = (h ^ (uint64_t)i) * 1099511628211ull;
  result = h;
}

__attribute__((noinline)) static void *cache_entry(size_t n) {
  char *p = malloc(n);
  if (p) memset(p, 1, n);
  return p;
}

static void *producer(void *arg) {
  (void)arg;
  /* A cache of 512 entries of 16-40 KiB: about 14 MB live. */
  static void *keep[512];
  for (unsigned i = 0;; i++) {
    hash_requests();
    free(keep[i % 512]);
    keep[i % 512] = cache_entry(16384 + (i % 7) * 4096);
    pthread_mutex_lock(&queue_lock);
    queued++;
    pthread_cond_signal(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
    usleep(1000);
  }
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&queue_lock);
    while (queued == 0) pthread_cond_wait(&queue_cond, &queue_lock);
    queued--;
    pthread_mutex_unlock(&queue_lock);
  }
  return NULL;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int reply_line(int fd, const char *fmt, const char *arg) {
  char line[512];
  int n = snprintf(line, sizeof line, fmt, arg);
  return send_all(fd, line, (size_t)n);
}

/* One command; returns -1 to close the connection. */
static int serve_command(int fd, char *line) {
  char *argv[5] = {0};
  int argc = 0;
  for (char *tok = strtok(line, " \t\r"); tok && argc < 5;
       tok = strtok(NULL, " \t\r"))
    argv[argc++] = tok;
  if (argc == 0) return 0;
  if (strcmp(argv[0], "QUIT") == 0) return -1;
  if (strcmp(argv[0], "ENABLE") == 0 && argc == 1) {
    cprof_enable();
    return reply_line(fd, "OK%s\n", "");
  }
  if (strcmp(argv[0], "PROFILEZ") == 0 && (argc == 3 || argc == 4)) {
    cprof_buf buf = {0};
    int err = cprof_profilez(argv[1], atoi(argv[2]),
                             argc == 4 ? atoi(argv[3]) : 0, &buf);
    int rc;
    if (err) {
      rc = reply_line(fd, "ERR %s\n", cprof_strerror(err));
    } else {
      char len[32];
      snprintf(len, sizeof len, "%zu", buf.len);
      rc = reply_line(fd, "OK %s\n", len);
      if (rc == 0) rc = send_all(fd, buf.data, buf.len);
    }
    cprof_buf_free(&buf);
    return rc;
  }
  return reply_line(fd, "ERR unknown command: %s\n", argv[0]);
}

static void *serve_client(void *arg) {
  int fd = (int)(intptr_t)arg;
  char line[256];
  size_t n = 0;
  for (;;) {
    ssize_t r = recv(fd, line + n, 1, 0);
    if (r <= 0) break;
    if (line[n] == '\n') {
      line[n] = '\0';
      if (serve_command(fd, line) != 0) break;
      n = 0;
    } else if (++n == sizeof line - 1) {
      reply_line(fd, "ERR line too long%s\n", "");
      break;
    }
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 0;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(ls, 16) != 0 || getsockname(ls, (struct sockaddr *)&a, &alen)) {
    perror("admin-server");
    return 1;
  }
  printf("%d\n", ntohs(a.sin_port));
  fflush(stdout);

  pthread_t t;
  pthread_create(&t, NULL, producer, NULL);
  pthread_create(&t, NULL, consumer, NULL);
  for (;;) {
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) continue;
    pthread_t c;
    if (pthread_create(&c, NULL, serve_client, (void *)(intptr_t)fd) == 0)
      pthread_detach(c);
    else
      close(fd);
  }
}
