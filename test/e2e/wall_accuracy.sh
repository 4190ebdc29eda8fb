#!/usr/bin/env bash
# The wall-clock profile's accuracy (docs/wall.md), read by go tool pprof:
# test/progs/wall_mix's workers split their time, by their own clock,
# between CPU work, poll, nanosleep and a mutex wait; the profile's share
# of each phase function (and of the state labels running, poll,
# clock_nanosleep, futex) is within 3 points of it; every sample has the
# state, thread and the worker's cprof labels. It runs alone (RUN_SERIAL
# in test/CMakeLists.txt): another test's CPU work would make the sampler
# late, which moves samples between phases (docs/wall.md).
source "$(dirname "$0")/lib.bash"
mix=$CPROFTEST_BUILD/test/progs/wall_mix
# 100 Hz for 10 s (2,000 samples of two workers) keeps the
# sampling error (about 1 point) well inside the 3 allowed.
CPROF_WALL_HZ=100 "$mix" "$TMP/mix.pb.gz" 10 2 >"$TMP/truth.txt" 2>"$TMP/mix.err" ||
  { cat "$TMP/mix.err"; fail "wall_mix failed"; }
cat "$TMP/truth.txt"
pprof -traces "$TMP/mix.pb.gz" >"$TMP/traces.txt"
awk -f "$(dirname "$0")/wall_shares.awk" "$TMP/traces.txt" >"$TMP/shares.txt" ||
  { cat "$TMP/traces.txt"; fail "no worker samples in the wall profile"; }
cat "$TMP/shares.txt"
pprof -raw "$TMP/mix.pb.gz" >"$TMP/raw.txt"
expect_match "$TMP/raw.txt" '^samples/count wall/nanoseconds\[dflt\]$' "sample types samples/count and wall/nanoseconds (the default)"
expect_match "$TMP/raw.txt" '^Period: 10000000$' "period 1/hz (10 ms at CPROF_WALL_HZ=100)"
pprof -tags "$TMP/mix.pb.gz" >"$TMP/tags.txt"
expect_match "$TMP/tags.txt" '^ *worker: Total' "the workers' cprof labels are on their samples"
expect_match "$TMP/tags.txt" '^ *state: Total' "samples have a state label"
expect_match "$TMP/tags.txt" '^ *thread: Total' "samples have a thread label"
# On a machine whose CPUs are all taken by other jobs, two things move
# samples out of the CPU phase: the sampler looks late, and a worker that
# was preempted at the end of its CPU work blocks in its next wait before
# it has run the 20 us its answer needs, so it is read in that wait
# (docs/wall.md). The profile's comment gives the ticks' mean lateness;
# the 3-point bound holds for a sampler that runs on time (under 150 us
# late on average), and a 10-point one, against gross errors, otherwise;
# 15 under a sanitizer, whose slower workers wait longer for a CPU after
# each wake-up (the program counts that as its wait, the kernel shows the
# thread runnable: running).
late=$(sed -nE 's/^Comment: .*late by ([0-9]+) us on average.*/\1/p' "$TMP/raw.txt")
[ -n "$late" ] || fail "no lateness in the profile's comment"
bound=3
if [ "$late" -ge 150 ]; then
  # Measured beside two CPU-bound processes: CPU work 9.5 to 12.2 points
  # low (docs/wall.md).
  bound=15
  echo "note: the sampler ran ${late} us late on average (CPUs busy with other work: $(cut -d' ' -f1-3 /proc/loadavg)); checking within $bound points, not 3"
fi
# Without perf events (refused, CPROF_PERF_EVENTS=0, a seccomp filter), a
# running thread answers at its next scheduler tick on a CPU, and the
# workers' 200 us-scale CPU bursts often end before it: CPU work was 12 to
# 15 points low, idle and loaded (docs/wall.md); the bound is then one
# against gross errors.
if grep -q '^Comment: .*running threads sampled by a signal' "$TMP/raw.txt"; then
  bound=20
  echo "note: running threads were asked by a signal, not sampled by perf events; checking within $bound points"
fi
# share NAME KIND KEY: compares the profile's share (KIND KEY in
# shares.txt) with the program's (NAME= in truth.txt).
share() {
  local name=$1 kind=$2 key=$3 truth got
  truth=$(sed -E "s/.*$name=([0-9.]+).*/\\1/" "$TMP/truth.txt")
  got=$(awk -v k="$kind" -v n="$key" '$1 == k && $2 == n { print $3 }' "$TMP/shares.txt")
  [ -n "$got" ] || got=0
  awk -v t="$truth" -v g="$got" -v b="$bound" 'BEGIN { d = g - 100 * t; exit !(d <= b && d >= -b) }' ||
    fail "$kind $key: $got% in the profile, $(awk -v t="$truth" 'BEGIN { printf "%.1f", 100 * t }')% measured"
  checks=$((checks + 1))
  echo "ok: $kind $key $got% vs $(awk -v t="$truth" 'BEGIN { printf "%.1f", 100 * t }')% measured (within $bound points)"
}
share cpu func phase_cpu
share poll func phase_poll
share sleep func phase_sleep
share lock func phase_lock
share poll state poll
share sleep state clock_nanosleep
share lock state futex
share cpu state running

finish
