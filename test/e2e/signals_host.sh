#!/usr/bin/env bash
# The program's signals stay the program's while cprof profiles it
# (test/progs/sighost.c, docs/cpu.md#signals): resets of SIGPROF and of
# every signal, handlers installed through every libc call and the system
# call itself, waits for the full signal set, a watchdog on SIGPROF's
# default action, the thread sampler's signal taken and reset, a seccomp
# filter that kills on timer_create, exec from small stacks with large
# environments, and a coroutine stack too small for a walk. Each case killed the program, stopped it doing its job, or fed
# it cprof's signals before cprof moved off the signals programs take.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/sighost

"$prog" reset >"$TMP/reset.pb.gz" 2>"$TMP/reset.txt" ||
  { cat "$TMP/reset.txt"; fail "resetting SIGPROF and every signal while cprof profiles killed the program (status $?)"; }
expect_match "$TMP/reset.txt" '^survived the resets$' "signal(SIGPROF, SIG_DFL) and a reset of every signal at 1000 Hz"
expect_match "$TMP/reset.txt" '^SIGPROF reads as SIG_DFL while cprof holds it, 1 handlers not the program.s$' \
  "the program reads SIGPROF back as it left it while cprof holds it (one handler of cprof's installed)"
pprof -top "$TMP/reset.pb.gz" >"$TMP/reset_top.txt"
grep -q ' burn$' "$TMP/reset_top.txt" || cat "$TMP/reset.txt"
expect_match "$TMP/reset_top.txt" ' burn$' "the profile goes on after the resets"

# The program's own ITIMER_PROF count, without and with cprof at 1000 Hz:
# the same within 2%. The itimer itself loses expiries while its signal
# waits for a CPU (31 to 74 of 100 in one second of CPU beside a CPU hog on
# each core, without cprof), so runs alternate, up to five of each, until
# the best with cprof is at least the best without it, less 2%: cprof
# takes none of the program's own. No run may give the program one of
# cprof's.
best_bare=0 best_own=0 agreed=""
for round in 1 2 3 4 5; do
  "$prog" itimer 1 2>"$TMP/bare.txt" >/dev/null || fail "itimer run without cprof"
  SIGHOST_PROFILE=1 "$prog" itimer 1 2>"$TMP/prof.txt" >"$TMP/itimer.pb.gz" ||
    { cat "$TMP/prof.txt"; fail "itimer run with cprof"; }
  read -r bare _ < <(sed -nE 's/^own ([0-9]+), cprof.s ([0-9]+),.*/\1 \2/p' "$TMP/bare.txt")
  read -r own theirs cpu < <(sed -nE 's/^own ([0-9]+), cprof.s ([0-9]+), cpu ([0-9.]+),.*/\1 \2 \3/p' "$TMP/prof.txt")
  [ -n "$bare" ] && [ -n "$own" ] || fail "no counts from the itimer runs"
  [ "$theirs" -eq 0 ] || fail "the program's handler got $theirs of cprof's signals"
  expect_match "$TMP/prof.txt" "^after the profile: 0 handlers not the program's$" \
    "after the profile no handler of cprof's is left: the signal it used is the program's again"
  echo "round $round: the program's own SIGPROFs: $bare without cprof, $own with it"
  [ "$bare" -gt "$best_bare" ] && best_bare=$bare
  [ "$own" -gt "$best_own" ] && best_own=$own
  if awk -v a="$best_bare" -v b="$best_own" 'BEGIN { exit !(a > 0 && b >= a - (a * 0.02 + 1)) }'; then
    agreed=$round
    break
  fi
done
[ -n "$agreed" ] || fail "the program's own ITIMER_PROF counts with cprof (best $best_own) fell short of those without (best $best_bare) by more than 2%"
checks=$((checks + 1))
echo "ok: the program's own ITIMER_PROF: $best_own SIGPROFs with cprof at 1000 Hz, $best_bare without, none of cprof's"
n=$(pprof -raw "$TMP/itimer.pb.gz" | awk '/^Samples:/ {on=1; getline; next} on && /^ *[0-9]+ / {n += $1} /^Locations/ {on=0} END {print n + 0}')
awk -v n="$n" -v cpu="$cpu" 'BEGIN { exit !(n >= cpu * 1000 * 0.8) }' ||
  fail "cprof's profile has $n samples for ${cpu}s of CPU at 1000 Hz"
checks=$((checks + 1))
echo "ok: cprof's profile meanwhile: $n samples for ${cpu}s of CPU at 1000 Hz"

# The program takes SIGPROF and then every real-time signal while cprof
# profiles: cprof moves each time, then stops with one line; none of its
# signals reaches the program, and the profile keeps what it had.
"$prog" takeall >"$TMP/takeall.pb.gz" 2>"$TMP/takeall.txt" ||
  { cat "$TMP/takeall.txt"; fail "the program taking every signal got cprof's or died"; }
expect_match "$TMP/takeall.txt" "^cprof: CPU profiling stopped: no free signal \(every signal it may use is the program's\)$" \
  "one line when no signal is left for the CPU timers"
expect_match "$TMP/takeall.txt" "^took every signal; the program's handlers got 0 signals$" "none of cprof's signals reached the program's handlers"
pprof -comments "$TMP/takeall.pb.gz" >"$TMP/takeall_comments.txt"
expect_match "$TMP/takeall_comments.txt" "^cprof cpu: the timers' signal: none at the end$" "the profile says its timers ended without a signal"

# A SIGPROF handler installed every way there is, while cprof runs at
# 1000 Hz: the program gets its own ~100 a second (no more: cprof's signals
# reaching it made 349; fewer on a loaded machine, where the itimer loses
# expiries with or without cprof). The system call itself
# bypasses libc, and is seen at cprof's next check (every 100 ms): up to
# about a hundred of cprof's signals at 1000 Hz may reach the handler
# before then.
# Under TSan the handler runs only when the thread next enters one of its
# interceptors, which the compute loop does not, so the program's own
# signals coalesce there (24 and 12 of an expected 50 in suite runs):
# only "some, and no more than its itimer sends" is asked of it. The
# plain build saw 24 of 50 (sigset) in a suite run beside another test
# on 2 CPUs: 0.3 of the expected count is asked there.
low=0.3
tsan_build "$prog" && low=0.02
for how in sigaction sigset bsd_signal raw; do
  "$prog" install "$how" 2>"$TMP/install_$how.txt" >/dev/null ||
    { cat "$TMP/install_$how.txt"; fail "install $how"; }
  read -r own theirs cpu < <(sed -nE 's/^own ([0-9]+), cprof.s ([0-9]+), cpu ([0-9.]+)$/\1 \2 \3/p' "$TMP/install_$how.txt")
  limit=0
  [ "$how" = raw ] && limit=200
  awk -v n="$own" -v cpu="$cpu" -v low="$low" 'BEGIN { exit !(n >= cpu * 100 * low && n >= 1 && n <= cpu * 100 * 1.2) }' &&
    [ "$theirs" -le "$limit" ] ||
    fail "a handler installed with $how got $own of its own SIGPROFs and $theirs of cprof's in ${cpu}s"
  checks=$((checks + 1))
  echo "ok: a handler installed with $how: $own of its own SIGPROFs in ${cpu}s, $theirs of cprof's (at most $limit)"
done

# Every signal blocked, waits for the full set (signalfd: for the set a
# daemon handles, SIGPROF among them): only the program's own.
for how in sigtimedwait sigwaitinfo sigwait signalfd; do
  "$prog" sigwait "$how" 2>"$TMP/wait_$how.txt" >/dev/null ||
    { cat "$TMP/wait_$how.txt"; fail "$how for the full set received cprof's signals"; }
  expect_match "$TMP/wait_$how.txt" '^own 150, other 0, ' "$how: 150 of the program's signals, none of cprof's"
done

# A watchdog on SIGPROF's default action still kills at its time. Not
# under TSan: its handler wrapper holds a signal back until the thread
# enters one of its interceptors, which the watchdog's compute loop may
# never do, so cprof's handler (which gives the signal its default
# action) is not run in time.
if tsan_build "$prog"; then
  echo "skip: the SIGPROF watchdog case (TSan defers signal handlers to its interceptors)"
else
  status=0
  "$prog" watchdog 2>"$TMP/watchdog.txt" >/dev/null || status=$?
  [ "$status" -eq $((128 + $(kill -l PROF))) ] ||
    { cat "$TMP/watchdog.txt"; fail "the SIGPROF watchdog: status $status, not death by SIGPROF"; }
  checks=$((checks + 1))
  echo "ok: an ITIMER_PROF watchdog with SIGPROF's default action kills the program (status $status)"
fi

# The thread sampler's signal (perf events off, so running threads are
# asked with it): taken through libc, reset, and taken with the system
# call; the program's handler never gets cprof's, nothing kills it.
CPROF_PERF_EVENTS=0 "$prog" threads 2>"$TMP/threads.txt" >/dev/null ||
  { cat "$TMP/threads.txt"; fail "the goroutine profile's signal reached the program"; }
expect_match "$TMP/threads.txt" "^spinner seen 1 1 1 [01]; the program's handler got 0 of cprof's signals$" \
  "goroutine profiles after the program took, reset and took again the sampler's signal"
expect_match "$TMP/threads.txt" "^cprof: thread sampling by signal disabled: no free signal" \
  "one line when the program holds every real-time signal"

# A seccomp filter that kills on timer_create, or traps it to a SIGSYS
# handler of the program's (a sandbox's): cprof never calls it, nor sets
# the handler off (its probe runs in a child process that inherits the
# filter). One that allows it (a container's) leaves CPU profiling on.
for when in before after trap allow; do
  "$prog" seccomp "$when" 2>"$TMP/seccomp_$when.txt" >"$TMP/seccomp_$when.pb.gz" ||
    { cat "$TMP/seccomp_$when.txt"; fail "seccomp $when: the program died, its handler ran or the profile failed"; }
  if [ "$when" = allow ]; then
    expect_no_match "$TMP/seccomp_$when.txt" '^cprof:' "a seccomp filter that allows timer_create: no refusal"
    pprof -top "$TMP/seccomp_$when.pb.gz" >"$TMP/seccomp_top.txt"
    expect_match "$TMP/seccomp_top.txt" ' burn$' "and the CPU profile under it is taken"
  else
    expect_match "$TMP/seccomp_$when.txt" '^cprof: CPU profiling stopped: a seccomp filter refuses timer_create' \
      "a seccomp filter ($when) that does not let timer_create through: one line, never called"
  fi
  expect_match "$TMP/seccomp_$when.txt" "^survived; goroutine profile written; the program's SIGSYS handler ran 0 times$" \
    "the program lives on, its SIGSYS handler never set off ($when)"
done

# Which signal: SIGPROF while free; with the program's own SIGPROF
# handler, a real-time one; CPROF_CPU_SIGNAL names one, refused when the
# program uses it, and a value that names none leaves CPU profiling off.
"$prog" which 2>"$TMP/which.txt" >"$TMP/which.pb.gz" || { cat "$TMP/which.txt"; fail "which"; }
expect_match "$TMP/which.txt" "^cprof's signal: $(kill -l PROF)$" "SIGPROF while the program leaves it alone"
"$prog" which own 2>"$TMP/which_own.txt" >"$TMP/which_own.pb.gz" || { cat "$TMP/which_own.txt"; fail "which own"; }
rtmin=$(sed -nE 's/^SIGRTMIN is ([0-9]+)$/\1/p' "$TMP/which_own.txt")
sig=$(sed -nE "s/^cprof's signal: ([0-9]+)$/\1/p" "$TMP/which_own.txt")
[ -n "$sig" ] && [ "$sig" -ge "$rtmin" ] || { cat "$TMP/which_own.txt"; fail "no real-time signal when the program owns SIGPROF"; }
checks=$((checks + 1))
echo "ok: the program owns SIGPROF: cprof uses real-time signal $sig"
pprof -comments "$TMP/which_own.pb.gz" >"$TMP/which_own_comments.txt"
expect_match "$TMP/which_own_comments.txt" "^cprof cpu: the timers' signal: SIGRTMIN\\+$((sig - rtmin))\$" \
  "the profile names the signal its timers used"
pprof -comments "$TMP/which.pb.gz" >"$TMP/which_comments.txt"
expect_match "$TMP/which_comments.txt" "^cprof cpu: the timers' signal: SIGPROF\$" "SIGPROF, when it was"

CPROF_CPU_SIGNAL=SIGRTMIN+7 "$prog" which 2>"$TMP/which_env.txt" >"$TMP/which_env.pb.gz" || { cat "$TMP/which_env.txt"; fail "which env"; }
expect_match "$TMP/which_env.txt" "^cprof's signal: $((rtmin + 7))$" "CPROF_CPU_SIGNAL=SIGRTMIN+7 is used"
pprof -top "$TMP/which_env.pb.gz" >"$TMP/which_env_top.txt"
expect_match "$TMP/which_env_top.txt" ' burn$' "and the profile is taken on it"
CPROF_CPU_SIGNAL=SIGPROF "$prog" which own 2>"$TMP/which_taken.txt" >/dev/null || true
expect_match "$TMP/which_taken.txt" '^cprof: CPU profiling disabled: the signal the setting names is in use by the program$' \
  "CPROF_CPU_SIGNAL naming a signal the program handles: one line, no profile"
CPROF_CPU_SIGNAL=SIGFOO "$prog" which 2>"$TMP/which_bad.txt" >/dev/null || true
expect_match "$TMP/which_bad.txt" '^cprof: CPROF_CPU_SIGNAL="SIGFOO": not SIGPROF or a real-time signal' \
  "a CPROF_CPU_SIGNAL that names no usable signal: one quoted line"
expect_no_match "$TMP/which_bad.txt" "^cprof's signal:" "and CPU profiling stays off"

# An exec that keeps the pid gets cprof's settings back in a rebuilt
# environment: built off the caller's stack once it is large, so an exec
# from a crash handler on an 8 KiB alternate stack (700 variables) or a
# thread with a 64 KiB stack (9,000) does not overflow it (both died).
# Stack use differs under the sanitizers (their frames and redzones take
# more than 8 KiB by themselves); there the 64 KiB thread case runs.
exec_cases="altstack:700 thread:9000"
sanitized_build "$prog" && exec_cases="thread:9000"
for c in $exec_cases; do
  where=${c%:*} n=${c#*:}
  CPROF_UNWIND=auto "$prog" exec "$where" "$n" >"$TMP/exec_$where.txt" 2>&1 ||
    { cat "$TMP/exec_$where.txt"; fail "exec from a $where with $n variables died"; }
  expect_match "$TMP/exec_$where.txt" "^exec'd: CPROF_UNWIND=auto, $n variables$" \
    "exec from a $where with $n more variables: the shell got them and cprof's setting"
done

# A coroutine's stack (bounds unknown to cprof) run deep: room below for
# the kernel's frame and a small handler only. Stack use differs under the
# sanitizers; the plain build measures cprof's own.
if sanitized_build "$prog"; then
  echo "skip: the coroutine stack case measures stack use in the plain build"
else
  "$prog" trivial 2>"$TMP/trivial.txt" || { cat "$TMP/trivial.txt"; fail "the coroutine dies even under a trivial handler"; }
  "$prog" coroutine >"$TMP/co.pb.gz" 2>"$TMP/co.txt" ||
    { cat "$TMP/co.txt"; fail "the coroutine died under cprof (status $?)"; }
  expect_match "$TMP/co.txt" 'survived$' "a 16 KiB coroutine stack run deep under cprof at 1000 Hz"
  pprof -comments "$TMP/co.pb.gz" >"$TMP/co_comments.txt"
  expect_match "$TMP/co_comments.txt" '^cprof cpu: [1-9][0-9]* samples not taken: too little stack left$' \
    "the samples it had no room for are counted"
fi
finish
