#!/usr/bin/env bash
# The address space cprof takes with every feature on (docs/heap.md,
# "Address space"): heap, CPU, wall, goroutine and threadcreate dumps, the
# HTTP endpoint (with profiles fetched from it) and the pusher. cprof's
# threads have small stacks and allocate from cprof's own heap, so none of
# them gets an 8 MiB stack or a 64 MiB glibc arena: VmSize stays within
# the documented figure of the same program without cprof, and under
# `ulimit -v` set to what the program takes without cprof plus that
# figure, a 200 MiB malloc still succeeds. The program (plain_vm) has 4
# threads of its own that allocate, so it has arenas of its own either way.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/plain_vm
lib=$CPROFTEST_BUILD/libcprof.so
# The documented figure (docs/heap.md, "Address space"), in KiB.
documented_kib=$((96 * 1024))
big_mib=200

if sanitized_build "$prog"; then
  skip_rest "a sanitizer reserves terabytes of shadow memory, which no ulimit -v figure can include"
fi

all_env=(CPROF_DUMP=cpu,wall,heap,goroutine,threadcreate CPROF_DUMP_OUT="$TMP/dump.log"
  CPROF_HTTP=127.0.0.1:0 CPROF_PUSH_URL=http://127.0.0.1:9/ CPROF_PUSH_INTERVAL=1)

# run NAME CMDS ENV...: runs the program with ENV, feeding it the lines
# of CMDS (a "fetch" line makes this script fetch profiles from the
# endpoint first), its stdout into $TMP/NAME.out.
run() {
  local name=$1 cmds=$2
  shift 2
  rm -f "$TMP/$name.in"
  mkfifo "$TMP/$name.in"
  # There before the background job opens them: a look at the error file
  # before then failed (set -e) the whole test without a word.
  : >"$TMP/$name.out"
  : >"$TMP/$name.err"
  env "$@" "$prog" <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local pid=$!
  track "$pid"
  exec 4>"$TMP/$name.in"
  local line port
  while read -r line; do
    if [ "$line" = fetch ]; then
      for _ in $(seq 200); do
        port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$TMP/$name.err" | head -1)
        [ -n "$port" ] && break
        sleep 0.05
      done
      [ -n "$port" ] || { cat "$TMP/$name.err" >&2; fail "$name: no HTTP port"; }
      for p in heap goroutine threadcreate 'profile?seconds=1' 'wall?seconds=1'; do
        curl -sf -o /dev/null "http://127.0.0.1:$port/debug/pprof/$p" || fail "$name: fetching $p failed"
      done
    else
      echo "$line" >&4
    fi
  done <<<"$cmds"
  exec 4>&-
  wait "$pid" || { cat "$TMP/$name.err" >&2; fail "$name: the program failed (status $?)"; }
}

vmsize() { awk '/^vmsize/ {print $2}' "$TMP/$1.out"; }

cmds=$'sleep 1500\nfetch\nsleep 1500\nvmsize'
run none "${cmds/fetch/}" X=1
run lib "${cmds/fetch/}" LD_PRELOAD="$lib"
run all "$cmds" LD_PRELOAD="$lib" "${all_env[@]}"
none=$(vmsize none) only=$(vmsize lib) all=$(vmsize all)
echo "VmSize: $none KiB without cprof, $only KiB with the library alone (+$(( (only - none) / 1024 )) MiB), $all KiB with every feature on (+$(( (all - none) / 1024 )) MiB); documented: +$((documented_kib / 1024)) MiB"
echo "threads: $(awk '/^vmsize/ {print $4}' "$TMP/none.out") without cprof, $(awk '/^vmsize/ {print $4}' "$TMP/all.out") with every feature on"
[ "$((all - none))" -le "$documented_kib" ] ||
  fail "with every feature on cprof takes $((all - none)) KiB of address space, more than the documented $documented_kib"
checks=$((checks + 1))
echo "ok: every feature on takes no more address space than documented"
[ "$((only - none))" -le "$documented_kib" ] || fail "the library alone takes $((only - none)) KiB"
checks=$((checks + 1))
echo "ok: the library alone takes less"

# Under the limit: what the program takes without cprof, the 200 MiB
# block, and the documented figure.
limit=$((none + big_mib * 1024 + documented_kib))
bigcmds=$'sleep 1500\nfetch\nsleep 1500\nbig '"$big_mib"$'\nvmsize'
ulimit -v "$limit"
echo "ulimit -v $limit KiB"
run limited_none "${bigcmds/fetch/}" X=1
expect_match "$TMP/limited_none.out" "^big $big_mib ok\$" "without cprof, the $big_mib MiB malloc succeeds under the limit"
run limited_all "$bigcmds" LD_PRELOAD="$lib" "${all_env[@]}"
expect_match "$TMP/limited_all.out" "^big $big_mib ok\$" "with every feature on, the $big_mib MiB malloc succeeds under the limit"
expect_no_match "$TMP/limited_all.err" 'cannot|failed to start|refus' "every feature started under the limit"
finish
