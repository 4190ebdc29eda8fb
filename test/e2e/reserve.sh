#!/usr/bin/env bash
# The address space cprof takes (issue 19): loading it reserves a few MiB,
# not the 131 MiB it once did, so that under `ulimit -v` a program can
# allocate nearly what it can without cprof, and a deep recursion still has
# room for its stack with the HTTP endpoint and dumps on. The heap
# sampler's live set and region, and the stack table's frames, grow by
# chunks as samples need them: with many live sampled blocks the set grows
# past its first chunk, and when the address space runs out the profile
# counts what could not be tracked instead of crashing.
source "$(dirname "$0")/lib.bash"
plain=$CPROFTEST_BUILD/test/progs/plain_reserve
linked=$CPROFTEST_BUILD/test/progs/reserve
lib=$CPROFTEST_BUILD/libcprof.so

# live_checks NAME CMD...: many live sampled blocks, with the program run
# as CMD. The live set's first chunk holds 8192 blocks, the region's 128
# pages.
live_checks() {
  local name=$1
  shift
  CPROF_HEAP_RATE=1 "$@" live 50000 64 "$TMP/$name-nodes.txt" >"$TMP/$name-nodes.out"
  expect_match "$TMP/$name-nodes.out" '^held 50000$' "$name: 50,000 blocks held at rate 1"
  live=$(awk '/^# SampledLiveObjects = / {print $4}' "$TMP/$name-nodes.txt")
  [ "${live:-0}" -ge 50000 ] || { cat "$TMP/$name-nodes.txt" >&2; fail "$name: the live set holds $live sampled blocks, not 50,000"; }
  checks=$((checks + 1))
  echo "ok: $name: the live set grew past its first chunk (8192) to $live blocks"
  expect_match "$TMP/$name-nodes.txt" '^# UntrackedSamples = 0$' "$name: none of them untracked"
  expect_match "$TMP/$name-nodes.txt" '^50000: 3200000 \[50000: 3200000\] @' "$name: their record counts all 50,000, exactly"

  CPROF_HEAP_RATE=65536 "$@" live 40000 4000 "$TMP/$name-region.txt" >"$TMP/$name-region.out"
  expect_match "$TMP/$name-region.out" '^held 40000$' "$name: 40,000 page-sized blocks held at rate 65536"
  live=$(awk '/^# SampledLiveObjects = / {print $4}' "$TMP/$name-region.txt")
  # About 40000 * (1 - exp(-4000/65536)) = 2370 are sampled (placed in the
  # region, but under TSan, where they are over-allocated).
  [ "${live:-0}" -ge 1000 ] || { cat "$TMP/$name-region.txt" >&2; fail "$name: only $live sampled blocks live"; }
  checks=$((checks + 1))
  echo "ok: $name: the region grew past its first chunk (128 pages) to $live live sampled blocks"
}

live_checks linked "$linked"
if sanitized_build "$plain"; then
  skip_rest "a sanitizer's allocator wins over a preloaded cprof, and its shadow memory does not fit under ulimit -v"
fi
live_checks preloaded env LD_PRELOAD="$lib" "$plain"

# VmSize at start, with and without cprof.
without=$("$plain" vmsize | awk '{print $2}')
with=$(LD_PRELOAD=$lib "$plain" vmsize | awk '{print $2}')
echo "VmSize: $without KiB without cprof, $with KiB with it (+$(( (with - without) / 1024 )) MiB)"
# 5.0 MiB of tables and the library, and the 16 MiB range of cprof's own
# heap (docs/heap.md, "Address space").
[ $((with - without)) -lt $((24 * 1024)) ] || fail "loading cprof adds $((with - without)) KiB of address space (more than 24 MiB)"
checks=$((checks + 1))
echo "ok: loading cprof adds less than 24 MiB of address space"

# Under ulimit -v 100000, 1 MiB blocks until malloc fails.
limit=100000
base=$( (ulimit -v $limit; "$plain" alloc) | awk '{print $2}')
got=$( (ulimit -v $limit; LD_PRELOAD=$lib "$plain" alloc) | awk '{print $2}')
echo "ulimit -v $limit: $base MiB allocated without cprof, $got MiB with it"
[ "${got:-0}" -ge $((base - 24)) ] || fail "with cprof only $got MiB could be allocated (without: $base)"
checks=$((checks + 1))
echo "ok: with cprof the program allocates within 24 MiB of what it does without"

# A deep recursion with the endpoint and dumps on, under the same limit.
stack_kib=$(ulimit -s)
depth=6000
[ "$stack_kib" != unlimited ] && [ "$stack_kib" -lt 7000 ] && depth=$((stack_kib - 1024))
(ulimit -v $limit; "$plain" recurse $depth) >"$TMP/rec0.out" || fail "the recursion fails even without cprof"
(ulimit -v $limit; CPROF_HTTP=127.0.0.1:0 CPROF_DUMP=heap CPROF_DUMP_OUT="$TMP/rec.log" \
  LD_PRELOAD=$lib "$plain" recurse $depth) >"$TMP/rec.out" 2>"$TMP/rec.err" ||
  { cat "$TMP/rec.err" >&2; fail "the recursion through $depth KiB of stack failed with cprof, --http and dumps (status $?)"; }
expect_match "$TMP/rec.out" "^recursed $depth\$" "a recursion through $depth KiB of stack, with the endpoint and dumps on"

# Sampling every allocation until the address space runs out: the live set
# cannot grow any more, the program goes on, and the profile says how many
# sampled blocks went untracked.
# Whether the program's malloc or cprof's next chunk finds the address
# space gone first depends on where each last landed, which moves by tens
# of KiB with any build of either: the limit is raised 100 KiB at a time
# until a run ends with chunks that could not be mapped. Every run must
# end well and write a profile; one of 16 must count untracked blocks.
tries=0
for limit in $(seq 60000 100 61500); do
  tries=$((tries + 1))
  (ulimit -v "$limit"; CPROF_HEAP_RATE=1 LD_PRELOAD=$lib "$plain" fill 16 "$TMP/fill.pb.gz") >"$TMP/fill.out" 2>"$TMP/fill.err" ||
    { cat "$TMP/fill.err" >&2; fail "filling the address space at rate 1 under ulimit -v $limit failed"; }
  grep -Eq '^held [0-9]+$' "$TMP/fill.out" || fail "under ulimit -v $limit the program wrote no profile: $(cat "$TMP/fill.out")"
  pprof -comments "$TMP/fill.pb.gz" >"$TMP/fill.comments"
  grep -Eq '^cprof heap: [0-9]+ sampled objects were not tracked' "$TMP/fill.comments" && break
done
checks=$((checks + 1))
echo "ok: the program filled its address space and wrote a profile, $tries times (up to ulimit -v $limit)"
expect_match "$TMP/fill.comments" '^cprof heap: [0-9]+ sampled objects were not tracked to their free \(live table full, or out of address space: [0-9]+ mappings of a chunk failed\)$' "the profile states what could not be tracked"
pprof -sample_index=inuse_objects -top "$TMP/fill.pb.gz" >"$TMP/fill.top"
expect_match "$TMP/fill.top" 'fill$' "the profile reads back, with the filling function"
finish
