#!/usr/bin/env bash
# `make demo`'s program (examples/demo.c) gives each profile it shows
# enough samples to read: its CPU profile, its live heap and its mutex
# profile each rest on at least 20 samples, and each names the demo's own
# function (crunch_numbers, remember).
source "$(dirname "$0")/lib.bash"
demo=$CPROFTEST_BUILD/examples/demo
[ -x "$demo" ] || fail "no demo program at $demo"
"$demo" -t 2 -o "$TMP/d" >"$TMP/demo.out" 2>"$TMP/demo.err" || { cat "$TMP/demo.err"; fail "the demo failed"; }

# total FILE COLUMN: the sum of a sample value column of pprof -raw.
total() {
  pprof -raw "$1" | awk -v c="$2" '/^Samples:/ {on=1; next} /^Locations/ {on=0} on && $1 ~ /^[0-9]+$/ {sub(/:$/, "", $c); s += $c} END {print s + 0}'
}

cpu=$(total "$TMP/d/cpu.pb.gz" 1)
echo "cpu: $cpu samples"
[ "$cpu" -ge 20 ] || fail "the CPU profile has $cpu samples, fewer than 20"
pprof -top "$TMP/d/cpu.pb.gz" >"$TMP/cpu.top"
expect_match "$TMP/cpu.top" '^ *[0-9.]+m?s +[0-9.]+% .* crunch_numbers$' "the CPU profile names crunch_numbers"

# The live heap, sampled every 128 KiB: at least 20 samples' worth. The
# demo links libcprof.so as a user would; in a sanitizer build the
# sanitizer's runtime, loaded first, owns malloc.
if sanitized_build "$demo"; then
  skip_check "the live heap (a sanitizer runtime, loaded before libcprof.so, owns malloc)"
else
  inuse=$(total "$TMP/d/heap.pb.gz" 4)
  echo "heap: $inuse bytes in use ($((inuse / 131072)) samples' worth at 128 KiB)"
  [ "$inuse" -ge $((20 * 131072)) ] || fail "the live heap holds $inuse bytes, fewer than 20 samples' worth"
  pprof -sample_index=inuse_space -top "$TMP/d/heap.pb.gz" >"$TMP/heap.top"
  expect_match "$TMP/heap.top" ' remember$' "the live heap is in remember"
  checks=$((checks + 1))
fi

# How often the workers collide depends on their speed: a sanitizer build
# runs them several times slower, and is held to one event.
events=$(total "$TMP/d/mutex.pb.gz" 1)
want=20
sanitized_build "$demo" && want=1
echo "mutex: $events contention events (at least $want wanted)"
[ "$events" -ge "$want" ] || fail "the mutex profile has $events events, fewer than $want"
pprof -top -sample_index=delay "$TMP/d/mutex.pb.gz" >"$TMP/mutex.top"
expect_match "$TMP/mutex.top" '^ *[0-9.]+[mun]?s +(100|9[0-9](\.[0-9]+)?)% .* remember$' "remember, which holds the lock, has 90% or more of the delay"
checks=$((checks + 2))
finish
