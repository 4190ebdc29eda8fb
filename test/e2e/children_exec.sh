#!/usr/bin/env bash
# Programs the profiled program execs are not profiled unless asked:
# cprof takes its variables and its LD_PRELOAD entry out of the
# environment once it has read them. A shell script that captures a
# child's stderr with $(...) captures what it would without cprof, and 300
# execs add no blocks to the log; with --follow-exec a child profiles
# itself, its blocks named by its pid, and the endpoint goes only to
# children that can have an address of their own (%p); a wrapper that
# execs the real program (same pid) still has it profiled.
source "$(dirname "$0")/lib.bash"
tsan_build "$CPROFTEST_BUILD/test/progs/plain_forks" && skip_rest "every run here is preloaded, which the TSan build cannot do (see lib.bash)"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/plain_forks
rt=$(preload_env "$prog" | sed 's#[^ ]*libcprof\.so##')
crun() { LD_PRELOAD="$rt" "$cprof" run "$@"; }
# LeakSanitizer (ASan build) would report the system programs' own leaks
# into the stderr being compared.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# blocks LOG: how many PEM blocks LOG holds.
blocks() { grep -c '^-----BEGIN PPROF' "$1" || true; }

# 1. A script's captured stderr, unprofiled and profiled (dumps to stderr,
# where a profiled child's exit dump would land in the capture).
cat >"$TMP/capture.sh" <<'SH'
echo $$ >"$2"
x=$(sh -c 'echo hi >&2' 2>&1)
y=$(ls /nonexistent-cprof-test 2>&1)
z=$(sh -c 'exec ls /nonexistent-cprof-test' 2>&1)
printf '%s\n' "x=$x" "y=$y" "z=$z" >"$1"
SH
LD_PRELOAD="$rt" sh "$TMP/capture.sh" "$TMP/plain.txt" "$TMP/plain.pid"
crun --dump heap=debug=1 -- sh "$TMP/capture.sh" "$TMP/prof.txt" "$TMP/prof.pid" 2>"$TMP/prof.err"
cmp "$TMP/plain.txt" "$TMP/prof.txt" || { diff "$TMP/plain.txt" "$TMP/prof.txt" | head -20; fail "the captured text differs from the unprofiled run's"; }
checks=$((checks + 1))
echo "ok: the captured stderr is byte-identical to the unprofiled run's ($(wc -c <"$TMP/prof.txt") bytes)"
n=$(blocks "$TMP/prof.err")
[ "$n" -eq 1 ] || fail "expected the shell's own block only, found $n"
expect_match "$TMP/prof.err" "^Pid: $(cat "$TMP/prof.pid")\$" "the one block is the shell's"

# 2. 300 execs of /bin/true add no blocks.
cat >"$TMP/execs.sh" <<'SH'
i=0
while [ $i -lt "$1" ]; do /bin/true; i=$((i + 1)); done
SH
crun --dump heap=debug=1 --dump-out "$TMP/execs0.log" -- sh "$TMP/execs.sh" 0
crun --dump heap=debug=1 --dump-out "$TMP/execs300.log" -- sh "$TMP/execs.sh" 300
n0=$(blocks "$TMP/execs0.log")
n300=$(blocks "$TMP/execs300.log")
echo "blocks: $n0 with no exec, $n300 with 300 execs of /bin/true"
[ "$n300" -eq "$n0" ] && [ "$n0" -eq 1 ] || fail "300 execs changed the log: $n0 -> $n300 blocks"
checks=$((checks + 1))
echo "ok: 300 execs add no blocks"

# 3. By default an exec'd child is unprofiled and sees none of cprof.
crun --dump heap=debug=1 --dump-out "$TMP/spawn.log" -- "$prog" spawn >"$TMP/spawn.out"
parent=$(awk '$1 == "pid" {print $2}' "$TMP/spawn.out" | head -1)
child=$(awk '$1 == "pid" {print $2}' "$TMP/spawn.out" | tail -1)
[ -n "$child" ] && [ "$child" != "$parent" ] || { cat "$TMP/spawn.out"; fail "spawn: no child pid"; }
expect_match "$TMP/spawn.out" '^CPROF_ variables: 0$' "the exec'd child has no CPROF_* variable"
expect_no_match "$TMP/spawn.out" '^LD_PRELOAD=.*libcprof' "the exec'd child's LD_PRELOAD has no libcprof"
expect_match "$TMP/spawn.log" "^Pid: $parent\$" "the parent dumped"
expect_no_match "$TMP/spawn.log" "^Pid: $child\$" "the child did not"

# 4. --follow-exec: the child profiles itself, its blocks named by its pid.
crun --follow-exec --dump heap=debug=1 --dump-out "$TMP/follow.log" -- "$prog" spawn >"$TMP/follow.out"
parent=$(awk '$1 == "pid" {print $2}' "$TMP/follow.out" | head -1)
child=$(awk '$1 == "pid" {print $2}' "$TMP/follow.out" | tail -1)
expect_match "$TMP/follow.log" "^Pid: $parent\$" "--follow-exec: the parent dumped"
expect_match "$TMP/follow.log" "^Pid: $child\$" "--follow-exec: the child dumped, its blocks named by its pid"
"$cprof" extract -o "$TMP/follow.x" "$TMP/follow.log" >/dev/null || fail "extract failed"
ls "$TMP/follow.x/heap-$child-"*.txt >/dev/null 2>&1 || fail "no heap-$child-SEQ.txt extracted"
checks=$((checks + 1))
echo "ok: --follow-exec: extract names the child's file by its pid"

# The endpoint: a TCP port stays the parent's; a %p address is per process.
crun --follow-exec --http 127.0.0.1:0 -- "$prog" spawn >"$TMP/http.out" 2>"$TMP/http.err"
n=$(grep -c 'serving /debug/pprof/' "$TMP/http.err" || true)
[ "$n" -eq 1 ] || { cat "$TMP/http.err"; fail "a TCP endpoint was started $n times, not once"; }
expect_match "$TMP/http.out" '^CPROF_HTTP=\(unset\)$' "--follow-exec: a TCP address does not reach the child"
crun --follow-exec --http "unix:$TMP/h-%p.sock" -- "$prog" spawn >"$TMP/unix.out" 2>"$TMP/unix.err"
parent=$(awk '$1 == "pid" {print $2}' "$TMP/unix.out" | head -1)
child=$(awk '$1 == "pid" {print $2}' "$TMP/unix.out" | tail -1)
expect_match "$TMP/unix.err" "serving /debug/pprof/ on unix:.*/h-$parent\\.sock" "%p: the parent serves on its own socket"
expect_match "$TMP/unix.err" "serving /debug/pprof/ on unix:.*/h-$child\\.sock" "%p: so does the child"

# 5. A wrapper that execs the program (same pid) still has it profiled;
# the program's own environment is clean for its children.
printf '#!/bin/sh\nexec "$@"\n' >"$TMP/wrap.sh"
printf '#!/bin/sh\nexport LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}libm.so.6"\nexec "$@"\n' >"$TMP/wrap2.sh"
chmod +x "$TMP/wrap.sh" "$TMP/wrap2.sh"
for w in wrap wrap2; do
  crun --dump heap=debug=1 --dump-out "$TMP/$w.log" -- "$TMP/$w.sh" "$prog" env >"$TMP/$w.out"
  pid=$(awk '$1 == "pid" {print $2}' "$TMP/$w.out")
  expect_match "$TMP/$w.log" "^Pid: $pid\$" "$w: the program the wrapper execs dumped"
  [ "$(blocks "$TMP/$w.log")" -eq 1 ] || fail "$w: expected one block"
  expect_match "$TMP/$w.out" '^CPROF_ variables: 0$' "$w: the program's environment has no CPROF_* variable"
  expect_no_match "$TMP/$w.out" '^LD_PRELOAD=.*libcprof' "$w: nor libcprof in LD_PRELOAD"
done
expect_match "$TMP/wrap2.out" '^LD_PRELOAD=(.*:)?libm\.so\.6$' "wrap2: the wrapper's own preload entry stays"
finish
