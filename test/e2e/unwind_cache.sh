#!/usr/bin/env bash
# The unwind tables' cache (docs/unwinding.md): a C program built -O2
# without frame pointers is profiled with CFI unwinding only
# (CPROF_UNWIND=cfi). The first run builds its tables and keeps them in
# the cache directory, one BUILDID.cfi per object, 0600; a second run,
# which reads them, still has its CPU samples reaching main. The entry of
# the program is then rewritten, still well formed, with every rule made
# one a walk cannot follow: samples no longer reach main, which shows the
# entry is what the walk used; with the cache off they do again. An entry
# of garbage, and one of another object, are not used, and are replaced.
# A program profiled for its heap alone keeps its tables as well.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
shares=$CPROFTEST_SRC/test/e2e/traces.py
prog=$CPROFTEST_BUILD/test/progs/nofp_callbacks
if tsan_build "$prog"; then
  skip_rest "preloaded runs are covered by the plain and ASan builds"
fi
rt=$(preload_env "$prog" | sed 's#[^ ]*libcprof\.so##')
bid=$(readelf -n "$prog" | awk '/Build ID/ {print $3}')
[ -n "$bid" ] || fail "the test program has no build ID"
cache=$TMP/cache
entry=$cache/$bid.cfi
mkdir -m 700 "$cache"

# main_share NAME [ENV...]: the share of CPU samples reaching main in a
# 0.5 s run of the program.
main_share() {
  local name=$1
  shift
  env CPROF_DEBUG_CACHE="$cache" "$@" CPROF_UNWIND=cfi LD_PRELOAD="$rt" \
    "$cprof" run --dump cpu --dump-out "$TMP/$name.log" -- "$prog" 0.5 >/dev/null 2>"$TMP/$name.err"
  [ -s "$TMP/$name.err" ] && fail "$name: the run printed: $(cat "$TMP/$name.err")"
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  pprof -traces "$TMP/$name"/cpu-*.pb.gz | python3 "$shares" main | awk 'NR == 1 {print $2}'
}

at_least() {
  awk -v v="$1" -v m="$2" 'BEGIN { exit !(v + 0 >= m + 0) }' || fail "$3: $1% (at least $2% expected)"
  checks=$((checks + 1))
  echo "ok: $3: $1%"
}

at_most() {
  awk -v v="$1" -v m="$2" 'BEGIN { exit !(v + 0 <= m + 0) }' || fail "$3: $1% (at most $2% expected)"
  checks=$((checks + 1))
  echo "ok: $3: $1%"
}

at_least "$(main_share first)" 95 "first run (tables built and kept): samples reaching main"
[ -f "$entry" ] || fail "no entry $entry after the first run ($(ls "$cache"))"
[ "$(stat -c %a "$entry")" = 600 ] || fail "the entry is $(stat -c %a "$entry"), not 600"
libc_id=$(readelf -n "$(ldd "$prog" | awk '/libc\.so/ {print $3}')" | awk '/Build ID/ {print $3}')
[ -z "$libc_id" ] || [ -f "$cache/$libc_id.cfi" ] || fail "no entry for libc ($libc_id)"
ls "$cache" >"$TMP/list"
expect_no_match "$TMP/list" '\.tmp$' "no temporary file is left"
inode=$(stat -c %i "$entry")
at_least "$(main_share second)" 95 "second run (tables read): samples reaching main"
[ "$(stat -c %i "$entry")" = "$inode" ] || fail "the second run wrote the entry again"

# Every rule of the program's entry made CPROF__CFI_UNSUPPORTED (kind 6,
# every other field zero): still well formed, useless to a walk.
python3 - "$entry" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
assert b[:5] == b"CPCFI", "not an entry"
nrows, nrules, tag_len, _ = struct.unpack_from("<4I", b, 40)
at = 64 + tag_len + (4 - tag_len % 4) % 4
for i in range(nrules):
    kind = b[at + 12 * i]
    if kind in (1, 2, 3):
        b[at + 12 * i:at + 12 * (i + 1)] = bytes([6]) + bytes(11)
open(p, "wb").write(bytes(b))
PY
at_most "$(main_share planted)" 20 "an entry whose rules cannot be followed is the one used: samples reaching main"
at_least "$(main_share off CPROF_DEBUG_CACHE=off)" 95 "the same with the cache off: samples reaching main"

head -c 5000 /dev/urandom >"$entry"
at_least "$(main_share garbage)" 95 "an entry of garbage (not used): samples reaching main"
[ "$(head -c 5 "$entry")" = CPCFI ] || fail "the garbage entry was not replaced"
if [ -n "$libc_id" ]; then
  cp "$cache/$libc_id.cfi" "$entry"
  at_least "$(main_share other)" 95 "another object's entry (not used): samples reaching main"
fi

# A program profiled for its heap alone (no CPU profile, no dump) has no
# refresh but the heap sampler's, which must not wait: it keeps the tables
# it builds too, and the next run reads them.
churn=$CPROFTEST_BUILD/test/progs/plain_heap_churn
if sanitized_build "$prog"; then
  skip_check "a sanitizer's allocator serves a preloaded program: no heap sample"
else
  churn_id=$(readelf -n "$churn" | awk '/Build ID/ {print $3}')
  [ -n "$churn_id" ] || fail "the churn program has no build ID"
  heap_only() {
    env CPROF_DEBUG_CACHE="$cache" CPROF_UNWIND=cfi LD_PRELOAD="$CPROFTEST_BUILD/libcprof.so" \
      "$churn" 200000 2>"$TMP/heap_only.err" || fail "the heap-only run failed"
    [ -s "$TMP/heap_only.err" ] && fail "the heap-only run printed: $(cat "$TMP/heap_only.err")"
    true
  }
  heap_only
  [ -f "$cache/$churn_id.cfi" ] || fail "a heap-only run kept no entry for its program ($(ls "$cache"))"
  [ "$(stat -c %a "$cache/$churn_id.cfi")" = 600 ] || fail "the heap-only entry is not 0600"
  checks=$((checks + 1))
  echo "ok: a heap-only run keeps its program's table"
  inode=$(stat -c %i "$cache/$churn_id.cfi")
  heap_only
  [ "$(stat -c %i "$cache/$churn_id.cfi")" = "$inode" ] || fail "the second heap-only run wrote the entry again"
  checks=$((checks + 1))
  echo "ok: the next heap-only run reads it"
fi
finish
