#!/usr/bin/env bash
# libdw is loaded when the symbolizer first needs it, so a process whose
# libdw cannot be loaded still starts, runs and writes its profiles, with
# addresses and no names, and says why in exactly one line on stderr. A
# file that is not an ELF object stands in for libdw.so.1, found first
# through LD_LIBRARY_PATH.
source "$(dirname "$0")/lib.bash"

prog=$CPROFTEST_BUILD/test/progs/plain_heap_churn
tsan_build "$prog" && skip_rest "preloaded runs need a build without TSan"

mkdir -p "$TMP/lib"
printf 'not an ELF object\n' >"$TMP/lib/libdw.so.1"

run() {
  local name=$1
  shift
  env "$@" CPROF_DUMP=heap=debug=1,goroutine=debug=1 \
    CPROF_DUMP_OUT="$TMP/$name.log" LD_PRELOAD="$(preload_env "$prog")" \
    "$prog" 20000 2>"$TMP/$name.err" ||
    { cat "$TMP/$name.err" >&2; fail "$name: the program failed"; }
  "$CPROFTEST_BUILD/cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  cat "$TMP/$name"/goroutine-*.txt >"$TMP/$name.threads"
}

run with
expect_match "$TMP/with.threads" '^#	0x[0-9a-f]+	+__libc_start_call_main\+0x[0-9a-f]+' \
  "with libdw: named frames"
expect_no_match "$TMP/with.err" 'libdw' "with libdw: no complaint"

run without LD_LIBRARY_PATH="$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
expect_match "$TMP/without.err" \
  '^cprof: symbolize: cannot load libdw\.so\.1: .*; profiles will have addresses but no function names$' \
  "without libdw: one line naming it"
n=$(grep -c '^cprof:' "$TMP/without.err" || true)
[ "$n" = 1 ] || { cat "$TMP/without.err" >&2; fail "without libdw: $n lines from cprof, want 1"; }
checks=$((checks + 1))
echo "ok: without libdw: no other line from cprof, though two profiles were written"
expect_match "$TMP/without.threads" '^goroutine profile: total [1-9]' \
  "without libdw: the profile is written"
expect_match "$TMP/without.threads" '^#	0x[0-9a-f]+$' "without libdw: frames are bare addresses"
expect_no_match "$TMP/without.threads" "__libc_start_call_main" "without libdw: no function names"

finish
