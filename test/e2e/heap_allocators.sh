#!/usr/bin/env bash
# C++ allocations whichever allocator provides operator new: glibc's malloc
# under libstdc++'s operator new, jemalloc's and tcmalloc's own operator
# new (preloaded; they never reach malloc). A C++ program built as
# distributions build them allocates through every kind of new (plain,
# array, aligned, nothrow, aligned nothrow), frees part of it with the
# matching delete (sized, array, aligned, nothrow) and prints what stays
# live; the exit dump's in-use total must be within the sampling error of
# that truth, each call site of new within its own, and every stack must
# start at the caller of new. A linked program checks the rest: one sample
# per allocation although libstdc++'s operator new calls malloc, and
# std::bad_alloc thrown through cprof's operator new on the sampled and the
# unsampled path.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/nofp_heap_new
linked=$CPROFTEST_BUILD/test/progs/cxx_new_throw
rate=65536

# lib NAME: the path of a shared library of the system's.
lib() {
  local f
  for f in /usr/lib/*/"$1" /usr/lib/"$1" /lib/*/"$1"; do
    [ -e "$f" ] && { echo "$f"; return; }
  done
  fail "$1 is not installed (scripts/deps.sh installs it)"
}
jemalloc=$(lib libjemalloc.so.2)
tcmalloc=$(lib libtcmalloc.so.4)

# The linked program over libstdc++'s operator new (which calls malloc),
# then over jemalloc's and tcmalloc's (which do not).
if sanitized_build "$linked"; then
  echo "skip: linked checks (the sanitizer's allocator ignores RLIMIT_AS and aborts)"
else
  for pair in "libstdc++:" "jemalloc:$jemalloc" "tcmalloc:$tcmalloc"; do
    name=${pair%%:*}
    LD_PRELOAD="${pair#*:}" "$linked" "$TMP/throw-$name.pb.gz" >"$TMP/throw-$name.out" ||
      { cat "$TMP/throw-$name.out"; fail "cxx_new_throw failed over $name"; }
    expect_match "$TMP/throw-$name.out" '^ok: unsampled: the countdown is back' \
      "$name: bad_alloc through the unsampled path gives the countdown back"
    expect_match "$TMP/throw-$name.out" '^ok: sampled: the countdown is back' \
      "$name: bad_alloc through the sampled path gives the countdown back"
    pprof -sample_index=inuse_space -top -unit=B "$TMP/throw-$name.pb.gz" >"$TMP/throw-$name.top"
    expect_match "$TMP/throw-$name.top" '^ +256000B +100% .*keep_nodes' \
      "$name: rate 1: 1000 new Node of 256 bytes are 256000 bytes, counted once"
  done
fi

if sanitized_build "$prog"; then
  skip_rest "preloaded runs (the sanitizer's operator new comes first)"
fi

# The twenty functions of the Itanium ABI, and libgcc_s for the cleanup
# that restores a held countdown when an exception passes.
n=$(nm -D --defined-only "$CPROFTEST_BUILD/libcprof.so" | grep -cE ' T _Z(nw|na|dl|da)[mP]')
[ "$n" -eq 20 ] || { nm -D --defined-only "$CPROFTEST_BUILD/libcprof.so" | grep -E ' _Z(nw|na|dl|da)'; fail "libcprof.so exports $n operator new and delete functions, not 20"; }
checks=$((checks + 1))
echo "ok: libcprof.so exports the 20 operator new and delete functions"
readelf -d "$CPROFTEST_BUILD/libcprof.so" >"$TMP/dynamic.txt"
expect_match "$TMP/dynamic.txt" 'NEEDED.*libgcc_s\.so\.1' "libcprof.so needs libgcc_s.so.1"

# No C++ runtime behind cprof's operator new: malloc and free underneath,
# sampled as malloc is; a nothrow new that fails returns NULL; a throwing
# one ends the program with one line.
none=$CPROFTEST_BUILD/test/progs/plain_new_none
CPROF_HEAP_RATE=1 "$cprof" run --dump heap --dump-out "$TMP/none.log" -- "$none" ok >"$TMP/none.out" ||
  fail "plain_new_none ok failed"
expect_match "$TMP/none.out" '^ok$' "no C++ runtime: new, delete and a failing nothrow new work"
"$cprof" extract -o "$TMP/none" "$TMP/none.log" >/dev/null
pprof -sample_index=inuse_space -top -unit=B "$TMP"/none/heap-*.pb.gz >"$TMP/none.top"
expect_match "$TMP/none.top" '^ +100000B .* alloc_through_new$' "no C++ runtime: new is sampled as malloc"
set +e
(cd "$TMP" && exec "$cprof" run -- "$none" fail) >"$TMP/fail.out" 2>"$TMP/fail.err"
rc=$?
set -e
[ "$rc" -eq 134 ] || { cat "$TMP/fail.out" "$TMP/fail.err"; fail "a failing throwing new without a C++ runtime exited $rc, not 134 (SIGABRT)"; }
expect_match "$TMP/fail.err" '^cprof: operator new: out of memory, and no C\+\+ runtime to throw std::bad_alloc$' \
  "no C++ runtime: a failing throwing new ends the program with one line"

# within GOT TRUTH SDS: |GOT - TRUTH| is at most SDS standard deviations of
# a heap profile's estimate of TRUTH bytes, sqrt(TRUTH * rate).
within() {
  awk -v g="$1" -v t="$2" -v k="$3" -v r="$rate" \
    'BEGIN { sd = sqrt(t * r); exit !((g - t) <= k * sd && (t - g) <= k * sd) }'
}

# run NAME PRELOAD: runs the program with PRELOAD (may be empty) after
# libcprof.so and checks its heap profile against what it printed.
run() {
  local name=$1 pre=$2 dir=$TMP/$1
  LD_PRELOAD="$pre" CPROF_HEAP_RATE=$rate "$cprof" run --dump heap --dump-out "$TMP/$name.log" -- \
    "$prog" >"$TMP/$name.out" || fail "$name: the program failed"
  "$cprof" extract -o "$dir" "$TMP/$name.log" >/dev/null
  local prof
  prof=$(ls "$dir"/heap-*.pb.gz)
  [ "$(echo "$prof" | wc -l)" -eq 1 ] || fail "$name: expected one heap profile, got: $prof"
  pprof -sample_index=inuse_space -top -unit=B "$prof" >"$TMP/$name.top"
  pprof -sample_index=inuse_space -traces "$prof" >"$TMP/$name.traces"
  # The vector keeping the objects is freed by its destructor before the
  # exit dump: the truth is the objects alone.
  local truth got
  truth=$(awk '$1 == "live" && $2 != "total" && $2 != "keep" { s += $3 } END { print s }' "$TMP/$name.out")
  got=$(sed -nE 's/.* of ([0-9]+)B total$/\1/p' "$TMP/$name.top")
  [ -n "$got" ] || { cat "$TMP/$name.top"; fail "$name: no total in the profile"; }
  echo "$name: in use $got bytes, truth $truth ($(awk -v g="$got" -v t="$truth" 'BEGIN { printf "%+.1f%%", (g - t) * 100 / t }'), sd $(awk -v t="$truth" -v r="$rate" 'BEGIN { printf "%.1f%%", sqrt(t * r) * 100 / t }'))"
  within "$got" "$truth" 4 || { cat "$TMP/$name.top"; fail "$name: in-use total $got is not within 4 sd of $truth"; }
  checks=$((checks + 1))
  echo "ok: $name: in-use total within 4 standard deviations of the truth"
  local site bytes flat
  while read -r site bytes; do
    flat=$(awk -v s="$site" '$NF ~ "::" s "\\(int\\)" || $(NF-2) ~ "::" s "\\(int\\)" { sub(/B$/, "", $1); print $1; exit }' "$TMP/$name.top")
    [ -n "$flat" ] || { cat "$TMP/$name.top"; fail "$name: no $site in the profile"; }
    within "$flat" "$bytes" 5 || { cat "$TMP/$name.top"; fail "$name: $site has $flat bytes in use, not within 5 sd of $bytes"; }
    checks=$((checks + 1))
    echo "ok: $name: $site: $flat bytes in use, truth $bytes"
  done < <(awk '$1 == "live" && $2 ~ /^alloc_/ { print $2, $3 }' "$TMP/$name.out")
  expect_no_match "$TMP/$name.traces" 'operator new' "$name: every stack starts at the caller of new"
}

run glibc ""
run jemalloc "$jemalloc"
run tcmalloc "$tcmalloc"
# An operator new of another library's, over malloc: cprof's malloc sees
# its allocations too, and each must still count once.
run newmalloc "$CPROFTEST_BUILD/test/progs/libnewmalloc.so"
finish
