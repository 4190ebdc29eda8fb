#!/usr/bin/env bash
# Busy threads are never cut short either. Four workers alternate 200 us
# CPU bursts with 0.5-1 ms waits in poll, nanosleep, epoll_wait and
# select, so that cprof often sees them running just before they wait:
# the case where a signal sent to a thread seen running can land in its
# wait. Under a 3-second wall profile (100 Hz with perf events, the
# default 20 Hz without) and goroutine requests
# (debug 0, 1, 2) every few milliseconds, no call returns EINTR, both
# with perf events (where the kernel allows them) and with
# CPROF_PERF_EVENTS=0 (a timer on the thread's own CPU clock); the wall
# profile's running samples are in busy_burst far more than its share of
# the workers' wall time, measured against the shares of their wall and CPU
# time the workers themselves clocked in it. The control: the program
# sending cprof's signal itself every 2 ms cuts calls short, and the
# handler counts them.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/busy_eintr

# run NAME SECONDS [kick|seccomp]: runs the program, with the requests
# unless kicking; its output in $TMP/NAME.out.
run() {
  local name=$1 secs=$2 mode=${3:-}
  local kick=
  [ "$mode" = kick ] && kick=1
  "$prog" "$secs" $mode >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local pid=$!
  track "$pid"
  for _ in $(seq 200); do
    [ -s "$TMP/$name.out" ] && break
    sleep 0.05
  done
  local port
  port=$(head -1 "$TMP/$name.out")
  [ -n "$port" ] || { cat "$TMP/$name.err"; fail "$name: busy_eintr did not start"; }
  if [ -z "$kick" ]; then
    local url=http://127.0.0.1:$port/debug/pprof
    curl -sf -o "$TMP/$name.wall.pb.gz" "$url/wall?seconds=3&hz=$WALL_HZ" &
    local wall=$!
    local n=0
    while kill -0 "$wall" 2>/dev/null; do
      for d in 0 1 2; do
        curl -sf -o /dev/null "$url/goroutine?debug=$d" || fail "$name: goroutine?debug=$d failed"
        n=$((n + 1))
      done
    done
    wait "$wall" || fail "$name: the wall profile failed"
    echo "$name: $n goroutine requests during the wall window"
  fi
  wait "$pid" || { cat "$TMP/$name.err"; fail "$name: busy_eintr exited with an error"; }
  cat "$TMP/$name.out"
}

# check_quiet NAME PART: no EINTR, and busy_burst holds more of the
# wall profile's running samples than a sampler blind to whether a thread
# runs would give it. Such a sampler would find busy_burst in its share of
# the workers' wall time (burst_wall, about a fifth); one that samples
# only where threads run finds it in its share of their CPU time
# (burst_cpu, by their own clocks, nine tenths or more). The floor is
# PART per cent of the way from the first to the second (or, under TSan,
# the fixed floor $tsan_floor_NAME): both ends are read from the run, so
# the floor follows the machine's syscall costs and load.
check_quiet() {
  local name=$1 part=$2
  local calls
  calls=$(sed -n 's/^calls=\([0-9]*\) .*/\1/p' "$TMP/$name.out")
  [ "${calls:-0}" -ge 1000 ] || fail "$name: only ${calls:-0} calls made"
  expect_match "$TMP/$name.out" '^calls=[0-9]+ eintr=0$' "$name: none of $calls calls returned EINTR"
  expect_match "$TMP/$name.out" ' interrupted=0$' "$name: the handler cut no system call short"
  # Each goroutine request comes on a new connection, served by a new
  # thread of cprof's HTTP server: none is ever in the profile, not even
  # one seen starting or ending.
  pprof -tags "$TMP/$name.wall.pb.gz" >"$TMP/$name.tags.txt"
  expect_no_match "$TMP/$name.tags.txt" 'MHD|cprof-' "$name: no thread of cprof's in the wall profile"
  pprof -tagfocus state=running -top "$TMP/$name.wall.pb.gz" >"$TMP/$name.running.txt"
  # busy_burst's share of the workers' running samples (cum%, the 5th
  # column, of busy_burst over worker's).
  local share
  share=$(awk '$6 == "busy_burst" || $6 == "worker" {sub("%", "", $5); v[$6] = $5}
               END {if (v["worker"] > 0) print int(100 * v["busy_burst"] / v["worker"])}' "$TMP/$name.running.txt")
  local own wall min
  own=$(sed -n 's/^burst_cpu=\([0-9]*\) .*/\1/p' "$TMP/$name.out")
  wall=$(sed -n 's/^burst_wall=\([0-9]*\) .*/\1/p' "$TMP/$name.out")
  [ -n "$own" ] && [ -n "$wall" ] || fail "$name: the program did not report its CPU and wall split"
  echo "$name: the workers' own clocks: $(grep '^burst_cpu=' "$TMP/$name.out"); $(grep '^burst_wall=' "$TMP/$name.out") (per cent in busy_burst, then milliseconds)"
  min=$((wall + (own - wall) * part / 100))
  if tsan_build "$prog"; then
    local floor_var=tsan_floor_$name
    min=${!floor_var}
  fi
  [ "${share:-0}" -ge "$min" ] || { cat "$TMP/$name.running.txt"; fail "$name: busy_burst has ${share:-0}% of the running samples, expected $min% or more ($part% of the way from its share of the workers' wall time, $wall%, to its share of their CPU time, $own%)"; }
  checks=$((checks + 1))
  echo "ok: $name: busy_burst holds $share% of the wall profile's running samples ($wall% of the workers' wall time, $own% of their CPU time, floor $min%)"
}

# How far up from the wall share the running samples must be. With perf
# events the sample is taken in the thread's next 20 us on a CPU, so it
# lands where the thread runs: measured 92-99% of the running samples
# against 92-94% by the workers' clocks on one machine (idle, with a CPU
# hog on each of two CPUs, and on one CPU shared with a hog, plain and
# ASan), and 62-68% against 83-87% (13-14% of their wall time) on
# another whose system calls cost more around the waits: 66-75% of the
# way up. With the timer, the signal comes at a scheduler tick that finds
# the thread running (every 4 ms at HZ=250, while the workers run about a
# fifth of the time), so a thread often blocks first and is read in its
# wait: 51-73% against 93-94%, 64-70% against 87%: 42-68% of the way. Under
# ThreadSanitizer the workers spend much of their CPU time in its
# interceptors around the waits (39-60% of the running samples with perf
# events in suite runs, not set against the workers' clocks): fixed
# floors there.
part_perf=50 part_timer=30
tsan_floor_perf=30 tsan_floor_timer=15
WALL_HZ=100 run perf 4
if grep -q '^stats perf=[1-9]' "$TMP/perf.out"; then
  check_quiet perf "$part_perf"
  echo "ok: running threads were sampled by perf events"
else
  echo "note: perf events are refused here (kernel.perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)); only the timer path is checked"
fi
CPROF_PERF_EVENTS=0 WALL_HZ=20 run timer 4
expect_match "$TMP/timer.out" '^stats perf=0 signalled=[1-9]' "CPROF_PERF_EVENTS=0: running threads were asked for the signal"
check_quiet timer "$part_timer"
# Under a seccomp filter (whose action for a call it does not list could
# be to kill the process) perf events are not tried; timer_create is, once
# a child process under the same filter has shown it allowed (this one
# allows everything: docs/cpu.md#signals).
WALL_HZ=20 run seccomp 4 seccomp
expect_match "$TMP/seccomp.out" '^stats perf=0 signalled=[1-9]' "under a seccomp filter that allows timer_create, perf events are not tried; the timer's signal is used"
expect_match "$TMP/seccomp.out" '^calls=[0-9]+ eintr=0$' "under a seccomp filter: no call returned EINTR"
run kick 2 kick
expect_match "$TMP/kick.out" '^calls=[0-9]+ eintr=[1-9]' "control: cprof's signal sent every 2 ms cuts calls short"
expect_match "$TMP/kick.out" ' interrupted=[1-9]' "control: and the handler counts them"
finish
