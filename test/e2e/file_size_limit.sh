#!/usr/bin/env bash
# A program whose file size limit (ulimit -f, RLIMIT_FSIZE) is below what
# cprof writes into its cache directory (an object's unwind table, its
# symbols) must run to its end as it does without cprof: a write past the
# limit raises SIGXFSZ, whose default action kills the process (exit
# status 153). cprof's writes fail instead, the entries that do not fit
# are not kept and leave no temporary file, a dump into a pipe, which has
# no size, arrives whole, and a dump into a file stops at the limit.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/nofp_inline
if tsan_build "$prog"; then
  skip_rest "preloaded runs (the TSan build cannot preload, see lib.bash)"
fi
rt=$(preload_env "$prog" | sed 's#[^ ]*libcprof\.so##')

# run CACHE LIMIT_KIB: the program for 0.2 s of CPU with cpu and heap
# dumped to stderr, which a reader outside the limit (cat) copies to
# $TMP/CACHE.log; the program's own output goes to $TMP/CACHE.out, its
# exit status to $TMP/CACHE.status.
run() {
  local cache=$TMP/$1 limit=$2
  mkdir -m 700 -p "$cache"
  (
    ulimit -f "$limit"
    status=0
    env CPROF_DEBUG_CACHE="$cache" LD_PRELOAD="$rt" \
      "$cprof" run --dump cpu,heap -- "$prog" 0.2 2>&1 >"$TMP/$1.out" ||
      status=$?
    echo "$status" >"$TMP/$1.status"
  ) 2>&1 | cat >"$TMP/$1.log"
}

# Without a limit: the largest entry this machine's objects make.
run free unlimited
[ "$(cat "$TMP/free.status")" = 0 ] || fail "without a limit the program exited $(cat "$TMP/free.status")"
read -r largest name < <(find "$TMP/free" -type f -printf '%s %f\n' | sort -n | tail -1)
[ -n "$largest" ] || fail "no cache entry was written without a limit"
# A limit half the largest entry's size: that entry cannot be written.
limit=$((largest / 2048))
[ "$limit" -ge 4 ] || skip_rest "the largest cache entry here has only $largest bytes: no limit below it leaves room for the program"
echo "largest entry $largest bytes; limit $limit KiB"

run limited "$limit"
status=$(cat "$TMP/limited.status")
[ "$status" = 0 ] || fail "under ulimit -f $limit the program exited $status (153 is SIGXFSZ)"
checks=$((checks + 1))
echo "ok: under ulimit -f $limit the program exited 0"
expect_match "$TMP/limited.out" '^[0-9]+ [0-9]+ [0-9]+$' "the program's own output is whole"
over=$(find "$TMP/limited" -type f -size +"$((limit * 1024))"c | head -3)
[ -z "$over" ] || fail "entries past the limit: $over"
ls "$TMP/limited" >"$TMP/limited.list"
expect_no_match "$TMP/limited.list" '\.tmp$' "no temporary file is left"
[ ! -e "$TMP/limited/$name" ] ||
  fail "$name ($largest bytes without the limit) was kept under it ($(stat -c %s "$TMP/limited/$name") bytes)"
checks=$((checks + 1))
echo "ok: $name ($largest bytes) was not kept under the limit; $(wc -l <"$TMP/limited.list") entries were"

"$cprof" extract -o "$TMP/x" "$TMP/limited.log" >"$TMP/extract.txt"
expect_match "$TMP/extract.txt" '2 profiles written' "the dump into the pipe arrived whole"
pprof -top "$TMP"/x/cpu-*.pb.gz >"$TMP/top.txt"
expect_match "$TMP/top.txt" 'count_words|count_keys|make_names|sort_items' "go tool pprof reads the CPU profile, the program's functions named"

# The dump into a file (--dump-out) at the limit: the write fails there,
# the program runs on, and extract leaves out the block cut short.
dump_size=$(stat -c %s "$TMP/free.log")
small=$((dump_size / 2048))
if [ "$small" -lt 4 ]; then
  skip_check "the dump has only $dump_size bytes: no limit below it leaves room for the program"
else
  status=0
  (
    ulimit -f "$small"
    env CPROF_DEBUG_CACHE="$TMP/free" LD_PRELOAD="$rt" \
      "$cprof" run --dump cpu,heap --dump-out "$TMP/cut.log" -- "$prog" 0.2 \
      >"$TMP/cut.out" 2>"$TMP/cut.err"
  ) || status=$?
  [ "$status" = 0 ] || fail "a dump into a file past ulimit -f $small: the program exited $status (153 is SIGXFSZ)"
  expect_match "$TMP/cut.out" '^[0-9]+ [0-9]+ [0-9]+$' "a dump into a file past the limit: the program ran on, its output whole"
  [ "$(stat -c %s "$TMP/cut.log")" -le $((small * 1024)) ] || fail "the dump file passed the limit"
  "$cprof" extract -o "$TMP/y" "$TMP/cut.log" >"$TMP/cut.extract" 2>&1 || true
  expect_match "$TMP/cut.extract" 'truncated' "extract says the block cut short is left out"
fi
finish
