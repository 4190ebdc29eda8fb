#!/usr/bin/env bash
# The CPU profile end to end: per-thread timers, the signal handler, the
# thread label, and the refusals (second start, the program's own SIGPROF
# handler), fork, and short-lived threads; read back by go tool pprof.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/cpuburn

"$prog" profile 1000 >"$TMP/cpu.pb.gz"
pprof -raw "$TMP/cpu.pb.gz" >"$TMP/raw.txt"
expect_match "$TMP/raw.txt" '^PeriodType: cpu nanoseconds$' "period type cpu/nanoseconds"
expect_match "$TMP/raw.txt" '^Period: 1000000$' "period 1e9/hz"
expect_match "$TMP/raw.txt" '^samples/count cpu/nanoseconds$' "sample types"
expect_match "$TMP/raw.txt" '^Duration: ' "duration set"
pprof -top -lines "$TMP/cpu.pb.gz" >"$TMP/top.txt"
expect_match "$TMP/top.txt" ' burn_alpha .*cpuburn\.c:[0-9]+$' "burn_alpha with file:line"
expect_match "$TMP/top.txt" ' burn_beta .*cpuburn\.c:[0-9]+$' "burn_beta with file:line"
pprof -top "$TMP/cpu.pb.gz" >"$TMP/top.txt"
# Total CPU is ~1.2 s on two threads; alpha gets about 2/3 of it.
alpha=$(awk '$6 == "burn_alpha" {sub(/%/, "", $2); print $2}' "$TMP/top.txt")
beta=$(awk '$6 == "burn_beta" {sub(/%/, "", $2); print $2}' "$TMP/top.txt")
awk -v a="$alpha" -v b="$beta" 'BEGIN { exit !(a > 50 && a < 80 && b > 20 && b < 45) }' ||
  fail "alpha/beta split $alpha/$beta is not about 2:1"
echo "ok: alpha $alpha% / beta $beta% of samples"
pprof -tags "$TMP/cpu.pb.gz" >"$TMP/tags.txt"
expect_match "$TMP/tags.txt" 'alpha' "thread label names the alpha thread"
expect_match "$TMP/tags.txt" 'main-burner' "thread label names the main thread"
pprof -top -tagfocus=thread=alpha "$TMP/cpu.pb.gz" >"$TMP/focus.txt"
expect_match "$TMP/focus.txt" 'burn_alpha' "-tagfocus by thread works"

"$prog" busy 2>"$TMP/busy.txt" || fail "second start was not refused as busy"
expect_match "$TMP/busy.txt" 'second start: cpu profiling already in use' "Go's text for a second start"
# samples_total PROFILE: the profile's sample count, from pprof -raw.
samples_total() {
  pprof -raw "$1" | awk '/^Samples:/ {on=1; getline; next} on && /^ *[0-9]+ / {n += $1} /^Locations/ {on=0} END {print n + 0}'
}
# The program's own SIGPROF handler, installed before cprof starts: cprof
# profiles on another signal and the handler receives nothing of cprof's.
"$prog" ownsig >"$TMP/own.pb.gz" 2>"$TMP/own.txt" ||
  { cat "$TMP/own.txt"; fail "cprof's signals reached the program's SIGPROF handler"; }
expect_match "$TMP/own.txt" '^handler kept, its SIGPROFs 0, cpu ' "the program keeps SIGPROF and gets none of cprof's signals"
expect_no_match "$TMP/own.txt" '^cprof:' "no refusal when the program owns SIGPROF"
pprof -top "$TMP/own.pb.gz" >"$TMP/own_top.txt"
expect_match "$TMP/own_top.txt" ' burn_alpha$' "the profile is taken on another signal"
# The program takes SIGPROF while cprof profiles: its handler gets only
# its own signals, and the profile goes on, all of its CPU time sampled.
"$prog" steal >"$TMP/steal.pb.gz" 2>"$TMP/steal.err" || { cat "$TMP/steal.err"; fail "the program's own profiler after cprof's"; }
expect_no_match "$TMP/steal.err" '^cprof:' "no line on stderr when the program takes SIGPROF: cprof moved"
read -r own cprofs cpu < <(sed -nE 's/^own ([0-9]+), cprof.s ([0-9]+), cpu ([0-9.]+)$/\1 \2 \3/p' "$TMP/steal.err")
[ -n "$own" ] || { cat "$TMP/steal.err"; fail "no counts from the steal run"; }
[ "$own" -ge 10 ] && [ "$cprofs" -eq 0 ] ||
  fail "the program's handler got $own of its own signals and $cprofs of cprof's"
checks=$((checks + 1))
echo "ok: the program's own SIGPROF profiler gets its $own signals and none of cprof's"
n=$(samples_total "$TMP/steal.pb.gz")
# At 1000 Hz one sample a millisecond of CPU; a margin for the moment
# the timers move and for the ticks that fall between two periods.
awk -v n="$n" -v cpu="$cpu" 'BEGIN { exit !(n >= cpu * 1000 * 0.8) }' ||
  fail "the profile has $n samples for ${cpu}s of CPU at 1000 Hz"
checks=$((checks + 1))
echo "ok: $n samples for ${cpu}s of CPU at 1000 Hz across the move"
# While a CPU profile runs, cprof's scanner thread makes the process
# multi-threaded, and the child starts one of its own when it profiles:
# ThreadSanitizer kills such a child unless told not to (its
# die_after_fork=1), as for children_fork's dumpers.
tsan_build "$prog" &&
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"
"$prog" fork || fail "fork while profiling"
echo "ok: fork while profiling (parent and child)"
checks=$((checks + 1))

"$prog" threads 1000 >"$TMP/threads.pb.gz"
pprof -tags "$TMP/threads.pb.gz" >"$TMP/ttags.txt"
# One "thread_id" tag line per sampled thread, the main thread included.
threads=$(awk '/thread_id:/ {on=1; next} on && /^ *[0-9.]+[mun]?s / {n++} on && /^ *$/ {on=0} END {print n - 1}' "$TMP/ttags.txt")
[ "$threads" -ge 18 ] || { cat "$TMP/ttags.txt"; fail "only $threads of 20 short threads were sampled"; }
echo "ok: $threads of 20 short-lived threads sampled"
checks=$((checks + 1))
finish
