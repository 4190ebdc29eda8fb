#!/usr/bin/env bash
# The block profile end to end on every kind of wait it covers (condition
# variable, semaphore, barrier, join, rwlock), linked and preloaded: the
# waiting side is named, and a condvar consumer's wait is charged to it.
source "$(dirname "$0")/lib.bash"

check() {
  local label=$1 pb=$2 txt=$3
  pprof -top -unit=ms -sample_index=delay "$pb" >"$TMP/top.txt"
  # The consumer waits for a producer that sleeps 5 ms per item, 20 items.
  expect_match "$TMP/top.txt" '^ *[0-9.]+m?s +[0-9.]+% .* consumer_wait$' "$label: the condvar consumer is named"
  ms=$(awk '$NF == "consumer_wait" {v = $1; sub(/ms$/, "", v); if ($1 ~ /us$/) {sub(/us$/, "", v); v /= 1000}; print v}' "$TMP/top.txt")
  awk -v v="$ms" 'BEGIN { exit !(v > 60) }' || fail "$label: consumer_wait delay $ms ms, expected ~100 ms"
  echo "ok: $label: consumer_wait blocked ${ms} ms"
  expect_no_match "$TMP/top.txt" ' producer_put$' "$label: the producer is not charged"
  expect_match "$TMP/top.txt" ' sem_waiter$' "$label: semaphore wait named"
  expect_match "$TMP/top.txt" ' barrier_waiter$' "$label: barrier wait named"
  expect_match "$TMP/top.txt" ' join_waiter$' "$label: join named"
  expect_match "$TMP/top.txt" ' rwlock_writer$' "$label: rwlock wait named"
  expect_match "$txt" '^--- contention:$' "$label: debug=1 header"
}

prog=$CPROFTEST_BUILD/test/progs/block_kinds
"$prog" "$TMP/linked.pb.gz" "$TMP/linked.txt"
check linked "$TMP/linked.pb.gz" "$TMP/linked.txt"
plain=$CPROFTEST_BUILD/test/progs/plain_block_kinds
tsan_build "$plain" && skip_rest "preloaded runs under TSan (see lib.bash)"
CPROF_BLOCK_RATE=1 LD_PRELOAD=$(preload_env "$plain") "$plain" "$TMP/pre.pb.gz" "$TMP/pre.txt"
check preloaded "$TMP/pre.pb.gz" "$TMP/pre.txt"
finish
