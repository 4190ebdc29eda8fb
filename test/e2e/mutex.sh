#!/usr/bin/env bash
# The mutex and block profiles end to end on four threads contending on one
# mutex at known sites, linked (API) and preloaded (environment): go tool
# pprof names the sites with file:line, the total delay is within 10% of the
# wait the program measured itself, and debug=1 is Go's text. Then a mutex
# released inside pthread_cond_timedwait (progs/mutex_cond.c): the thread
# that held it and waited on the condition is charged, not the stand-in for
# an unlock nobody saw.
source "$(dirname "$0")/lib.bash"
src=$CPROFTEST_SRC/test/progs/mutex_contend.c
lock_line=$(grep -n 'SITE:lock' "$src" | cut -d: -f1)
unlock_line=$(grep -n 'SITE:unlock' "$src" | cut -d: -f1)

# within10 LABEL PROFILE MEASURED: the profile's total delay is within 10%.
within10() {
  local label=$1 file=$2 measured=$3 total
  total=$(pprof -raw "$file" | awk '/^Samples:/ {on=1; next} /^Locations/ {on=0} on && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+:$/ {s += $2} END {print s + 0}')
  awk -v t="$total" -v m="$measured" 'BEGIN { exit !(m > 0 && t > 0.9 * m && t < 1.1 * m) }' ||
    fail "$label: profile delay $total ns vs measured $measured ns"
  checks=$((checks + 1))
  echo "ok: $label: delay $total ns vs measured $measured ns ($(awk -v t="$total" -v m="$measured" 'BEGIN {printf "%+.1f%%", (t / m - 1) * 100}'))"
}

check() {
  local label=$1 dir=$2 measured=$3
  pprof -raw "$dir/mutex.pb.gz" >"$TMP/raw.txt"
  expect_match "$TMP/raw.txt" '^contentions/count delay/nanoseconds$' "$label: sample types"
  expect_match "$TMP/raw.txt" '^PeriodType: contentions count$' "$label: period type"
  expect_match "$TMP/raw.txt" '^Period: 1$' "$label: period 1"
  pprof -top -lines -unit=ms -sample_index=delay "$dir/mutex.pb.gz" >"$TMP/mtop.txt"
  expect_match "$TMP/mtop.txt" "^ *[0-9.]+m?s +(100|9[0-9](\\.[0-9]+)?)% .* unlock_site .*mutex_contend\\.c:$unlock_line\$" "$label: mutex profile charges the unlock site (line $unlock_line)"
  pprof -top -lines -unit=ms -sample_index=delay "$dir/block.pb.gz" >"$TMP/btop.txt"
  expect_match "$TMP/btop.txt" "^ *[0-9.]+m?s +(100|9[0-9](\\.[0-9]+)?)% .* lock_site .*mutex_contend\\.c:$lock_line\$" "$label: block profile names the lock site (line $lock_line)"
  within10 "$label mutex" "$dir/mutex.pb.gz" "$measured"
  within10 "$label block" "$dir/block.pb.gz" "$measured"

  expect_match "$dir/mutex.txt" '^--- mutex:$' "$label: mutex debug=1 header"
  expect_match "$dir/mutex.txt" '^cycles/second=1000000000$' "$label: mutex cycles/second"
  expect_match "$dir/mutex.txt" '^sampling period=1$' "$label: mutex sampling period"
  expect_match "$dir/mutex.txt" '^[0-9]+ [0-9]+ @( 0x[0-9a-f]+)+$' "$label: mutex record line"
  expect_match "$dir/mutex.txt" $'^#\t0x[0-9a-f]+\t+unlock_site\\+0x[0-9a-f]+\t+/.*mutex_contend\\.c:[0-9]+$' "$label: mutex frame line"
  expect_match "$dir/block.txt" '^--- contention:$' "$label: block debug=1 header"
  expect_match "$dir/block.txt" '^cycles/second=1000000000$' "$label: block cycles/second"
  expect_no_match "$dir/block.txt" '^sampling period' "$label: no sampling period in block text"
  expect_match "$dir/block.txt" $'^#\t0x[0-9a-f]+\t+lock_site\\+0x[0-9a-f]+\t+/.*mutex_contend\\.c:[0-9]+$' "$label: block frame line"
  for f in mutex block; do
    awk '/ @ / {if (seen && $1 > last) bad = 1; last = $1; seen = 1} END {exit bad}' "$dir/$f.txt" ||
      fail "$label: $f records not sorted by delay"
  done
  checks=$((checks + 1))
  echo "ok: $label: records sorted by delay, descending"
}

# The holder's share of the delay, and the unattributed share, from the
# flat column of pprof -top in delay.
mkdir -p "$TMP/cond"
measured=$("$CPROFTEST_BUILD/test/progs/mutex_cond" "$TMP/cond" | sed -n 's/^measured_wait_ns=//p')
[ -n "$measured" ] || fail "mutex_cond wrote no measurement"
pprof -top -unit=ns -sample_index=delay "$TMP/cond/mutex.pb.gz" >"$TMP/ctop.txt"
share() { awk -v pat="$1" '$0 ~ pat {gsub(/%/, "", $2); s += $2} END {printf "%.2f\n", s + 0}' "$TMP/ctop.txt"; }
holder=$(share ' holder_site$')
unseen=$(share '\[cprof: unlocker not seen\]')
echo "cond: holder_site ${holder}%, [cprof: unlocker not seen] ${unseen}% of the delay (producers measured ${measured} ns)"
awk -v h="$holder" 'BEGIN { exit !(h >= 90) }' || { cat "$TMP/ctop.txt"; fail "cond: the holder has ${holder}% of the delay, under 90%"; }
awk -v u="$unseen" 'BEGIN { exit !(u < 5) }' || { cat "$TMP/ctop.txt"; fail "cond: ${unseen}% of the delay unattributed, 5% or more"; }
checks=$((checks + 2))
within10 "cond mutex" "$TMP/cond/mutex.pb.gz" "$measured"
expect_no_match "$TMP/ctop.txt" 'samples lost to a full stack table' "a profile that lost nothing has no comment about losses"

mkdir -p "$TMP/linked" "$TMP/preloaded"
measured=$("$CPROFTEST_BUILD/test/progs/mutex_contend" "$TMP/linked" | sed -n 's/^measured_wait_ns=//p')
check linked "$TMP/linked" "$measured"

plain=$CPROFTEST_BUILD/test/progs/plain_mutex_contend
tsan_build "$plain" && skip_rest "preloaded runs under TSan (see lib.bash)"
measured=$(CPROF_MUTEX_FRACTION=1 CPROF_BLOCK_RATE=1 LD_PRELOAD=$(preload_env "$plain") "$plain" "$TMP/preloaded" | sed -n 's/^measured_wait_ns=//p')
check preloaded "$TMP/preloaded" "$measured"
finish
