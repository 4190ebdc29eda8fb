#!/usr/bin/env bash
# `cprof extract` names files in linear time: 5,000 blocks with the same
# profile, pid and Seq (took 28.7 s, a quadratic search through the names
# already written, 2 million opens for 2,000 blocks) must become
# heap-7-1.txt ... heap-7-5000.txt with a try or two each; a second run
# into the same directory goes on after them without overwriting one.
# Prints the CPU time, next to that of as many blocks with names of their
# own, and, when strace is installed, the number of opens.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/cli_lib.bash"
cprof=$CPROFTEST_BUILD/cprof
n=5000

# write_log FILE COUNT SEQ: COUNT identical text dumps of heap from pid 7,
# with "Seq: SEQ" (none when SEQ is empty; 1 to COUNT when it is "each").
write_log() {
  python3 - "$@" <<'PY'
import base64, sys
path, count, seq = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = base64.b64encode(b"heap profile: 1: 1 [1: 1] @ heap/1\n").decode()
head = "-----BEGIN PPROF HEAP-----\nProfile: heap\nPid: 7\nDebug: 1\n"
with open(path, "w") as f:
    for i in range(count):
        s = str(i + 1) if seq == "each" else seq
        f.write("app: request %d\n" % i + head + ("Seq: %s\n" % s if s else "") +
                "\n" + data + "\n-----END PPROF HEAP-----\n")
PY
}
write_log "$TMP/same.log" "$n" 1
write_log "$TMP/distinct.log" "$n" each
write_log "$TMP/more.log" 100 ""

# expect_names DIR FIRST LAST: DIR holds exactly heap-7-FIRST.txt to
# heap-7-LAST.txt.
expect_names() {
  diff <(ls "$1" | sort) <(seq "$2" "$3" | sed 's/.*/heap-7-&.txt/' | sort) >"$TMP/names.diff" ||
    { head "$TMP/names.diff" >&2; fail "$1 does not hold heap-7-$2.txt to heap-7-$3.txt"; }
  checks=$((checks + 1))
  echo "ok: $(basename "$1") holds heap-7-$2.txt to heap-7-$3.txt"
}

# The yardstick: as many blocks with names of their own (Seq 1 to n), one
# open each, before and after the fix. What an open costs varies a lot
# with the machine and its disk, so the same-name run is compared with it.
measure "$TMP/distinct.m" "$cprof" extract -o "$TMP/d" "$TMP/distinct.log" >/dev/null 2>"$TMP/d.err"
read -r _ base status <"$TMP/distinct.m"
[ "$status" -eq 0 ] || { cat "$TMP/d.err"; fail "extract failed on distinct names"; }
expect_names "$TMP/d" 1 "$n"
measure "$TMP/same.m" "$cprof" extract -o "$TMP/x" "$TMP/same.log" >"$TMP/x.out" 2>"$TMP/x.err"
read -r rss cpu status <"$TMP/same.m"
echo "$n blocks with one name: status $status, CPU ${cpu}s (${base}s with distinct names), peak RSS $((rss / 1024)) MB"
[ "$status" -eq 0 ] || { cat "$TMP/x.err"; fail "extract failed"; }
expect_match "$TMP/x.out" "^cprof extract: $n profiles written" "all $n blocks written"
expect_names "$TMP/x" 1 "$n"
# Linear costs about twice the yardstick (a taken name, then a free one);
# the quadratic search cost 15 to 150 times it (12.5 million opens).
awk -v c="$cpu" -v b="$base" 'BEGIN { exit !(c < 4 * b + 2) }' ||
  fail "$n blocks with one name took ${cpu}s of CPU, ${base}s with distinct names: the name search is not linear"
checks=$((checks + 1))

# A second run into the same directory: blocks without Seq go on after the
# files there, none overwritten (each file still holds its block).
"$cprof" extract -o "$TMP/x" "$TMP/more.log" >"$TMP/more.out" || fail "the second extract failed"
expect_names "$TMP/x" 1 $((n + 100))
[ "$(cat "$TMP"/x/heap-7-*.txt | sort -u | wc -l)" -eq 1 ] || fail "a file was overwritten with something else"

# The number of opens, when strace can count them: one or two per block.
if command -v strace >/dev/null; then
  rm -rf "$TMP/x"
  # LeakSanitizer cannot run under ptrace.
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
    strace -f -qq -e trace=openat,open -o "$TMP/trace" "$cprof" extract -o "$TMP/x" "$TMP/same.log" >/dev/null ||
    fail "extract under strace"
  opens=$(grep -c 'heap-7-' "$TMP/trace" || true)
  echo "opens of output files for $n blocks: $opens"
  [ "$opens" -le $((2 * n)) ] || fail "$opens opens for $n blocks"
  checks=$((checks + 1))
else
  echo "note: strace not installed; the count of opens is not checked"
fi
finish
