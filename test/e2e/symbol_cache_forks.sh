#!/usr/bin/env bash
# Fork children name their addresses from the symbol cache entries their
# earlier siblings wrote (docs/symbols.md, "The symbol cache"): a child
# inherits the entries its parent read before the fork, and for an
# address they lack it looks whether another process replaced the entry
# since, and reads it again. test/progs/plain_fork_dumps forks children one
# at a time, each allocating from the same call sites (child_work) and
# dumping its heap profile at exit: with an empty cache, the first child
# names child_work's stacks with libdw and writes them to the entries; the
# children after it read the entry again and find them there. Heap profiles
# only, every allocation sampled: their stacks are the same in every child,
# where CPU samples fall on any instruction. strace says which processes
# read which entry.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/plain_fork_dumps
if sanitized_build "$prog"; then
  skip_rest "a sanitizer's allocator serves a preloaded program: no heap sample"
fi
command -v strace >/dev/null || skip_rest "strace is not installed"
cache=$TMP/cache
mkdir -m 700 "$cache"
n=6
# A first run without children names the parent's own stacks: in the run
# that follows, the parent's background naming after its first fork finds
# them all in the cache and is soon done, so that its children fork with
# its symbolizer idle and keep its state (a child forked while another
# thread was using it starts afresh, reading every entry anyway).
env CPROF_DEBUG_CACHE="$cache" CPROF_DUMP=heap CPROF_HEAP_RATE=1 CPROF_DUMP_OUT="$TMP/first.log" \
  LD_PRELOAD="$CPROFTEST_BUILD/libcprof.so" "$prog" exit 0 >/dev/null 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "the first run failed"; }
strace -f -qq -e trace=openat -o "$TMP/trace" \
  -E CPROF_DEBUG_CACHE="$cache" -E CPROF_DUMP=heap -E CPROF_HEAP_RATE=1 -E CPROF_DUMP_OUT="$TMP/dumps.log" \
  -E LD_PRELOAD="$CPROFTEST_BUILD/libcprof.so" \
  "$prog" exit "$n" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "the program failed"; }
blocks=$(grep -c '^-----END PPROF' "$TMP/dumps.log" || true)
[ "$blocks" -eq $((n + 1)) ] || fail "$blocks heap profiles in the log, not $((n + 1))"
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/profiles" "$TMP/dumps.log" >/dev/null
children=$(awk '$1 == "child" { print $2 }' "$TMP/out")
[ "$(wc -w <<<"$children")" -eq "$n" ] || fail "the program listed $(wc -w <<<"$children") children, not $n"
named=0
for pid in $children; do
  pprof -traces -sample_index=alloc_space "$TMP"/profiles/heap-"$pid"-*.pb.gz |
    grep -q child_work && named=$((named + 1))
done
[ "$named" -eq "$n" ] || fail "only $named of the $n children's heap profiles name child_work"
checks=$((checks + 1))
echo "ok: every child's heap profile names child_work"
# The entry of the program's own code: the first child adds child_work's
# stacks to it. A child after it whose inherited view of the entry lacks
# them reads the entry again (one whose parent had already read the new
# entry need not). Without that, no child reads an entry at all: each
# names child_work again (through the libdw session it may inherit open
# from its parent) and writes it once more.
bid=$(readelf -n "$prog" | awk '/Build ID/ {print $3}')
[ -n "$bid" ] || fail "the program has no build ID"
readers=0
for pid in $(tail -n +2 <<<"$children"); do
  grep -E "^$pid +openat\(.*\"$bid\.sym\"" "$TMP/trace" | grep -qv ENOENT && readers=$((readers + 1))
done
echo "children after the first that read the program's entry again: $readers of $((n - 1))"
[ "$readers" -ge 1 ] || fail "no child after the first read the entry its earlier siblings wrote"
checks=$((checks + 1))
echo "ok: children after the first read the entry their earlier siblings wrote"
# A child leaves its parent no /proc entries of its threads to drop when
# it is reaped (docs/dumps.md, "Cost"), and reads no time zone file: its
# threads of cprof's name themselves, and its dump's date is UTC worked
# out without gmtime_r.
for pid in $children; do
  if grep -E "^$pid +openat\(.*\"(/proc/self/task/|/proc/thread-self/|/etc/localtime)" "$TMP/trace"; then
    fail "child $pid opened a thread's /proc file or the time zone file"
  fi
done
checks=$((checks + 1))
echo "ok: no child opened a thread's /proc file or /etc/localtime"
finish
