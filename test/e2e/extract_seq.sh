#!/usr/bin/env bash
# `cprof extract` keeps every block whatever its Seq: two blocks of the same
# profile and pid whose Seq is INT64_MAX (9223372036854775807, the largest
# number there is; a larger one reads as it) get two files, the second
# under the next free number from 1 up, as do three more and a second run
# into the same directory; each file holds its block's own bytes. Blocks
# with the same name and Seq 0, negative or absent start at 1. (The second
# INT64_MAX block was lost with "File exists": the search for a free
# number stopped at the top.)
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
max=9223372036854775807

# write_log FILE SEQ...: one text dump of heap from pid 7 per SEQ, with
# "Seq: SEQ" ("none": no Seq line); the block's data names the file and
# the block's index.
write_log() {
  python3 - "$@" <<'PY'
import base64, os, sys
path, seqs = sys.argv[1], sys.argv[2:]
tag = os.path.basename(path).encode()
head = "-----BEGIN PPROF HEAP-----\nProfile: heap\nPid: 7\nDebug: 1\n"
with open(path, "w") as f:
    for i, s in enumerate(seqs):
        data = base64.b64encode(b"heap profile: %s block %d\n" % (tag, i)).decode()
        f.write(head + ("" if s == "none" else "Seq: %s\n" % s) + "\n" + data +
                "\n-----END PPROF HEAP-----\n")
PY
}

# extract NAME DIR LOG: extracts LOG into DIR, which must succeed.
extract() {
  "$cprof" extract -o "$2" "$3" >"$TMP/$1.out" 2>&1 ||
    { cat "$TMP/$1.out"; fail "$1: extract failed"; }
  cat "$TMP/$1.out"
}

# expect_files DIR COUNT: DIR holds COUNT files whose contents are COUNT
# different blocks.
expect_files() {
  local n distinct
  n=$(ls "$1" | wc -l)
  distinct=$(cat "$1"/* | sort -u | wc -l)
  echo "$(basename "$1"): $(ls "$1" | sort -V | tr '\n' ' ')"
  [ "$n" -eq "$2" ] && [ "$distinct" -eq "$2" ] ||
    fail "$(basename "$1"): $n files holding $distinct different blocks, not $2"
  checks=$((checks + 1))
  echo "ok: $(basename "$1") holds all $2 blocks"
}

write_log "$TMP/two.log" "$max" "$max"
extract two "$TMP/two" "$TMP/two.log"
expect_files "$TMP/two" 2
[ -f "$TMP/two/heap-7-$max.txt" ] && [ -f "$TMP/two/heap-7-1.txt" ] ||
  fail "the INT64_MAX blocks are not heap-7-$max.txt and heap-7-1.txt"
checks=$((checks + 1))
echo "ok: the first INT64_MAX block keeps its number, the second gets 1"

# Three more (one beyond INT64_MAX) and a second run into the same
# directory: nothing replaced, nothing lost (7 files, the first log's two
# blocks twice each and the other's three once).
write_log "$TMP/more.log" "$max" "99999999999999999999" "$max"
extract more "$TMP/two" "$TMP/more.log"
extract again "$TMP/two" "$TMP/two.log"
counts=$(cat "$TMP"/two/* | sort | uniq -c | awk '{ print $1 }' | sort | tr '\n' ' ')
echo "two: $(ls "$TMP/two" | sort -V | tr '\n' ' '); copies of each block: $counts"
[ "$(ls "$TMP/two" | wc -l)" -eq 7 ] && [ "$counts" = "1 1 1 2 2 " ] ||
  fail "after three runs the directory does not hold the 7 blocks"
checks=$((checks + 1))
echo "ok: three runs into one directory wrote all 7 blocks"

# Below the top: the same name again and again, and no usable Seq.
write_log "$TMP/low.log" 0 -5 none 1 1 "$((max - 1))" "$((max - 1))" "$max"
extract low "$TMP/low" "$TMP/low.log"
expect_files "$TMP/low" 8
finish
