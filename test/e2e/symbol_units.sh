#!/usr/bin/env bash
# The compile-unit table (docs/symbols.md): a C++ program built -O2 -g,
# its DWARF moved to a separate compressed debug file, writes heap profiles
# of every allocation. Its first run writes the table of the program's
# compile units ("BUILD-ID.cu", private to the user) beside its symbol
# cache entry. Then the debug file's .debug_aranges is wrecked in place
# (its size, inode and modification time kept, so stamps hold), and the
# symbol cache entry and the inflated copy are removed, so that libdw
# names every address again: with the table every location is what
# addr2line -i gives on the unstripped program, as in the first run; with
# the table removed too, libdw finds no unit from the wrecked
# .debug_aranges and names no line, so the table is what found them. A
# debug file that changed, and a table of garbage, are not used, and the
# table is written anew.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
orig=$CPROFTEST_BUILD/test/progs/nofp_inline
if sanitized_build "$orig"; then
  # The sanitizer's own allocator serves the preloaded C++ program's
  # operator new: its heap profile would have no sample to name.
  skip_rest "a heap profile of a preloaded program needs the plain build"
fi
readelf -SW "$orig" | grep -q '\.debug_aranges' ||
  skip_rest "the compiler wrote no .debug_aranges into the test program"

split_debug "$orig" "$TMP/a"
bid=$(readelf -n "$orig" | awk '/Build ID/ {print $3}')
[ -n "$bid" ] || fail "the test program has no build ID"
cache=$TMP/cache
mkdir -m 700 "$cache"
table=$cache/$bid.cu

# run NAME [ENV...]: a heap profile of every allocation of a/prog; leaves
# $TMP/NAME.heap.raw (and NAME.cpu.raw, the same, for as_addr2line).
run() {
  local name=$1
  shift
  env CPROF_DEBUG_CACHE="$cache" "$@" CPROF_HEAP_RATE=1 \
    "$cprof" run --dump heap --dump-out "$TMP/$name.log" -- "$TMP/a/prog" 0.2 \
    >/dev/null 2>"$TMP/$name.err"
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  pprof -raw -symbolize=none "$TMP/$name"/heap-*.pb.gz >"$TMP/$name.heap.raw"
  cp "$TMP/$name.heap.raw" "$TMP/$name.cpu.raw"
  [ -s "$TMP/$name.err" ] && fail "$name: the run printed: $(cat "$TMP/$name.err")"
  return 0
}

lines() { grep -c 'nofp_inline\.cc:[0-9]' "$TMP/$1.heap.raw" || true; }

run first
[ -f "$table" ] || fail "no compile-unit table $table after the first run ($(ls -la "$cache" 2>&1))"
[ "$(stat -c %a "$table")" = 600 ] || fail "the table is $(stat -c %a "$table"), not 600"
[ "$(head -c 5 "$table")" = CPCUT ] || fail "the table does not start with its magic"
checks=$((checks + 1))
echo "ok: the first run wrote the program's compile-unit table ($(stat -c %s "$table") bytes, mode 600)"
as_addr2line first a "first run (units from .debug_aranges)" "$orig"
n=$(lines first)
[ "$n" -ge 3 ] || fail "the first run has only $n lines of nofp_inline.cc"

# .debug_aranges wrecked, its status kept; the entry and the inflated
# copy gone, so that libdw reads the debug file for every address.
read -r off size < <(readelf -SW "$TMP/a/prog.debug" |
  sed -n 's/.* \.debug_aranges  *PROGBITS  *[0-9a-f]* \([0-9a-f]*\) \([0-9a-f]*\) .*/\1 \2/p')
[ -n "$off" ] || fail "cannot find .debug_aranges in the debug file"
touch -r "$TMP/a/prog.debug" "$TMP/when"
dd if=/dev/zero of="$TMP/a/prog.debug" bs=1 seek=$((16#$off + 24)) \
  count=$((16#$size - 24)) conv=notrunc status=none
touch -r "$TMP/when" "$TMP/a/prog.debug"
rm -f "$cache/$bid.sym" "$cache/$bid.debug"
run second
as_addr2line second a "second run (.debug_aranges wrecked, units from the table)" "$orig"
[ "$(lines second)" -eq "$n" ] || fail "the second run has $(lines second) lines of nofp_inline.cc, the first $n"
checks=$((checks + 1))
echo "ok: the second run named the same $n lines as the first"
rm -f "$cache/$bid.sym" "$cache/$bid.debug" "$table"
run notable
[ "$(lines notable)" -eq 0 ] ||
  fail "without the table the wrecked .debug_aranges still found units ($(lines notable) lines): the second run proves nothing"
checks=$((checks + 1))
echo "ok: without the table the wrecked .debug_aranges names no line"

# A debug file that changed: the table is not used, and is written anew.
objcopy --only-keep-debug --compress-debug-sections=zlib "$orig" "$TMP/a/prog.debug"
rm -f "$cache/$bid.sym" "$cache/$bid.debug"
run good
before=$(stat -c %Y.%i "$table")
sleep 1
touch "$TMP/a/prog.debug"
rm -f "$cache/$bid.sym"
run touched
[ "$(stat -c %Y.%i "$table")" != "$before" ] || fail "a changed debug file: the table was not written again"
as_addr2line touched a "a debug file that changed" "$orig"

# Garbage in place of the table: not used, and replaced.
head -c 4096 /dev/urandom >"$table"
rm -f "$cache/$bid.sym"
run garbage
as_addr2line garbage a "a table of garbage" "$orig"
[ "$(head -c 5 "$table")" = CPCUT ] || fail "a table of garbage was not replaced"
checks=$((checks + 1))
echo "ok: a table of garbage is replaced"
finish
