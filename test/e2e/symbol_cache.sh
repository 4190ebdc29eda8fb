#!/usr/bin/env bash
# The symbol cache (docs/symbols.md): a C++ program built -O2 -g, its DWARF
# moved to a separate compressed debug file, writes heap profiles of every
# allocation (a set of addresses that is the same at every run). A CPU
# profile's run writes the cache's entry for the program's build ID; the
# first heap run names its addresses with libdw and appends them to the
# entry, in place. Then the debug file's DWARF is wrecked in place, its size,
# inode and modification time kept, and the inflated copy is removed: a
# second run still names every location as addr2line -i does on the
# unstripped program, with the same traces as the first, and reads no
# debug file (none is inflated again), while the same run with the cache
# off has no line of the program. A debug file that changes (touched),
# then a good one again, and an entry of garbage, are each noticed: the
# entry is not used, and is written anew. A dump of a CPU and a heap
# profile writes the entry once (under strace).
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
orig=$CPROFTEST_BUILD/test/progs/nofp_inline
if sanitized_build "$orig"; then
  # The sanitizer's own allocator serves the preloaded C++ program's
  # operator new: its heap profile would have no sample to name.
  skip_rest "a heap profile of a preloaded program needs the plain build"
fi
rt=$(preload_env "$orig" | sed 's#[^ ]*libcprof\.so##')

split_debug "$orig" "$TMP/a"
bid=$(readelf -n "$orig" | awk '/Build ID/ {print $3}')
[ -n "$bid" ] || fail "the test program has no build ID"
cache=$TMP/cache
entry=$cache/$bid.sym

# run NAME [ENV...]: a heap profile of every allocation of a/prog; leaves
# $TMP/NAME.heap.raw (and NAME.cpu.raw, the same, for as_addr2line) and
# $TMP/NAME.traces.
run() {
  local name=$1
  shift
  env CPROF_DEBUG_CACHE="$cache" "$@" CPROF_HEAP_RATE=1 LD_PRELOAD="$rt" \
    "$cprof" run --dump heap --dump-out "$TMP/$name.log" -- "$TMP/a/prog" 0.2 \
    >/dev/null 2>"$TMP/$name.err"
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  pprof -raw -symbolize=none "$TMP/$name"/heap-*.pb.gz >"$TMP/$name.heap.raw"
  cp "$TMP/$name.heap.raw" "$TMP/$name.cpu.raw"
  pprof -traces -lines -sample_index=alloc_objects -symbolize=none \
    "$TMP/$name"/heap-*.pb.gz | grep -E '^ +[^ -]' | sed -E 's/^ +[0-9.]+[kMG]?[B ]? +//; s/^ +//' \
    | grep -v '^bytes:' | sort >"$TMP/$name.traces"
  [ -s "$TMP/$name.err" ] && fail "$name: the run printed: $(cat "$TMP/$name.err")"
  return 0
}

lines() { grep -c 'nofp_inline\.cc:[0-9]' "$TMP/$1.traces" || true; }

mkdir -m 700 "$cache"
# A CPU profile first: it writes the entry, with the addresses its samples
# had. The heap profile's run then adds its own as a part appended to that
# file (the same inode, grown), which the second run below reads.
env CPROF_DEBUG_CACHE="$cache" LD_PRELOAD="$rt" "$cprof" run --dump cpu \
  --dump-out "$TMP/cpufirst.log" -- "$TMP/a/prog" 0.2 >/dev/null 2>&1
[ -f "$entry" ] || fail "no symbol cache entry $entry after a CPU profile's run ($(ls -la "$cache" 2>&1))"
was=$(stat -c '%i %s' "$entry")
run first
[ -f "$entry" ] || fail "no symbol cache entry $entry after the first run ($(ls -la "$cache" 2>&1))"
now=$(stat -c '%i %s' "$entry")
[ "${now% *}" = "${was% *}" ] && [ "${now#* }" -gt "${was#* }" ] ||
  fail "the heap profile's addresses were not appended to the entry (inode and size were $was, are $now)"
checks=$((checks + 1))
echo "ok: a run naming new addresses appended them (the entry grew from ${was#* } to ${now#* } bytes in place)"
[ "$(stat -c %a "$entry")" = 600 ] || fail "the entry is $(stat -c %a "$entry"), not 600"
[ "$(head -c 5 "$entry")" = CPSYM ] || fail "the entry does not start with its magic"
ls "$cache" >"$TMP/cache.list"
expect_no_match "$TMP/cache.list" '\.tmp$' "no temporary file is left"
as_addr2line first a "first run (libdw names, the entry is written)" "$orig"
[ "$(lines first)" -ge 3 ] || fail "the first run has only $(lines first) lines of nofp_inline.cc"

# Only the entry can name the lines now: the debug file's DWARF is zeroes
# (its status kept, so the entry's stamp holds), its inflated copy gone.
touch -r "$TMP/a/prog.debug" "$TMP/when"
wreck_debug_info "$TMP/a/prog.debug"
touch -r "$TMP/when" "$TMP/a/prog.debug"
rm -f "$cache/$bid.debug"
run second
as_addr2line second a "second run (the debug file wrecked, named from the entry)" "$orig"
if ! diff "$TMP/first.traces" "$TMP/second.traces" >"$TMP/traces.diff"; then
  head -20 "$TMP/traces.diff" >&2
  fail "the second run's traces differ from the first's"
fi
checks=$((checks + 1))
echo "ok: the same $(wc -l <"$TMP/second.traces") trace lines as the first run"
[ -e "$cache/$bid.debug" ] && fail "the second run read the debug file (its copy was inflated again)"
checks=$((checks + 1))
echo "ok: the second run read no debug file"
run off CPROF_DEBUG_CACHE=off
[ "$(lines off)" -eq 0 ] ||
  fail "with the cache off, the wrecked debug file still named $(lines off) lines: the second run proves nothing"
checks=$((checks + 1))
echo "ok: without the cache the wrecked file names no line ($(lines second) with it)"
# With frame-pointer walks only there is no unwind index to tell the
# loader's mappings, and the cache is not used (docs/symbols.md).
run fp CPROF_UNWIND=fp
[ "$(lines fp)" -eq 0 ] || fail "with CPROF_UNWIND=fp the cache was used ($(lines fp) lines)"
checks=$((checks + 1))
echo "ok: with CPROF_UNWIND=fp the cache is not used"

# A dump of two profiles, each naming addresses of the program the other
# lacks, writes the entry once, after both (strace sees one rename onto
# it); and the second run names both profiles' addresses from it.
if command -v strace >/dev/null; then
  rm -f "$entry"
  both() {
    env CPROF_DEBUG_CACHE="$cache" CPROF_HEAP_RATE=1 LD_PRELOAD="$rt" \
      strace -f -qq -e trace=rename,renameat,renameat2 -o "$TMP/$1.renames" \
      "$cprof" run --dump cpu,heap --dump-out "$TMP/$1.log" -- \
      "$TMP/a/prog" 0.3 >/dev/null 2>"$TMP/$1.err"
  }
  both both1
  n=$(grep -c "$bid\.sym\"" "$TMP/both1.renames" || true)
  [ "$n" -eq 1 ] || fail "a dump of cpu,heap wrote the program's entry $n times, not once: $(grep "$bid" "$TMP/both1.renames")"
  checks=$((checks + 1))
  echo "ok: a dump of two profiles writes the entry once"
else
  skip_check "strace is not installed: the one write of a two-profile dump is not checked"
fi

# A debug file that changed: the entry is not used (the wrecked DWARF is
# read, so no line), and is written again for what was read.
touch "$TMP/a/prog.debug"
before=$(stat -c %Y.%i "$entry")
sleep 1
run touched
[ "$(lines touched)" -eq 0 ] || fail "a changed debug file: the old entry was used ($(lines touched) lines)"
[ "$(stat -c %Y.%i "$entry")" != "$before" ] || fail "a changed debug file: the entry was not written again"
checks=$((checks + 1))
echo "ok: a debug file that changed is read again, and the entry rewritten"
objcopy --only-keep-debug --compress-debug-sections=zlib "$orig" "$TMP/a/prog.debug"
run good
as_addr2line good a "a good debug file again" "$orig"

# Garbage in place of the entry: not used, and replaced.
head -c 4096 /dev/urandom >"$entry"
run garbage
as_addr2line garbage a "an entry of garbage (not used)" "$orig"
[ "$(head -c 5 "$entry")" = CPSYM ] || fail "the garbage entry was not replaced"
checks=$((checks + 1))
echo "ok: the garbage entry was replaced by a good one"
finish
