/*
 * Writes a gzipped profile through the pprof encoder that sets every field
 * profile.proto has, to the path given as the only argument. The
 * pprof_golden end-to-end test reads it back with `go tool pprof` and
 * checks that each value survived, so the numbers here are the ones that
 * script expects; change them together.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "encode/pprof.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTPUT\n", argv[0]);
    return 2;
  }
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  cprof_sink sink = cprof_sink_fd(fd);
  cprof__pprof *p = cprof__pprof_new(&sink, true);

  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_sample_type(p, "cpu", "nanoseconds");
  cprof__pprof_period(p, "cpu", "nanoseconds", 10000000);
  cprof__pprof_default_sample_type(p, "cpu");
  cprof__pprof_time(p, 1700000000000000000, 2500000000);
  cprof__pprof_comment(p, "golden comment one");
  cprof__pprof_comment(p, "golden comment two");
  /* pprof anchors both expressions and prunes a sample's frames from the
   * first match down to the leaf, unless keep_frames matches too; samples 4
   * and 5 below show each in effect. */
  cprof__pprof_drop_frames(p, "drop_.*");
  cprof__pprof_keep_frames(p, "drop_but_keep");
  cprof__pprof_doc_url(p, "https://example.com/cprof/golden");

  struct cprof__pprof_mapping exe = {
      .id = 1,
      .memory_start = 0x400000,
      .memory_limit = 0x500000,
      .file_offset = 0x1000,
      .filename = "/usr/bin/golden",
      .build_id = "0123456789abcdef0123456789abcdef01234567",
      .has_functions = true,
      .has_filenames = true,
      .has_line_numbers = true,
      .has_inline_frames = true,
  };
  struct cprof__pprof_mapping lib = {
      .id = 2,
      .memory_start = 0x7f0000000000,
      .memory_limit = 0x7f0000100000,
      .file_offset = 0x2000,
      .filename = "/usr/lib/libgolden.so",
      .build_id = "cafef00d",
      .has_functions = true,
  };
  cprof__pprof_add_mapping(p, &exe);
  cprof__pprof_add_mapping(p, &lib);

  cprof__pprof_function(p, 1, "main", "main", "/src/main.c", 10);
  cprof__pprof_function(p, 2, "foo::bar()", "_ZN3foo3barEv", "/src/foo.cc",
                        20);
  cprof__pprof_function(p, 3, "inlined_helper", "inlined_helper",
                        "/src/helper.h", 30);
  cprof__pprof_function(p, 4, "lib_work", "lib_work", "/src/lib.c", 40);
  cprof__pprof_function(p, 5, "drop_me", "drop_me", "/src/main.c", 50);
  cprof__pprof_function(p, 6, "drop_but_keep", "drop_but_keep", "/src/main.c",
                        60);

  cprof__pprof_line main_line = {1, 15, 3};
  cprof__pprof_location(p, 1, 1, 0x401000, &main_line, 1, false);
  /* An inlined frame: the callee's line first, its caller's last. */
  cprof__pprof_line inlined[2] = {{3, 33, 0}, {2, 25, 0}};
  cprof__pprof_location(p, 2, 1, 0x401100, inlined, 2, false);
  cprof__pprof_line lib_line = {4, 44, 0};
  cprof__pprof_location(p, 3, 2, 0x7f0000001234, &lib_line, 1, false);
  cprof__pprof_line drop_line = {5, 55, 0};
  cprof__pprof_location(p, 4, 1, 0x401200, &drop_line, 1, false);
  cprof__pprof_line keep_line = {6, 66, 0};
  cprof__pprof_location(p, 5, 1, 0x401300, &keep_line, 1, true);

  uint64_t stack1[2] = {2, 1};
  int64_t values1[2] = {3, 30000000};
  cprof__pprof_label labels1[2] = {
      {.key = "thread", .str = "worker"},
      {.key = "size", .num = 4096, .num_unit = "bytes"},
  };
  cprof__pprof_sample(p, stack1, 2, values1, 2, labels1, 2);

  uint64_t stack2[3] = {3, 2, 1};
  int64_t values2[2] = {5, 50000000};
  cprof__pprof_label labels2[2] = {
      {.key = "thread", .str = "main"},
      {.key = "wait", .num = 1500, .num_unit = "nanoseconds"},
  };
  cprof__pprof_sample(p, stack2, 3, values2, 2, labels2, 2);

  uint64_t stack3[1] = {1};
  int64_t values3[2] = {1, 10000000};
  cprof__pprof_label labels3[1] = {{.key = "count", .num = 7}};
  cprof__pprof_sample(p, stack3, 1, values3, 2, labels3, 1);

  uint64_t stack4[2] = {4, 1};
  int64_t values4[2] = {2, 20000000};
  cprof__pprof_sample(p, stack4, 2, values4, 2, NULL, 0);

  uint64_t stack5[2] = {5, 1};
  int64_t values5[2] = {4, 40000000};
  cprof__pprof_sample(p, stack5, 2, values5, 2, NULL, 0);

  int err = cprof__pprof_finish(p);
  if (close(fd) != 0 && !err) err = CPROF_EIO;
  if (err) {
    fprintf(stderr, "golden_profile: %s\n", cprof_strerror(err));
    return 1;
  }
  return 0;
}
