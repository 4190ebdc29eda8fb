#!/usr/bin/env bash
# The malloc family keeps libc's semantics with cprof in the way: the same
# program, linked with cprof, built without it, and preloaded, at the
# default rate, sampling every allocation, and at the lowest rate that
# places sampled blocks on page boundaries (where many blocks are moved to
# cprof's region or over-allocated), must observe exactly the same results
# as without cprof (test/progs/heap_semantics.c).
source "$(dirname "$0")/lib.bash"

# Sanitizer allocators abort on impossible requests unless told to fail
# the way libc does.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}allocator_may_return_null=1"

linked=$CPROFTEST_BUILD/test/progs/heap_semantics
plain=$CPROFTEST_BUILD/test/progs/plain_heap_semantics
env=$(preload_env "$plain")

run() {
  local label=$1
  shift
  if "$@" >"$TMP/$label.txt" 2>"$TMP/$label.err"; then
    checks=$((checks + 1))
    echo "ok: $label: every case passed"
  else
    cat "$TMP/$label.txt" "$TMP/$label.err" >&2
    fail "$label: a case failed"
  fi
}

run plain "$plain"
run linked "$linked"
run linked_rate1 env CPROF_HEAP_RATE=1 "$linked"
run linked_placed env CPROF_HEAP_RATE=65536 "$linked"
variants="linked linked_rate1 linked_placed"
# A sanitizer runtime preloaded ahead of cprof keeps malloc for itself, so
# the preloaded runs only test cprof in a build without sanitizers.
if [ "$env" = "$CPROFTEST_BUILD/libcprof.so" ]; then
  run preloaded env LD_PRELOAD="$env" "$plain"
  run preloaded_rate1 env CPROF_HEAP_RATE=1 LD_PRELOAD="$env" "$plain"
  run preloaded_placed env CPROF_HEAP_RATE=65536 LD_PRELOAD="$env" "$plain"
  variants="$variants preloaded preloaded_rate1 preloaded_placed"
else
  echo "skip: preloaded runs (a sanitizer runtime owns malloc)"
fi
for v in $variants; do
  if diff -u "$TMP/plain.txt" "$TMP/$v.txt" >"$TMP/diff.txt"; then
    checks=$((checks + 1))
    echo "ok: $v observes what plain observes"
  else
    cat "$TMP/diff.txt" >&2
    fail "$v differs from plain"
  fi
done
finish
