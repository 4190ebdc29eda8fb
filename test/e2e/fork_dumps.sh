#!/usr/bin/env bash
# A fork child's exit dump costs what a warm dump costs, not a fresh read of
# every debug file: test/progs/plain_fork_dumps works (CPU, allocations,
# libc), then forks N children one at a time, each of which works a little
# and calls exit; each child dumps cpu and heap at exit. Three runs:
#   cold   the parent forks without having dumped: its dumper resolves the
#          names of its stacks after the first fork, and the children
#          forked after that inherit them;
#   warm   the parent writes a SIGUSR1 dump (which reads everything) before
#          it forks: what a child's dump costs when nothing is left to read,
#          and what the parent's own exit dump costs then;
#   off    the same program preloaded without dumps.
# CPU time is compared (the children's from wait4, the parent's exit from
# the shell's `times`), so that other load on the machine counts for
# little. The checks: the median child of the cold run costs at most 3
# times the median child of the warm run, and what cprof adds to it (its
# CPU less the median child's without dumps) at most 5 times the warm
# parent's exit (its dump and its end): a child's whole life, its own work
# included, is several times a warm exit that costs 1-2 ms. Before the children inherited the
# parent's symbolizer, each read libc's debug information (libc6-dbg's
# compressed DWARF) afresh: 6 to 13 times. The wall-clock figures are
# printed too.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/plain_fork_dumps
if tsan_build "$prog"; then
  skip_rest "preloaded runs (the TSan build cannot preload, see lib.bash)"
fi
rt=$(preload_env "$prog")
n=${FORK_DUMPS_N:-20}
if sanitized_build "$prog"; then
  # LeakSanitizer's check at each exit scans all of the process's memory,
  # the symbolizer's included: the sanitizer's cost, not cprof's, and
  # larger than what is measured here.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

# secs_to_us "0m1.234s": microseconds.
secs_to_us() { awk -v t="$1" 'BEGIN { split(t, a, /[ms]/); printf "%d", (a[1] * 60 + a[2]) * 1000000 }'; }

# run NAME [ENV...] -- [PROG ARGS...]: runs the program in a subshell and
# leaves its output in $TMP/NAME.out and, in $TMP/NAME.exit, the CPU time
# (us) of the parent's exit: what the shell's `times` counts for the
# program and everything it reaped, less what the program counted for
# itself and its children just before it exited.
run() {
  local name=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  (env "${envs[@]}" LD_PRELOAD="$rt" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    times >"$TMP/$name.times") || { cat "$TMP/$name.err"; fail "$name: the program failed"; }
  local u s total self kids
  read -r u s < <(sed -n 2p "$TMP/$name.times")
  total=$(($(secs_to_us "$u") + $(secs_to_us "$s")))
  read -r self kids < <(awk '$1 == "parent_cpu_us" { print $2, $4 }' "$TMP/$name.out")
  [ -n "$kids" ] || { cat "$TMP/$name.out" "$TMP/$name.err"; fail "$name: the program printed no CPU times"; }
  echo $((total - self - kids)) >"$TMP/$name.exit"
  [ -s "$TMP/$name.err" ] && { echo "---- $name stderr"; cat "$TMP/$name.err"; }
  echo "$name: children's CPU ms: $(awk '$1 == "child" { printf "%d ", $6 / 1000 }' "$TMP/$name.out")"
  echo "$name: children's exit (wall) ms: $(awk '$1 == "child" { printf "%d ", $4 / 1000 }' "$TMP/$name.out")"
  echo "$name: parent's exit: $(($(cat "$TMP/$name.exit") / 1000)) ms of CPU; forks: $(awk '/total_ms/ { print $4 }' "$TMP/$name.out") ms (wall)"
}

# median NAME FIELD: the median of the children's FIELD (4: exit_us, 6: cpu_us).
median() {
  awk -v f="$2" '$1 == "child" { print $f }' "$TMP/$1.out" | sort -n |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $n children per run"
run off -- "$prog" exit "$n"
run warm CPROF_DUMP=cpu,heap CPROF_DUMP_OUT="$TMP/warm.log" -- "$prog" exit "$n" warm "$TMP/warm.log" 2
run cold CPROF_DUMP=cpu,heap CPROF_DUMP_OUT="$TMP/cold.log" -- "$prog" exit "$n"

for name in warm cold; do
  blocks=$(grep -c '^-----END PPROF' "$TMP/$name.log" || true)
  want=$((2 * (n + 1)))
  [ "$name" = warm ] && want=$((want + 2))
  [ "$blocks" -eq "$want" ] || fail "$name: $blocks blocks in the log, not $want (cpu and heap of the parent and of each child)"
  checks=$((checks + 1))
  echo "ok: $name: every process dumped ($blocks blocks)"
done

# Each child's CPU profile is its own: its window, carried on from the
# parent's into the child, starts at the fork with nothing of the
# parent's in it, and the child's timer is armed again there.
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/cold" "$TMP/cold.log" >/dev/null
: >"$TMP/children.traces"
for pid in $(awk '$1 == "child" { print $2 }' "$TMP/cold.out"); do
  for f in "$TMP/cold"/cpu-"$pid"-*.pb.gz; do
    [ -e "$f" ] || fail "no CPU profile of child $pid"
    pprof -traces "$f" >>"$TMP/children.traces"
  done
done
expect_no_match "$TMP/children.traces" 'parent_(burn|format|keep)' \
  "the children's CPU profiles hold none of the parent's samples"
samples=$(grep -cE '^ +[0-9.]+m?s +' "$TMP/children.traces" || true)
[ "$samples" -gt 0 ] || { cat "$TMP/children.traces"; fail "the children's CPU profiles hold no sample"; }
checks=$((checks + 1))
echo "ok: the children's CPU profiles hold their own samples ($samples stacks)"

cold=$(median cold 6)
warm=$(median warm 6)
off=$(median off 6)
parent=$(cat "$TMP/warm.exit")
# A floor of 1 ms keeps a ratio meaningful where the clock counts nothing.
[ "$warm" -ge 1000 ] || warm=1000
[ "$parent" -ge 1000 ] || parent=1000
echo "median child CPU: cold $((cold / 1000)) ms, warm $((warm / 1000)) ms, without dumps $((off / 1000)) ms"
r_child=$(awk -v a="$cold" -v b="$warm" 'BEGIN { printf "%.2f", a / b }')
added=$((cold > off ? cold - off : 0))
r_parent=$(awk -v a="$added" -v b="$parent" 'BEGIN { printf "%.2f", a / b }')
echo "ratios: cold child / warm child $r_child; cold child's added CPU ($((added / 1000)) ms) / warm parent's exit $r_parent"
awk -v r="$r_child" 'BEGIN { exit !(r <= 3) }' ||
  fail "a child of a parent that had not dumped costs $r_child times one of a parent that had (more than 3): it read its debug information again"
checks=$((checks + 1))
echo "ok: a fork child's exit dump costs what a warm one does ($r_child x)"
awk -v r="$r_parent" 'BEGIN { exit !(r <= 5) }' ||
  fail "what cprof adds to a child costs $r_parent times the parent's exit (more than 5)"
checks=$((checks + 1))
echo "ok: what cprof adds to a fork child costs at most a small multiple of its parent's exit ($r_parent x)"
finish
