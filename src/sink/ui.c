/*
 * The profile viewer's server side (see ui.h): it hands out the embedded
 * page and a JSON list of the registry's profiles. It owns no state and
 * must never collect a profile itself: the page fetches profiles through
 * the endpoint's ordinary routes, so each one keeps its own rules. It
 * reads the registry's definitions only (names, descriptions, counts,
 * which are windowed).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cprof_ui_page.h"
#include "base/mem.h"
#include "profile/registry.h"
#include "sink/ui.h"

int cprof__ui_page(cprof_buf *out) {
  return cprof__buf_append(out, cprof_ui_page, CPROF_UI_PAGE_LEN);
}

/* A JSON string: quotes, backslashes and control characters escaped, and
 * '<' too so the text can never close a script element it is put in. */
static int put_json_string(cprof_buf *b, const char *s) {
  int err = cprof__buf_append(b, "\"", 1);
  for (; !err && s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      err = cprof__buf_printf(b, "\\%c", c);
    else if (c < 0x20 || c == '<')
      err = cprof__buf_printf(b, "\\u%04x", c);
    else
      err = cprof__buf_append(b, s, 1);
  }
  return err ? err : cprof__buf_append(b, "\"", 1);
}

static int put_entry(cprof_buf *b, bool first, const cprof__profile_def *d) {
  int err = cprof__buf_printf(b, "%s{\"name\":", first ? "" : ",");
  if (!err) err = put_json_string(b, cprof__profile_route(d));
  if (!err) err = cprof__buf_printf(b, ",\"description\":");
  if (!err) err = put_json_string(b, d->description);
  long count = d->entries ? d->entries() : 0;
  if (!err)
    err = cprof__buf_printf(b, ",\"count\":%ld,\"windowed\":%s}",
                            count < 0 ? 0 : count, d->window ? "true" : "false");
  return err;
}

int cprof__ui_profiles_json(cprof_buf *out) {
  int err = cprof__buf_printf(out, "{\"profiles\":[");
  /* Windowed profiles (CPU) first: the viewer opens on the first. */
  bool first = true;
  for (int windowed = 1; windowed >= 0; windowed--) {
    for (size_t i = 0; !err && i < cprof__profiles_count(); i++) {
      const cprof__profile_def *d = cprof__profile_at(i);
      if ((d->window != NULL) != windowed) continue;
      err = put_entry(out, first, d);
      first = false;
    }
  }
  if (!err) err = cprof__buf_printf(out, "]}\n");
  return err;
}
