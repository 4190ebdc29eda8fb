#!/usr/bin/env bash
# The layering rules of src/ (docs/design.md), on the built objects and the
# sources (layering.py): no upward symbol or include edge between the
# layers, every file in a layer, and the libc names cprof interposes used
# only by source/*_interpose.c, so that cprof's own locks and memory never
# pass through its own interposers. Then the checker is shown to catch what
# it should: a deliberately added upward call, upward include and a direct
# call of an interposed name each make it fail, naming the edge.
set -euo pipefail
. "$(dirname "$0")/lib.bash"

# The tree is the same in every build: the sanitizer builds leave the
# check to the normal one.
sanitized_build "$CPROFTEST_BUILD/test/progs/parked" && skip_rest "checked in the normal build (the same sources)"
objdir="$CPROFTEST_BUILD/CMakeFiles/cprof_objects.dir/src"
src="$CPROFTEST_SRC/src"
[ -d "$objdir" ] || fail "no objects in $objdir"
check=$CPROFTEST_SRC/test/e2e/layering.py

python3 "$check" "$objdir" "$src" "$CPROFTEST_SRC/docs/design.md" >"$TMP/tree.out" 2>&1 || {
  cat "$TMP/tree.out" >&2
  fail "the tree breaks the layering rules"
}
cat "$TMP/tree.out"
checks=$((checks + 1))

# A copy of the objects and sources, each with one violation added.
copy_tree() {
  rm -rf "$TMP/obj" "$TMP/src"
  cp -r "$objdir" "$TMP/obj"
  cp -r "$src" "$TMP/src"
}
expect_failure() { # what, expected message
  if python3 "$check" "$TMP/obj" "$TMP/src" >"$TMP/bad.out" 2>&1; then
    fail "$1 was not caught"
  fi
  grep -qF -- "$2" "$TMP/bad.out" || {
    cat "$TMP/bad.out" >&2
    fail "$1: the failure does not name '$2'"
  }
  echo "ok: $1 caught: $(grep -F -- "$2" "$TMP/bad.out" | head -1)"
  checks=$((checks + 1))
}

copy_tree
cat >"$TMP/src/capture/upward.c" <<'C'
void cprof_http_stop(void);
void capture_calls_a_sink(void) { cprof_http_stop(); }
C
cc -c -o "$TMP/obj/capture/upward.c.o" "$TMP/src/capture/upward.c"
expect_failure "an upward call" "upward call: capture/upward.c uses cprof_http_stop from sink/http.c"

copy_tree
printf '#include "profile/registry.h"\n' >>"$TMP/src/base/hmap.c"
expect_failure "an upward include" "upward include: base/hmap.c includes profile/registry.h"

copy_tree
cat >"$TMP/src/sink/own_lock.c" <<'C'
#include <pthread.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
void sink_locks_through_the_interposer(void) { pthread_mutex_lock(&mu); }
C
cc -c -o "$TMP/obj/sink/own_lock.c.o" "$TMP/src/sink/own_lock.c"
expect_failure "a call of an interposed name" "sink/own_lock.c calls interposed names: pthread_mutex_lock"

copy_tree
cat >"$TMP/src/capture/cycle_a.c" <<'C'
void cycle_b(int);
void cycle_a(int n) { if (n) cycle_b(n - 1); }
C
cat >"$TMP/src/capture/cycle_b.c" <<'C'
void cycle_a(int);
void cycle_b(int n) { if (n) cycle_a(n - 1); }
C
cc -c -o "$TMP/obj/capture/cycle_a.c.o" "$TMP/src/capture/cycle_a.c"
cc -c -o "$TMP/obj/capture/cycle_b.c.o" "$TMP/src/capture/cycle_b.c"
expect_failure "a call cycle between two files" "call cycle between files: capture/cycle_a.c <-> capture/cycle_b.c"

copy_tree
printf '/* another mem.h */\n' >"$TMP/src/sink/mem.h"
expect_failure "a header name used twice" "sink/mem.h and base/mem.h share a header name"

copy_tree
printf '#include "base/fork.h"\nvoid f(void) { cprof__atfork(CPROF__FORK_DUMP, 0, 0, 0); }\n' >"$TMP/src/capture/forks.c"
expect_failure "a fork handler in another layer's slot" "capture/forks.c: fork slot CPROF__FORK_DUMP is a sink slot"
expect_failure "a fork slot registered twice" "fork slot CPROF__FORK_DUMP registered by capture/forks.c and sink/dump.c"

copy_tree
printf 'int stray;\n' >"$TMP/src/stray.c"
expect_failure "a file outside the layers" "stray.c: not in a layer folder"

copy_tree
printf 'int unlisted;\n' >"$TMP/src/encode/unlisted.c"
if python3 "$check" "$TMP/obj" "$TMP/src" "$CPROFTEST_SRC/docs/design.md" >"$TMP/bad.out" 2>&1 ||
  ! grep -qF "encode/unlisted.c: not in the design document's table" "$TMP/bad.out"; then
  cat "$TMP/bad.out" >&2
  fail "a file missing from docs/design.md was not caught"
fi
echo "ok: a file missing from docs/design.md caught"
checks=$((checks + 1))
finish
