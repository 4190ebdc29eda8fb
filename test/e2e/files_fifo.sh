#!/usr/bin/env bash
# A FIFO where a debug file is looked for must cost nothing but that debug
# file: cprof opens what it reads with O_NONBLOCK and takes only regular
# files, and its goroutine collection (whose lock fork takes) never waits
# on a file. test/progs/files_fork asks for its goroutine profile, forks
# and exits with an exit dump (CPROF_DUMP=cpu), in three copies:
#   plain  the program as built (the normal times);
#   fifo   stripped, with a FIFO at files_fork.debug beside it (the name
#          looked for when an object has no .gnu_debuglink);
#   link   stripped, its debug information moved to a file its
#          .gnu_debuglink names, and that file replaced by a FIFO.
# Each must answer the goroutine request within 5 s of the plain copy's
# time, fork at once, write its exit dump and exit 0 within 30 s (before,
# the request never answered, the fork and the exit dump waited for ever),
# and its profiles must still name the frames they can (libc's). The fifo
# copy also runs with its exit dump alone (no goroutine request, no fork),
# which must finish as promptly.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/files_fork
# ThreadSanitizer kills a child of a multi-threaded process that starts a
# thread; this child starts none, but the option keeps TSan's own quiet.
tsan_build "$prog" &&
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"

mkdir -p "$TMP/plain" "$TMP/fifo" "$TMP/link"
cp "$prog" "$TMP/plain/files_fork"
cp "$prog" "$TMP/fifo/files_fork"
strip --strip-all "$TMP/fifo/files_fork"
mkfifo "$TMP/fifo/files_fork.debug"
objcopy --only-keep-debug "$prog" "$TMP/link/files_fork.dbg"
objcopy --strip-all --add-gnu-debuglink="$TMP/link/files_fork.dbg" "$prog" "$TMP/link/files_fork"
rm "$TMP/link/files_fork.dbg"
mkfifo "$TMP/link/files_fork.dbg"
readelf -p .gnu_debuglink "$TMP/link/files_fork" >"$TMP/link.debuglink" 2>&1 || true
expect_match "$TMP/link.debuglink" 'files_fork\.dbg' "the link copy's .gnu_debuglink names files_fork.dbg"
for d in fifo link; do
  readelf -S "$TMP/$d/files_fork" >"$TMP/$d.sections"
  expect_no_match "$TMP/$d.sections" '\.symtab|\.debug_info' "$d: stripped (no .symtab, no .debug_info)"
done
ls -l "$TMP/fifo" "$TMP/link" | grep '^p' >"$TMP/fifos"
expect_match "$TMP/fifos" 'files_fork\.(debug|dbg)$' "FIFOs in place: $(awk '{print $NF}' "$TMP/fifos" | tr '\n' ' ')"

# run NAME: runs copy NAME (at most 30 s, then SIGKILL) and checks it.
run() {
  local name=$1 start end status=0 ms asan=${ASAN_OPTIONS:-}
  # LeakSanitizer matches the leaks its suppressions cover (libc's own) by
  # symbolizing them at exit, and its symbolizer follows .gnu_debuglink
  # with a blocking open: the link copy would hang there, in the sanitizer.
  [ "$name" = link ] && sanitized_build "$prog" && asan="${asan:+$asan:}detect_leaks=0"
  start=$(date +%s%N)
  ASAN_OPTIONS=$asan CPROF_DUMP=cpu CPROF_DUMP_OUT="$TMP/$name.log" \
    timeout -s KILL 30 "$TMP/$name/files_fork" "$TMP/$name.goroutine" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" || status=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  echo "$name: exit status $status after $ms ms; $(tr '\n' ' ' <"$TMP/$name.out")"
  [ "$status" -eq 0 ] || { cat "$TMP/$name.err" >&2; fail "$name: exit status $status (137: killed after 30 s)"; }
  checks=$((checks + 1))
  echo "ok: $name: exited 0 in $ms ms"
  eval "${name}_ms=\$(awk '\$1 == \"goroutine_ms\" {print \$2}' \"\$TMP/\$name.out\")"
  local fork
  fork=$(awk '$1 == "fork_ms" {print $2}' "$TMP/$name.out")
  [ -n "$fork" ] && [ "$fork" -lt 2000 ] || fail "$name: fork took ${fork:-forever} ms"
  checks=$((checks + 1))
  echo "ok: $name: fork returned in $fork ms"
  # The goroutine profile names libc's frames of the sleeping thread.
  expect_match "$TMP/$name.goroutine" '^#.*nanosleep' "$name: the goroutine profile names nanosleep"
  "$cprof" extract -o "$TMP/$name.x" "$TMP/$name.log" >"$TMP/$name.extract" 2>&1 ||
    { cat "$TMP/$name.extract"; fail "$name: extract failed"; }
  local pb
  pb=$(ls "$TMP/$name.x"/cpu-*.pb.gz 2>/dev/null | head -1)
  [ -n "$pb" ] || fail "$name: no CPU profile in the exit dump"
  pprof -raw -symbolize=none "$pb" >"$TMP/$name.raw" || { cat "$TMP/$name.raw"; fail "$name: pprof cannot read the exit dump"; }
  expect_match "$TMP/$name.raw" '__libc_start_(call_)?main' "$name: the exit dump's CPU profile names libc's frames"
}

run plain
run fifo
run link

# The exit dump alone, with the FIFO in place.
start=$(date +%s%N)
status=0
CPROF_DUMP=cpu CPROF_DUMP_OUT="$TMP/dumponly.log" timeout -s KILL 30 "$TMP/fifo/files_fork" - \
  >/dev/null 2>"$TMP/dumponly.err" || status=$?
ms=$((($(date +%s%N) - start) / 1000000))
echo "fifo, exit dump alone: exit status $status after $ms ms"
[ "$status" -eq 0 ] || { cat "$TMP/dumponly.err" >&2; fail "fifo, exit dump alone: exit status $status (137: killed after 30 s)"; }
"$cprof" extract -o "$TMP/dumponly.x" "$TMP/dumponly.log" >"$TMP/dumponly.extract" 2>&1 ||
  { cat "$TMP/dumponly.extract"; fail "fifo, exit dump alone: extract failed"; }
ls "$TMP/dumponly.x" >"$TMP/dumponly.files"
expect_match "$TMP/dumponly.files" '^cpu-.*\.pb\.gz$' "fifo, exit dump alone: exited 0 in $ms ms with its CPU profile"
for name in fifo link; do
  ms=${name}_ms
  [ -n "${!ms}" ] && [ "${!ms}" -le $((plain_ms + 5000)) ] ||
    fail "$name: the goroutine profile took ${!ms:-forever} ms (plain copy: $plain_ms ms)"
  checks=$((checks + 1))
  echo "ok: $name: the goroutine profile took ${!ms} ms (plain copy: $plain_ms ms)"
done
# The plain copy's names: its own functions, from its symbol table.
expect_match "$TMP/plain.goroutine" '^#.*sleeper' "plain: the goroutine profile names sleeper"
finish
