/*
 * An unmodified program that takes its signals synchronously, as event
 * loops do: main blocks SIGUSR1 and SIGTERM (after any library
 * constructor, cprof's included, has run and started its threads) and
 * reads them from a signalfd in a poll loop. It knows nothing of cprof.
 * The signals stay blocked all along (unlike sigwait, which unblocks them
 * while it waits), so the kernel gives a process-directed one to any
 * other thread that does not block it, and its default action kills the
 * process.
 *   plain_signalfd
 * Prints "ready" once the signals are blocked, "usr1 N" for the Nth
 * SIGUSR1, and at SIGTERM "term N" and returns from main with status 0.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <unistd.h>

int main(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return 2;
  int fd = signalfd(-1, &set, SFD_CLOEXEC);
  if (fd < 0) return 3;
  printf("ready\n");
  fflush(stdout);
  unsigned usr1 = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, -1) < 0) continue;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof si) != (ssize_t)sizeof si) continue;
    if (si.ssi_signo == SIGTERM) break;
    printf("usr1 %u\n", ++usr1);
    fflush(stdout);
  }
  printf("term %u\n", usr1);
  fflush(stdout);
  return 0;
}
