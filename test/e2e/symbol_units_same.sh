#!/usr/bin/env bash
# The compile-unit tables name every address as libdwfl does
# (docs/symbols.md): test/progs/sym_units names every 16th address of its
# own code and of libc's with the debug cache off (libdwfl finds the
# units from .debug_aranges), then on twice (the first run builds each
# object's table and writes it, the second reads it): the three outputs
# are the same, line for line. The program is built -g, so its own table
# is always made; libc's only where its debug information is installed
# (libc6-dbg), which the output says.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/sym_units
cache=$TMP/cache
mkdir -m 700 "$cache"
CPROF_DEBUG_CACHE=off "$prog" 16 >"$TMP/off.txt" 2>"$TMP/off.err" ||
  fail "sym_units failed with the cache off: $(cat "$TMP/off.err")"
for run in build read; do
  CPROF_DEBUG_CACHE="$cache" "$prog" 16 >"$TMP/$run.txt" 2>"$TMP/$run.err" ||
    fail "sym_units failed ($run): $(cat "$TMP/$run.err")"
  if ! diff "$TMP/off.txt" "$TMP/$run.txt" >"$TMP/$run.diff"; then
    head -20 "$TMP/$run.diff" >&2
    fail "$run: the names differ from libdwfl's ($(grep -c '^[<>]' "$TMP/$run.diff") lines)"
  fi
  checks=$((checks + 1))
  echo "ok: $run: the same names as libdwfl's, $(cat "$TMP/$run.err"), $(grep -c '^  ' "$TMP/$run.txt") frames"
done
bid=$(readelf -n "$prog" | awk '/Build ID/ {print $3}')
[ -f "$cache/$bid.cu" ] || fail "no compile-unit table of the program ($(ls "$cache"))"
checks=$((checks + 1))
echo "ok: the program's table was written and read"
lines=$(grep -c '^  .*|[^|]*\.c|[1-9][0-9]*|' "$TMP/read.txt" || true)
[ "$lines" -gt 100 ] || fail "only $lines frames with a file and line: the comparison proves little"
checks=$((checks + 1))
echo "ok: $lines frames have a file and line"
libc=$(ldd "$prog" | awk '/libc\.so/ {print $3}')
lbid=$(readelf -n "$libc" | awk '/Build ID/ {print $3}')
if [ -f "$cache/$lbid.cu" ]; then
  echo "libc's debug information is installed: its table was compared too"
else
  echo "libc has no debug information here (libc6-dbg): only the program's table was compared"
fi
finish
