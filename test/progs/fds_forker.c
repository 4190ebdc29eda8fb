/*
 * A server whose fork child does not exec and outlives it, with cprof's
 * HTTP endpoint on (CPROF_HTTP, started by the constructor).
 *
 *   fds_forker fork SECONDS   forks a child that sleeps SECONDS (its pid
 *                             on stdout as "child PID"), then exits at once
 *   fds_forker serve          prints "ready" and waits for SIGTERM
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "fork") == 0) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      /* The child: does its own work, never execs, outlives its parent. */
      sleep((unsigned)atoi(argv[2]));
      _exit(0);
    }
    printf("child %d\n", (int)pid);
    fflush(stdout);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "serve") == 0) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigprocmask(SIG_BLOCK, &s, NULL);
    printf("ready\n");
    fflush(stdout);
    int sig;
    sigwait(&s, &sig);
    return 0;
  }
  fprintf(stderr, "usage: %s fork SECONDS | serve\n", argv[0]);
  return 2;
}
