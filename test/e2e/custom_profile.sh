#!/usr/bin/env bash
# A custom profile (cprof_profile_new/add/remove, docs/labels.md) tracking
# file descriptors in test/progs/custom_fds: Go's name rules and duplicate
# errors; over HTTP as pprof (go tool pprof names the opening sites) and
# Go's debug=1 text, on the index page with its count, as a ?seconds=
# delta over opens and closes, and in the dump written at exit.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/custom_fds
mkfifo "$TMP/in"
CPROF_DUMP_OUT="$TMP/dump.log" "$prog" <"$TMP/in" >"$TMP/out.txt" 2>"$TMP/err.txt" &
pid=$!
track $pid
exec 3>"$TMP/in"
for _ in $(seq 100); do grep -q '^port=' "$TMP/out.txt" && break; sleep 0.05; done
port=$(sed -n 's/^port=//p' "$TMP/out.txt")
[ -n "$port" ] || { cat "$TMP/err.txt"; fail "custom_fds did not start"; }
expect_match "$TMP/out.txt" '^dup=CPROF_EEXIST$' "a second profile of the same name is CPROF_EEXIST"
expect_match "$TMP/out.txt" '^builtin=CPROF_EEXIST$' "a built-in profile's name is CPROF_EEXIST"
expect_match "$TMP/out.txt" '^empty=CPROF_EINVAL$' "an empty name is CPROF_EINVAL"
expect_match "$TMP/out.txt" '^route=CPROF_EINVAL$' "a name an HTTP route takes is CPROF_EINVAL"
expect_match "$TMP/out.txt" '^space=CPROF_EINVAL$' "a name with a space is CPROF_EINVAL"
expect_match "$TMP/out.txt" '^adddup=CPROF_EDUPLICATE$' "adding a key twice is CPROF_EDUPLICATE"
expect_match "$TMP/out.txt" '^len=5$' "five descriptors tracked"
B=http://127.0.0.1:$port/debug/pprof

send() {
  local n
  n=$(grep -c '^done$' "$TMP/out.txt" || true)
  echo "$1" >&3
  for _ in $(seq 100); do
    [ "$(grep -c '^done$' "$TMP/out.txt" || true)" -gt "$n" ] && return
    sleep 0.05
  done
  fail "no answer to $1"
}

curl -sS -o "$TMP/fds.pb.gz" "$B/fds"
pprof -top "$TMP/fds.pb.gz" >"$TMP/top.txt"
expect_match "$TMP/top.txt" '^ +3 +60(\.00)?% .* open_a$' "pprof: open_a holds 3 of 5"
expect_match "$TMP/top.txt" '^ +2 +40(\.00)?% .* open_b$' "pprof: open_b holds 2 of 5"
pprof -raw "$TMP/fds.pb.gz" >"$TMP/raw.txt"
expect_match "$TMP/raw.txt" '^fds/count$' "sample type fds/count"
curl -sS -o "$TMP/fds.txt" "$B/fds?debug=1"
expect_match "$TMP/fds.txt" '^fds profile: total 5$' "debug=1: Go's count-profile header"
expect_match "$TMP/fds.txt" $'^#\t0x[0-9a-f]+\t+open_a\\+0x[0-9a-f]+\t+.*custom_fds\\.c:[0-9]+$' "debug=1: frame lines"
curl -sS -o "$TMP/index.html" "$B/"
expect_match "$TMP/index.html" "<td>5</td><td><a href='fds\\?debug=1'>fds</a></td>" "the index page lists fds with its count"

# A delta over four opens and two closes.
curl -sS -o "$TMP/delta.pb.gz" "$B/fds?seconds=2" &
cpid=$!
sleep 0.5
send more
send closeb
wait $cpid
pprof -top "$TMP/delta.pb.gz" >"$TMP/dtop.txt"
expect_match "$TMP/dtop.txt" '^ +4 .* open_c$' "delta: +4 at open_c"
expect_match "$TMP/dtop.txt" '^ +-2 .* open_b$' "delta: -2 at open_b"
expect_no_match "$TMP/dtop.txt" ' open_a$' "delta: open_a unchanged"

echo quit >&3
exec 3>&-
wait $pid || fail "custom_fds failed"
expect_match "$TMP/dump.log" '^-----BEGIN PPROF FDS-----$' "the dump at exit has an fds block"
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/x" "$TMP/dump.log" >/dev/null
f=$(ls "$TMP"/x/fds-*.pb.gz)
pprof -top "$f" >"$TMP/dump_top.txt"
expect_match "$TMP/dump_top.txt" '^ +4 +100(\.00)?% .* open_c$' "the dumped profile holds open_c's four"
finish
