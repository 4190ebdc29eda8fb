#!/usr/bin/env bash
# Profile labels end to end (docs/labels.md): test/progs/labels_server
# serves two kinds of request on a pool of threads, each kind under its own
# labels, and measures per kind its CPU time, the bytes it allocated and its
# wait for a shared mutex. In the CPU, heap (allocs), mutex and block
# profiles each kind's share, as go tool pprof reads the labels, is within
# 3 points of the share the program measured; -tagfocus selects each kind
# alone and -tags lists both; labels the workers inherited from the thread
# that created them are on every sample.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/labels_server
mkdir -p "$TMP/out"
"$prog" "$TMP/out" >"$TMP/truth.txt"
truth() { sed -n "s/^$1=//p" "$TMP/truth.txt"; }
[ "$(truth inherited)" = 1 ] || fail "workers did not inherit the main thread's labels"
checks=$((checks + 1))
echo "ok: threads inherit their creator's labels"

# by_kind FILE INDEX [PPROF ARGS]: "api static other" sums of the INDEX-th
# value (from 1) of every sample, by its kind label.
by_kind() {
  local file=$1 idx=$2
  shift 2
  pprof -raw "$@" "$file" | awk -v idx="$idx" '
    /^Samples:/ {on = 1; getline; next}
    /^Locations/ {on = 0}
    !on {next}
    /^ *[0-9]+( +[0-9]+)*: / {
      if (have) sum[kind] += v
      split($0, f, ":"); n = split(f[1], vals, " "); v = vals[idx]; kind = "other"; have = 1; next
    }
    { if (match($0, /kind:\[[a-z]+\]/)) kind = substr($0, RSTART + 6, RLENGTH - 7) }
    END { if (have) sum[kind] += v; printf "%.0f %.0f %.0f\n", sum["api"], sum["static"], sum["other"] }'
}

# share_check WHAT FILE INDEX TRUTH_API TRUTH_STATIC
share_check() {
  local what=$1 file=$2 idx=$3 ta=$4 ts=$5 a s o
  read -r a s o < <(by_kind "$file" "$idx")
  awk -v a="$a" -v s="$s" -v ta="$ta" -v ts="$ts" 'BEGIN {
      if (a + s <= 0 || ta + ts <= 0) exit 1
      d = 100 * a / (a + s) - 100 * ta / (ta + ts); if (d < 0) d = -d; exit !(d <= 3) }' ||
    fail "$what: api share $a/($a+$s) vs measured $ta/($ta+$ts)"
  checks=$((checks + 1))
  echo "ok: $what: api share $(awk -v a="$a" -v s="$s" 'BEGIN {printf "%.1f%%", 100 * a / (a + s)}') in the profile, $(awk -v a="$ta" -v s="$ts" 'BEGIN {printf "%.1f%%", 100 * a / (a + s)}') measured (unlabelled: $o)"
  # -tagfocus keeps exactly one kind.
  for k in api static; do
    read -r fa fs fo < <(by_kind "$file" "$idx" -tagfocus="kind=$k")
    case $k in
      api) [ "$fa" = "$a" ] && [ "$fs" = 0 ] && [ "$fo" = 0 ] ;;
      static) [ "$fs" = "$s" ] && [ "$fa" = 0 ] && [ "$fo" = 0 ] ;;
    esac || fail "$what: -tagfocus=kind=$k kept api=$fa static=$fs other=$fo"
  done
  checks=$((checks + 1))
  echo "ok: $what: -tagfocus=kind=api and kind=static each select one kind"
  pprof -tags "$file" >"$TMP/tags.txt"
  expect_match "$TMP/tags.txt" '^ *kind: Total' "$what: -tags lists the kind key"
  expect_match "$TMP/tags.txt" '\): api$' "$what: -tags lists api"
  expect_match "$TMP/tags.txt" '\): static$' "$what: -tags lists static"
}

share_check cpu "$TMP/out/cpu.pb.gz" 2 "$(truth cpu_ns_api)" "$(truth cpu_ns_static)"
share_check allocs "$TMP/out/heap.pb.gz" 2 "$(truth alloc_bytes_api)" "$(truth alloc_bytes_static)"
share_check mutex "$TMP/out/mutex.pb.gz" 2 "$(truth wait_ns_api)" "$(truth wait_ns_static)"
share_check block "$TMP/out/block.pb.gz" 2 "$(truth wait_ns_api)" "$(truth wait_ns_static)"

# In-use bytes are split by the allocating thread's labels too (few live
# samples, so only both kinds' presence is checked).
read -r ia is io < <(by_kind "$TMP/out/heap.pb.gz" 4)
[ "$ia" -gt 0 ] && [ "$is" -gt 0 ] || fail "inuse_space not split by kind: api=$ia static=$is"
checks=$((checks + 1))
echo "ok: inuse_space split by kind (api $ia, static $is bytes sampled)"

# The inherited phase label is on every labelled CPU sample.
pprof -raw -tagfocus=kind=api "$TMP/out/cpu.pb.gz" >"$TMP/raw.txt"
expect_match "$TMP/raw.txt" 'kind:\[api\] phase:\[serve\]' "cpu samples carry the inherited phase label"
finish
