/*
 * The two sinks cprof provides: a file descriptor and a memory buffer. Both
 * are plain normal-context code; neither is used from signal handlers.
 */
#include <errno.h>
#include <unistd.h>

#include "base/mem.h"

static int fd_write(void *ctx, const void *data, size_t len) {
  int fd = (int)(intptr_t)ctx;
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return CPROF_EIO;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int buf_write(void *ctx, const void *data, size_t len) {
  return cprof__buf_append(ctx, data, len);
}

cprof_sink cprof_sink_fd(int fd) {
  cprof_sink s = {fd_write, (void *)(intptr_t)fd};
  return s;
}

cprof_sink cprof_sink_buf(cprof_buf *buf) {
  cprof_sink s = {buf_write, buf};
  return s;
}
