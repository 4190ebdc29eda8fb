/*
 * The public API's plumbing: the error table, the version, sinks and the
 * registry's argument checks.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "cprof.h"
#include "testutil.h"

static void test_errors(void) {
  CHECK_STREQ(cprof_strerror(CPROF_OK), "success");
  CHECK_STREQ(cprof_err_name(CPROF_EINVAL), "CPROF_EINVAL");
  CHECK_STREQ(cprof_strerror(CPROF_EBUSY), "cpu profiling already in use");
  CHECK_STREQ(cprof_strerror(CPROF_ENOTENABLED), "Profiling is not enabled");
  CHECK_STREQ(cprof_strerror(CPROF_ENOPROFILE), "Unknown profile");
  CHECK_STREQ(cprof_strerror(12345), "unknown error");
  CHECK_STREQ(cprof_err_name(-9999), "CPROF_UNKNOWN");
  /* Every code in the table has a distinct name and a message. */
#define CHECK_ENTRY(name, code, msg)                       \
  CHECK_STREQ(cprof_err_name(code), "CPROF_" #name);       \
  CHECK_STREQ(cprof_strerror(code), msg);
  CPROF_ERRNO_MAP(CHECK_ENTRY)
#undef CHECK_ENTRY
}

static void test_version(void) {
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", CPROF_VERSION_MAJOR,
           CPROF_VERSION_MINOR, CPROF_VERSION_PATCH);
  CHECK_STREQ(cprof_version(), want);
  CHECK_EQ_INT(cprof_version_number(), CPROF_VERSION_HEX);
}

static void test_buf_sink(void) {
  cprof_buf buf = {0};
  cprof_sink s = cprof_sink_buf(&buf);
  CHECK_EQ_INT(s.write(s.ctx, "abc", 3), 0);
  CHECK_EQ_INT(s.write(s.ctx, "defg", 4), 0);
  CHECK_EQ_INT(buf.len, 7);
  CHECK(memcmp(buf.data, "abcdefg", 7) == 0);
  cprof_buf_free(&buf);
  CHECK(buf.data == NULL && buf.len == 0);
  cprof_buf_free(&buf);
}

static void test_fd_sink(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  cprof_sink s = cprof_sink_fd(fds[1]);
  CHECK_EQ_INT(s.write(s.ctx, "hello", 5), 0);
  char got[8] = {0};
  CHECK_EQ_INT(read(fds[0], got, sizeof got), 5);
  CHECK_STREQ(got, "hello");
  close(fds[0]);
  /* Writing to a closed pipe is an I/O error, not a crash (SIGPIPE is
   * ignored here as a server would). */
  signal(SIGPIPE, SIG_IGN);
  CHECK_EQ_INT(s.write(s.ctx, "x", 1), CPROF_EIO);
  close(fds[1]);
  cprof_sink bad = cprof_sink_fd(-1);
  CHECK_EQ_INT(bad.write(bad.ctx, "x", 1), CPROF_EIO);
}

static void test_registry(void) {
  cprof_buf buf = {0};
  cprof_sink s = cprof_sink_buf(&buf);
  CHECK_EQ_INT(cprof_profile_write("nosuch", 0, &s), CPROF_ENOPROFILE);
  CHECK_EQ_INT(cprof_profile_write(NULL, 0, &s), CPROF_ENOPROFILE);
  CHECK_EQ_INT(cprof_profile_write("threadcreate", 0, NULL), CPROF_EINVAL);
  CHECK_EQ_INT(cprof_profile_write("threadcreate", -1, &s), CPROF_EINVAL);
  CHECK_EQ_INT(cprof_profile_entries("nosuch"), CPROF_ENOPROFILE);
  /* Windowed profiles are not written at a moment, nor listed. */
  CHECK_EQ_INT(cprof_profile_write("cpu", 0, &s), CPROF_ENOPROFILE);
  CHECK_EQ_INT(cprof_profile_write("wall", 0, &s), CPROF_ENOPROFILE);
  for (size_t i = 0; i < cprof_profile_count(); i++)
    CHECK(strcmp(cprof_profile_name(i), "cpu") != 0 &&
          strcmp(cprof_profile_name(i), "wall") != 0);
  CHECK(cprof_profile_count() >= 1);
  /* Names are sorted, as Go's index lists them. */
  for (size_t i = 1; i < cprof_profile_count(); i++)
    CHECK(strcmp(cprof_profile_name(i - 1), cprof_profile_name(i)) < 0);
  CHECK(cprof_profile_name(cprof_profile_count()) == NULL);
  CHECK(cprof_profile_description(cprof_profile_count()) == NULL);
  /* The full listing has the windowed ones too, with their routes, and
   * every snapshot one; it is sorted as well and ends with an error. */
  cprof_profile_info info;
  size_t all = 0, windowed = 0;
  const char *prev = "";
  bool cpu = false, wall = false;
  for (; cprof_profile_info_at(all, &info) == 0; all++) {
    CHECK(strcmp(prev, info.name) < 0 && info.route && info.description);
    prev = info.name;
    windowed += (size_t)info.windowed;
    if (strcmp(info.name, "cpu") == 0)
      cpu = info.windowed && strcmp(info.route, "profile") == 0;
    if (strcmp(info.name, "wall") == 0)
      wall = info.windowed && strcmp(info.route, "wall") == 0;
    if (!info.windowed) CHECK(cprof_profile_entries(info.name) >= 0);
  }
  CHECK(cpu && wall);
  CHECK_EQ_INT((long)(all - windowed), (long)cprof_profile_count());
  CHECK_EQ_INT(cprof_profile_info_at(all, &info), CPROF_ENOPROFILE);
  CHECK_EQ_INT(cprof_profile_info_at(0, NULL), CPROF_EINVAL);
  CHECK_EQ_INT(cprof_profile_write_file("threadcreate", 0, "/nonexistent/dir/x"),
               CPROF_EIO);
  CHECK_EQ_INT(buf.len, 0);
  /* A real write produces a gzip stream. */
  CHECK_EQ_INT(cprof_profile_write("threadcreate", 0, &s), 0);
  CHECK(buf.len > 10 && buf.data[0] == 0x1f && buf.data[1] == 0x8b);
  cprof_buf_free(&buf);
}

int main(void) {
  RUN(test_errors);
  RUN(test_version);
  RUN(test_buf_sink);
  RUN(test_fd_sink);
  RUN(test_registry);
  return TEST_RESULT();
}
