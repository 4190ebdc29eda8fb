/*
 * The error table's strings, generated from CPROF_ERRNO_MAP in cprof.h so the
 * enum, the names and the messages cannot drift apart; and the version.
 */
#include "base/internal.h"

const char *cprof_strerror(int err) {
  switch (err) {
#define CPROF_ERR_MSG_(name, code, msg) \
  case (code):                          \
    return (msg);
    CPROF_ERRNO_MAP(CPROF_ERR_MSG_)
#undef CPROF_ERR_MSG_
    default:
      return "unknown error";
  }
}

const char *cprof_err_name(int err) {
  switch (err) {
#define CPROF_ERR_NAME_(name, code, msg) \
  case (code):                           \
    return "CPROF_" #name;
    CPROF_ERRNO_MAP(CPROF_ERR_NAME_)
#undef CPROF_ERR_NAME_
    default:
      return "CPROF_UNKNOWN";
  }
}

#define CPROF_STR2_(x) #x
#define CPROF_STR_(x) CPROF_STR2_(x)

const char *cprof_version(void) {
  return CPROF_STR_(CPROF_VERSION_MAJOR) "." CPROF_STR_(
      CPROF_VERSION_MINOR) "." CPROF_STR_(CPROF_VERSION_PATCH);
}

unsigned cprof_version_number(void) { return CPROF_VERSION_HEX; }
