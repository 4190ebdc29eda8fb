#!/usr/bin/env bash
# What fork children's exit dumps cost: test/progs/plain_fork_dumps (a
# parent that works, then forks N children one at a time, each of which
# works about 5 ms and calls exit), preloaded, with CPROF_DUMP=cpu,heap and
# without dumps, alternating ROUNDS times. Prints, as ratios against the
# run without dumps measured in the same round:
#   - the wall time of the N forks (fork to reap, all of them);
#   - the median child's CPU time and wall time from its exit() call to
#     its reaping, against a child without dumps;
# and the median child's exit-time CPU against the parent's own exit
# (its dump and its end) in the same run, and against a child of a parent
# that wrote a dump before forking (nothing left to read).
#   bench/fork_dumps.sh BUILD_DIR [N] [ROUNDS]
set -euo pipefail
build=${1:-build}
n=${2:-100}
rounds=${3:-3}
prog=$build/test/progs/plain_fork_dumps
lib=$build/libcprof.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

secs_to_us() { awk -v t="$1" 'BEGIN { split(t, a, /[ms]/); printf "%d", (a[1] * 60 + a[2]) * 1000000 }'; }

# run NAME [ENV...] -- ARGS: one run; leaves $tmp/NAME.out and prints
# "forks_ms child_cpu_us child_exit_us parent_exit_cpu_us".
run() {
  local name=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$tmp/$name.log"
  (env "${envs[@]}" LD_PRELOAD="$lib" "$prog" "$@" >"$tmp/$name.out"; times >"$tmp/$name.times")
  local u s self kids
  read -r u s < <(sed -n 2p "$tmp/$name.times")
  read -r self kids < <(awk '$1 == "parent_cpu_us" { print $2, $4 }' "$tmp/$name.out")
  local med_cpu med_exit
  med_cpu=$(awk '$1 == "child" { print $6 }' "$tmp/$name.out" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  med_exit=$(awk '$1 == "child" { print $4 }' "$tmp/$name.out" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  echo "$(awk '$1 == "children" { print $4 }' "$tmp/$name.out") $med_cpu $med_exit $(($(secs_to_us "$u") + $(secs_to_us "$s") - self - kids))"
}

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $n forks per run, $rounds rounds"
printf "%-6s %10s %10s %12s %12s %14s %14s\n" round "forks on/off" "" "child CPU" "child exit" "child/parent" "child/warm"
for r in $(seq 1 "$rounds"); do
  read -r f_off c_off e_off p_off < <(run off -- exit "$n")
  read -r f_on c_on e_on p_on < <(run on CPROF_DUMP=cpu,heap CPROF_DUMP_OUT="$tmp/on.log" -- exit "$n")
  read -r f_w c_w e_w p_w < <(run warm CPROF_DUMP=cpu,heap CPROF_DUMP_OUT="$tmp/warm.log" -- exit "$n" warm "$tmp/warm.log" 2)
  [ "$p_on" -ge 1000 ] || p_on=1000
  awk -v r="$r" -v fo="$f_on" -v ff="$f_off" -v co="$c_on" -v cf="$c_off" -v eo="$e_on" -v ef="$e_off" \
    -v po="$p_on" -v cw="$c_w" 'BEGIN {
      printf "%-6s %10.2f %10s %12.2f %12.2f %14.2f %14.2f\n", r, fo / ff, "", co / cf, eo / (ef > 0 ? ef : 1), co / po, co / cw
      printf "       (%d ms / %d ms; child CPU %d / %d ms, exit %d / %d ms; parent exit CPU %d ms; warm child %d ms)\n",
        fo, ff, co / 1000, cf / 1000, eo / 1000, ef / 1000, po / 1000, cw / 1000 }'
done
echo "(forks on/off: the N forks' wall time with dumps against without; child CPU, child exit:"
echo " the median child's CPU time and exit-to-reap wall time, with dumps against without;"
echo " child/parent: the median child's CPU against the parent's exit CPU in the same run;"
echo " child/warm: against the median child of a parent that dumped before forking)"
