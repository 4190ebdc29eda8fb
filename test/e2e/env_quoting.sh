#!/usr/bin/env bash
# A bad CPROF_* value is reported in exactly one line, whatever it holds:
# control characters and other non-printable bytes are shown as C escapes
# inside double quotes (no newline splits the line, no escape sequence
# reaches the terminal), and a very long value is cut with a marker.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
long=$(head -c 5000 /dev/zero | tr '\0' '9')
CPROF_DUMP=$'cpu,he\npa' CPROF_HEAP_RATE=$'\e[31mred' CPROF_BLOCK_RATE="$long" \
"$host" rates >"$TMP/out" 2>"$TMP/err"
cat -v "$TMP/err"
lines=$(wc -l <"$TMP/err")
[ "$lines" -eq 3 ] || fail "expected 3 lines on stderr (one per bad variable), got $lines"
checks=$((checks + 1))
[ "$(grep -c '^cprof: ' "$TMP/err")" -eq 3 ] || fail "every line starts with cprof:"
LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$TMP/err" && fail "a control character reached stderr"
checks=$((checks + 1))
expect_match "$TMP/err" '^cprof: CPROF_DUMP="cpu,he\\npa": unknown profile "he\\npa" at column 5; dumps disabled$' "a newline is shown as \\n, within quotes"
expect_match "$TMP/err" '^cprof: CPROF_HEAP_RATE="\\x1b\[31mred": not a number; ' "ESC is shown as \\x1b"
expect_match "$TMP/err" '^cprof: CPROF_BLOCK_RATE="9{64}"\.\.\. \(5000 bytes\): out of range' "a long value is cut after 64 bytes, with a marker and its length"
n=$(awk '/CPROF_BLOCK_RATE/ {print length($0)}' "$TMP/err")
[ "$n" -lt 300 ] || fail "the long value's line has $n characters"
checks=$((checks + 1))

# A path is quoted the same way.
CPROF_DUMP=threadcreate CPROF_DUMP_OUT=$'/nonexistent/a\tb' "$host" rates >/dev/null 2>"$TMP/err2"
expect_match "$TMP/err2" '^cprof: CPROF_DUMP_OUT="/nonexistent/a\\tb": No such file or directory; dumping to stderr$' "a path with a tab is quoted"
finish
