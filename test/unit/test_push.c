/*
 * The pusher's configuration checks that keep values out of the HTTP
 * request where they would change its shape: a control character (CR, LF
 * or any other) in the token, the tenant, basic auth or the URL is refused
 * with CPROF_EINVAL and a reason, before anything is started or loaded.
 * So is a profiles list that names anything but pushed profiles.
 */
#include <string.h>

#include "cprof.h"
#include "testutil.h"

static char logged[512];

static void logger(void *ctx, const char *line) {
  (void)ctx;
  snprintf(logged, sizeof logged, "%s", line);
}

static int start_with(const char *field, const char *value) {
  cprof_push_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.url = "http://127.0.0.1:1";
  cfg.logger = logger;
  if (!strcmp(field, "url")) cfg.url = value;
  if (!strcmp(field, "bearer_token")) cfg.bearer_token = value;
  if (!strcmp(field, "tenant_id")) cfg.tenant_id = value;
  if (!strcmp(field, "basic_auth")) cfg.basic_auth = value;
  if (!strcmp(field, "profiles")) cfg.profiles = value;
  logged[0] = '\0';
  cprof_push *p = NULL;
  int rc = cprof_push_start(&cfg, &p);
  if (rc == 0) cprof_push_stop(p);
  return rc;
}

static void test_control_characters(void) {
  static const char *const fields[] = {"bearer_token", "tenant_id",
                                       "basic_auth"};
  static const char *const values[] = {"abc\r\nX-Injected: yes", "abc\n",
                                       "a\tb", "a\x7f", "\x1b[2J"};
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
      CHECK_EQ_INT(start_with(fields[f], values[v]), CPROF_EINVAL);
      char want[128];
      snprintf(want, sizeof want, "%s must not contain control characters",
               fields[f]);
      CHECK_STREQ(logged, want);
    }
  CHECK_EQ_INT(start_with("url", "http://127.0.0.1:1/\r\nX-Injected: yes"),
               CPROF_EINVAL);
  CHECK_STREQ(logged, "url must not contain control characters");
}

static void test_clean_values(void) {
  /* Clean values pass the checks; without libcurl start says so instead. */
  int rc = start_with("bearer_token", "s3cret-token_1.2~");
  CHECK(rc == 0 || rc == CPROF_EUNSUPPORTED);
  rc = start_with("tenant_id", "team-a");
  CHECK(rc == 0 || rc == CPROF_EUNSUPPORTED);
}

static void test_profiles(void) {
  static const struct {
    const char *list, *why;
  } bad[] = {
      {"", "profiles names no profile"},
      {"goroutine", "profiles: \"goroutine\" is not a profile that is pushed"},
      {"threads", "profiles: \"threads\" is not a profile that is pushed"},
      {"cpu,bogus", "profiles: \"bogus\" is not a profile that is pushed"},
      {"cpu,,heap", "profiles: \"\" is not a profile that is pushed"},
      {"cpu,", "profiles: \"\" is not a profile that is pushed"},
      {"cpu\n", "profiles: \"cpu\\n\" is not a profile that is pushed"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_INT(start_with("profiles", bad[i].list), CPROF_EINVAL);
    CHECK_STREQ(logged, bad[i].why);
  }
  char longname[200];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CHECK_EQ_INT(start_with("profiles", longname), CPROF_EINVAL);
  CHECK(strncmp(logged, "profiles: \"xxx", 14) == 0 && strlen(logged) < 120);
  int rc = start_with("profiles", "cpu,wall,heap,mutex,block");
  CHECK(rc == 0 || rc == CPROF_EUNSUPPORTED);
}

int main(void) {
  RUN(test_control_characters);
  RUN(test_profiles);
  RUN(test_clean_values);
  return TEST_RESULT();
}
