/*
 * The profile viewer's server side: the page served at /debug/pprof/ui/
 * (src/ui/index.html, embedded at build time) and the list of profiles it
 * offers (/debug/pprof/ui/profiles.json). The routes themselves, and the
 * token and loopback rules, stay in http_handler.c.
 */
#ifndef CPROF_UI_H
#define CPROF_UI_H

#include "base/internal.h"

/* Appends the viewer page (HTML with its CSS and script inline) to out.
 * Returns 0 or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__ui_page(cprof_buf *out);

/* Appends {"profiles":[{"name","description","count"},...]} to out: the CPU
 * profile ("profile", count 0) first, then the registry's profiles in
 * registry order. Returns 0 or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__ui_profiles_json(cprof_buf *out);

#endif
