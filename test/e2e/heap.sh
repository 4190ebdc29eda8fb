#!/usr/bin/env bash
# The heap and allocs profiles end to end: malloc interposed (linked and
# preloaded) -> sampled stacks -> pprof and Go's debug=1 text, read back by
# go tool pprof. Known live sets: hold_pages() keeps 80 MiB in 4 KiB
# objects, hold_records() 20 MiB in 100-byte objects, churn() allocates
# 64 MiB and frees it all.
source "$(dirname "$0")/lib.bash"

# site_bytes TOP_FILE FUNCTION: the flat bytes pprof shows for FUNCTION.
site_bytes() {
  awk -v f="$2" '$NF == f && $1 ~ /B$/ { v = $1; sub(/B$/, "", v); print v; exit }' "$1"
}

truth() { awk -v f="$2" '$1 == "truth" && $2 == f { print $3 }' "$1"; }

# within LABEL GOT WANT PERCENT
within() {
  local label=$1 got=$2 want=$3 pct=$4
  [ -n "$got" ] || fail "$label: no value"
  if awk -v g="$got" -v w="$want" -v p="$pct" 'BEGIN { d = (g - w) / w * 100; if (d < 0) d = -d; exit !(d <= p) }'; then
    checks=$((checks + 1))
    echo "ok: $label: $got vs truth $want (within $pct%)"
  else
    fail "$label: $got vs truth $want (not within $pct%)"
  fi
}

# check_profiles LABEL PREFIX TRUTH_FILE EXACT: EXACT=1 when every
# allocation was sampled (CPROF_HEAP_RATE=1).
check_profiles() {
  local label=$1 prefix=$2 truthf=$3 exact=$4
  pprof -sample_index=inuse_space -top -lines "$prefix.heap.pb.gz" >"$TMP/lines.txt"
  expect_match "$TMP/lines.txt" 'hold_pages .*heap_live\.c:[0-9]+$' "$label: hold_pages with file:line"
  expect_match "$TMP/lines.txt" 'hold_records .*heap_live\.c:[0-9]+$' "$label: hold_records with file:line"
  expect_match "$TMP/lines.txt" '^Type: inuse_space$' "$label: heap defaults to inuse_space"
  pprof -sample_index=inuse_space -top -unit=B -nodecount=100 "$prefix.heap.pb.gz" >"$TMP/top.txt"
  expect_no_match "$TMP/top.txt" ' churn$' "$label: churn holds nothing live"
  local pages records churn
  pages=$(site_bytes "$TMP/top.txt" hold_pages)
  records=$(site_bytes "$TMP/top.txt" hold_records)
  pprof -top -unit=B -nodecount=100 "$prefix.allocs.pb.gz" >"$TMP/allocs.txt"
  expect_match "$TMP/allocs.txt" '^Type: alloc_space$' "$label: allocs defaults to alloc_space"
  churn=$(site_bytes "$TMP/allocs.txt" churn)
  if [ "$exact" = 1 ]; then
    within "$label: hold_pages inuse" "$pages" "$(truth "$truthf" hold_pages)" 0
    within "$label: hold_records inuse" "$records" "$(truth "$truthf" hold_records)" 0
    within "$label: churn allocated" "$churn" "$(truth "$truthf" churn_alloc)" 0
  else
    # One run at the default rate has a relative standard deviation of
    # 1/sqrt(bytes / rate): 8% for 80 MiB, 16% for 20 MiB, 9% for 64 MiB.
    # The bounds are five of them, so the check fails only when the
    # estimator is broken (bench/heap.sh measures the accuracy).
    within "$label: hold_pages inuse" "$pages" "$(truth "$truthf" hold_pages)" 40
    within "$label: hold_records inuse" "$records" "$(truth "$truthf" hold_records)" 80
    within "$label: churn allocated" "$churn" "$(truth "$truthf" churn_alloc)" 45
  fi
  pprof -tags "$prefix.heap.pb.gz" >"$TMP/tags.txt"
  expect_match "$TMP/tags.txt" '^ *bytes: Total' "$label: numeric bytes label"
  expect_match "$TMP/tags.txt" ': 4kB$' "$label: 4 KiB objects labelled 4kB"
  pprof -raw "$prefix.heap.pb.gz" >"$TMP/raw.txt"
  expect_match "$TMP/raw.txt" '^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes$' "$label: Go's four sample types in order"
  expect_match "$TMP/raw.txt" '^PeriodType: space bytes$' "$label: period type space/bytes"
  for kind in heap allocs; do
    local txt="$prefix.$kind.txt"
    expect_match "$txt" '^heap profile: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] @ heap/[0-9]+$' "$label: $kind debug=1 header"
    expect_match "$txt" '^[0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] @( 0x[0-9a-f]+)+$' "$label: $kind debug=1 record"
    expect_match "$txt" $'^#\t0x[0-9a-f]+\t+hold_pages\\+0x[0-9a-f]+\t+/.*heap_live\\.c:[0-9]+$' "$label: $kind debug=1 frame line"
    expect_match "$txt" '^# Arena = [0-9]+$' "$label: $kind mallinfo2 trailer"
    expect_match "$txt" '^# MaxRSS = [0-9]+$' "$label: $kind MaxRSS trailer"
  done
}

prog=$CPROFTEST_BUILD/test/progs/heap_live
"$prog" "$TMP/linked" >"$TMP/linked.truth"
check_profiles linked "$TMP/linked" "$TMP/linked.truth" 0
expect_match "$TMP/linked.heap.txt" '@ heap/1048576$' "linked: header rate is twice the sampling rate"
CPROF_HEAP_RATE=1 "$prog" "$TMP/exact" >"$TMP/exact.truth"
check_profiles "linked, rate 1" "$TMP/exact" "$TMP/exact.truth" 1
expect_match "$TMP/exact.heap.txt" '@ heap/2$' "rate 1: header rate"

# Preloaded. A sanitizer runtime preloaded ahead of cprof keeps malloc for
# itself, so the preloaded checks need a build without sanitizers.
plain=$CPROFTEST_BUILD/test/progs/plain_heap_live
env=$(preload_env "$plain")
if [ "$env" = "$CPROFTEST_BUILD/libcprof.so" ]; then
  LD_PRELOAD=$env "$plain" "$TMP/pre" >"$TMP/pre.truth"
  check_profiles preloaded "$TMP/pre" "$TMP/pre.truth" 0
  CPROF_HEAP_RATE=1 LD_PRELOAD=$env "$plain" "$TMP/pre1" >"$TMP/pre1.truth"
  check_profiles "preloaded, rate 1" "$TMP/pre1" "$TMP/pre1.truth" 1
else
  echo "skip: preloaded checks (a sanitizer runtime owns malloc)"
fi

# C++: operator new's caller is on the stack. Sanitizers bring their own
# operator new, which does not go through malloc.
cxx=$CPROFTEST_BUILD/test/progs/heap_cxx
if ! sanitized_build "$cxx"; then
  CPROF_HEAP_RATE=1 "$cxx" "$TMP/cxx.pb.gz"
  pprof -sample_index=inuse_space -top -lines "$TMP/cxx.pb.gz" >"$TMP/cxx.txt"
  expect_match "$TMP/cxx.txt" 'make_nodes\(int\) .*heap_cxx\.cc:[0-9]+$' "C++: make_nodes with file:line"
  pprof -sample_index=inuse_space -traces "$TMP/cxx.pb.gz" >"$TMP/cxx_traces.txt"
  # cprof's operator new is the one the program calls: the stack starts at
  # its caller, as a malloc sample's starts at malloc's.
  expect_match "$TMP/cxx_traces.txt" '^ +1(\.0[0-9])?MB +\(anonymous namespace\)::make_nodes\(int\)$' \
    "C++: 1 MB live, the stack starting at make_nodes, the caller of new"
  expect_no_match "$TMP/cxx_traces.txt" 'operator new' "C++: no operator new frame"
else
  echo "skip: C++ checks (the sanitizer's operator new bypasses malloc)"
fi
finish
