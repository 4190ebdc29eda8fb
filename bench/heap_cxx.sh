#!/usr/bin/env bash
# C++'s operator new and delete under cprof, measured: the CPU time of an
# operator new/delete churn (test/progs/nofp_new_churn: two threads, 16-511
# byte blocks, half arrays, half sized deletes) on glibc + libstdc++,
# jemalloc and tcmalloc, each with and without cprof preloaded, ROUNDS
# alternating rounds; then RUNS runs of test/progs/nofp_heap_new (56 MB
# live through every kind of new) per allocator, the heap profile's in-use
# total against the truth the program prints.
#   bench/heap_cxx.sh BUILD_DIR [ROUNDS [RUNS]]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
rounds=${2:-9}
runs=${3:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PPROF_TMPDIR=$tmp
lib() { ls /usr/lib/*/"$1" 2>/dev/null | head -1; }
jemalloc=$(lib libjemalloc.so.2)
tcmalloc=$(lib libtcmalloc.so.4)
cprof=$build/libcprof.so
churn=$build/test/progs/nofp_new_churn
configs=("glibc:" "glibc+cprof:$cprof" "jemalloc:$jemalloc" "jemalloc+cprof:$cprof:$jemalloc"
  "tcmalloc:$tcmalloc" "tcmalloc+cprof:$cprof:$tcmalloc")

echo "== new/delete churn, 2 x 10M operations, $rounds alternating rounds (user+sys CPU seconds)"
for r in $(seq 1 "$rounds"); do
  for c in "${configs[@]}"; do
    name=${c%%:*}
    /usr/bin/time -f "$name %U %S" -a -o "$tmp/times" env LD_PRELOAD="${c#*:}" "$churn" 10
  done
done
awk '{ t[$1] = t[$1] " " ($2 + $3) }
  END {
    n = split("glibc jemalloc tcmalloc", base, " ")
    for (i = 1; i <= n; i++) {
      b = base[i]; c = b "+cprof"
      mb = median(t[b]); mc = median(t[c])
      printf "%-9s %6.3f s   with cprof %6.3f s   %.3fx   (%.1f ns more per new+delete pair)\n", b, mb, mc, mc / mb, (mc - mb) * 1e9 / 20e6
    }
  }
  function median(s,   v, k, i, j, x) {
    k = split(s, v, " ")
    for (i = 2; i <= k; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
  }' "$tmp/times"

echo
echo "== accuracy: $runs runs of nofp_heap_new per allocator at the default rate (524288)"
prog=$build/test/progs/nofp_heap_new
for c in "glibc:" "jemalloc:$jemalloc" "tcmalloc:$tcmalloc"; do
  name=${c%%:*}
  : >"$tmp/est"
  for i in $(seq 1 "$runs"); do
    rm -rf "$tmp/x" "$tmp/log"
    LD_PRELOAD="${c#*:}" "$build/cprof" run --dump heap --dump-out "$tmp/log" -- "$prog" >"$tmp/out"
    "$build/cprof" extract -o "$tmp/x" "$tmp/log" >/dev/null
    truth=$(awk '$1 == "live" && $2 ~ /^alloc_/ { s += $3 } END { print s }' "$tmp/out")
    got=$(go tool pprof -sample_index=inuse_space -top -unit=B "$tmp"/x/heap-*.pb.gz 2>/dev/null |
      sed -nE 's/.* of ([0-9]+)B total$/\1/p')
    echo "$truth $got" >>"$tmp/est"
  done
  awk -v name="$name" '{ d = ($2 - $1) / $1 * 100; s += d; s2 += d * d; n++; t = $1 }
    END { m = s / n; sd = sqrt(s2 / n - m * m)
      printf "%-9s truth %d B: mean error %+.2f%% (standard error %.2f%%), spread %.2f%% vs %.2f%% expected\n",
        name, t, m, sd / sqrt(n), sd, sqrt(t * 524288) / t * 100 }' "$tmp/est"
done
