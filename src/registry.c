/*
 * The named-profile registry (see registry.h) and the public functions that
 * look profiles up by name. Adding a profile is one line in the table.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"
#include "threads.h"

static const cprof__profile_def *const profiles[] = {
    &cprof__threadcreate_profile,
};

const cprof__profile_def *cprof__profile_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < CPROF__ARRAY_LEN(profiles); i++)
    if (strcmp(profiles[i]->name, name) == 0) return profiles[i];
  return NULL;
}

size_t cprof_profile_count(void) { return CPROF__ARRAY_LEN(profiles); }

const char *cprof_profile_name(size_t i) {
  return i < CPROF__ARRAY_LEN(profiles) ? profiles[i]->name : NULL;
}

const char *cprof_profile_description(size_t i) {
  return i < CPROF__ARRAY_LEN(profiles) ? profiles[i]->description : NULL;
}

long cprof_profile_entries(const char *name) {
  const cprof__profile_def *def = cprof__profile_find(name);
  return def ? def->entries() : CPROF_ENOPROFILE;
}

int cprof_profile_write(const char *name, int debug, const cprof_sink *sink) {
  if (!sink || !sink->write || debug < 0) return CPROF_EINVAL;
  const cprof__profile_def *def = cprof__profile_find(name);
  if (!def) return CPROF_ENOPROFILE;
  return def->write(debug, sink);
}

int cprof_profile_write_file(const char *name, int debug, const char *path) {
  if (!path) return CPROF_EINVAL;
  if (!cprof__profile_find(name)) return CPROF_ENOPROFILE;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return CPROF_EIO;
  cprof_sink sink = cprof_sink_fd(fd);
  int err = cprof_profile_write(name, debug, &sink);
  if (close(fd) != 0 && !err) err = CPROF_EIO;
  return err;
}
