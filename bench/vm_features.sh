#!/usr/bin/env bash
# The address space (VmSize) cprof takes, per feature and with every
# feature on, against the same program without cprof and against the
# library alone (docs/heap.md, "Address space"). The program,
# test/progs/plain_vm, has 4 threads of its own that allocate; each run
# waits 1.5 s, fetches heap, goroutine, threadcreate, a 1 s CPU and a 1 s
# wall profile when the endpoint is on, waits 1.5 s more and reads
# /proc/self/status.
#   bench/vm_features.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: vm_features.sh BUILD_DIR}" && pwd)
prog=$build/test/progs/plain_vm
lib=$build/libcprof.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# measure NAME ENV...: prints "NAME VmSize threads".
measure() {
  local name=$1 port
  shift
  mkfifo "$tmp/in"
  env "$@" "$prog" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
  local pid=$!
  exec 4>"$tmp/in"
  echo "sleep 1500" >&4
  if [[ " $* " == *CPROF_HTTP=* ]]; then
    for _ in $(seq 200); do
      port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$tmp/err" | head -1)
      [ -n "$port" ] && break
      sleep 0.05
    done
    for p in heap goroutine threadcreate 'profile?seconds=1' 'wall?seconds=1'; do
      curl -sf -o /dev/null "http://127.0.0.1:$port/debug/pprof/$p"
    done
  fi
  printf 'sleep 1500\nvmsize\n' >&4
  exec 4>&-
  wait "$pid"
  rm -f "$tmp/in"
  awk -v n="$name" '/^vmsize/ {print n, $2, $4}' "$tmp/out"
}

dump=(CPROF_DUMP_OUT="$tmp/dump.log")
{
  measure none X=1
  measure library LD_PRELOAD="$lib"
  measure heap-dump LD_PRELOAD="$lib" CPROF_DUMP=heap "${dump[@]}"
  measure cpu LD_PRELOAD="$lib" CPROF_DUMP=cpu "${dump[@]}"
  measure wall LD_PRELOAD="$lib" CPROF_DUMP=wall "${dump[@]}"
  measure http LD_PRELOAD="$lib" CPROF_HTTP=127.0.0.1:0
  measure push LD_PRELOAD="$lib" CPROF_PUSH_URL=http://127.0.0.1:9/ CPROF_PUSH_INTERVAL=1
  measure all LD_PRELOAD="$lib" CPROF_DUMP=cpu,wall,heap,goroutine,threadcreate "${dump[@]}" \
    CPROF_HTTP=127.0.0.1:0
  measure all+push LD_PRELOAD="$lib" CPROF_DUMP=cpu,wall,heap,goroutine,threadcreate "${dump[@]}" \
    CPROF_HTTP=127.0.0.1:0 CPROF_PUSH_URL=http://127.0.0.1:9/ CPROF_PUSH_INTERVAL=1
} >"$tmp/figures"
awk 'NR == 1 {none = $2} $1 == "library" {lib = $2}
     {printf "%-10s VmSize %7d KiB  threads %2d  over no cprof %+7.1f MiB  over the library %+7.1f MiB\n",
      $1, $2, $3, ($2 - none) / 1024, lib ? ($2 - lib) / 1024 : 0}' "$tmp/figures"
