#!/usr/bin/env bash
# The debug cache (docs/symbols.md): a program whose DWARF is only in a
# separate, zlib-compressed debug file (as distributions ship them) is
# profiled; the first run writes the inflated copy into the cache, named
# by the build ID, 0600 in a 0700 directory, with no compressed section
# left; a later run reads the copy (the original's compressed bytes are
# then wrecked, so only the copy can name the lines) and still gets every
# location as addr2line -i on the unstripped program, while the same run
# with the cache off loses them. The bound removes the least recently used
# entry; an unsafe or relative directory gets one line and no cache; off
# and a HOME that does not exist make nothing and say nothing.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
orig=$CPROFTEST_BUILD/test/progs/nofp_callbacks
if tsan_build "$orig"; then
  skip_rest "preloaded runs are covered by the plain and ASan builds"
fi
rt=$(preload_env "$orig" | sed 's#[^ ]*libcprof\.so##')

split_debug "$orig" "$TMP/a"
readelf -SW "$TMP/a/prog.debug" >"$TMP/debug.sections" 2>/dev/null
expect_match "$TMP/debug.sections" '\.debug_info .* C ' "the separate debug file's .debug_info is compressed"
bid=$(readelf -n "$orig" | awk '/Build ID/ {print $3}')
[ -n "$bid" ] || fail "the test program has no build ID"

# run NAME [ENV...]: profiles a/prog (cpu and heap dumps); leaves
# $TMP/NAME.err, $TMP/NAME.cpu.raw and $TMP/NAME.heap.raw.
run() {
  local name=$1
  shift
  env "$@" CPROF_HEAP_RATE=65536 LD_PRELOAD="$rt" "$cprof" run --dump cpu,heap \
    --dump-out "$TMP/$name.log" -- "$TMP/a/prog" 1 >/dev/null 2>"$TMP/$name.err"
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  for kind in cpu heap; do
    pprof -raw -symbolize=none "$TMP/$name/$kind"-*.pb.gz >"$TMP/$name.$kind.raw"
  done
}

# has_lines NAME: some location of the program's own code has a line of
# nofp_callbacks.c.
has_lines() {
  pprof -top -lines -nodecount=1000 "$TMP/$1"/cpu-*.pb.gz | grep -c 'nofp_callbacks\.c:[0-9]' || true
}

cache=$TMP/cache/debug
entry=$cache/$bid.debug
mkdir "$TMP/cache"
run first CPROF_DEBUG_CACHE="$cache"
[ -f "$entry" ] || fail "no cache entry $entry after the first run ($(ls -la "$cache" 2>&1))"
[ "$(stat -c %a "$cache")" = 700 ] || fail "the cache directory is $(stat -c %a "$cache"), not 700"
[ "$(stat -c %a "$entry")" = 600 ] || fail "the entry is $(stat -c %a "$entry"), not 600"
readelf -SW "$entry" >"$TMP/entry.sections" 2>/dev/null
expect_match "$TMP/entry.sections" '\.debug_info ' "the entry has .debug_info"
expect_no_match "$TMP/entry.sections" '\.debug_[a-z_]+ .* C ' "no section of the entry is compressed"
readelf -n "$entry" >"$TMP/entry.notes" 2>/dev/null
expect_match "$TMP/entry.notes" "Build ID: $bid" "the entry carries the build ID it is named by"
ls "$cache" >"$TMP/cache.list"
expect_no_match "$TMP/cache.list" '\.tmp$' "no temporary file is left"
[ -s "$TMP/first.err" ] && fail "the first run printed: $(cat "$TMP/first.err")"
as_addr2line first a "first run (writes the entry)" "$orig"

# The original's compressed DWARF wrecked, its build ID kept: only the
# inflated copy can name the lines now.
wreck_debug_info "$TMP/a/prog.debug"
inode=$(stat -c %i "$entry")
touch -d '2 hours ago' "$entry"
run second CPROF_DEBUG_CACHE="$cache"
[ "$(stat -c %i "$entry")" = "$inode" ] || fail "the second run wrote the entry again"
[ "$(stat -c %Y "$entry")" -gt "$(($(date +%s) - 600))" ] || fail "the second run did not mark the entry used"
as_addr2line second a "second run (the original wrecked, read from the cache)" "$orig"
[ "$(has_lines second)" -gt 0 ] || fail "the second run has no line of nofp_callbacks.c"
run off CPROF_DEBUG_CACHE=off
[ "$(has_lines off)" -eq 0 ] ||
  fail "with the cache off, the wrecked debug file still named lines: the second run proves nothing"
checks=$((checks + 1))
echo "ok: the wrecked file names no line without the cache ($(has_lines second) trace lines with it)"

# The bound: an old 3 MiB entry goes when the new one would not fit in 3.
# (The original is whole again, so that the entry is written anew.)
objcopy --only-keep-debug --compress-debug-sections=zlib "$orig" "$TMP/a/prog.debug"
mkdir -p "$TMP/c-small" && chmod 700 "$TMP/c-small"
head -c $((3 << 20)) /dev/zero >"$TMP/c-small/00aa.debug"
touch -d '1 day ago' "$TMP/c-small/00aa.debug"
head -c 1000 /dev/zero >"$TMP/c-small/00bb.debug"
run bound CPROF_DEBUG_CACHE="$TMP/c-small" CPROF_DEBUG_CACHE_MB=3
[ -f "$TMP/c-small/$bid.debug" ] || fail "no entry in the bounded cache"
[ -e "$TMP/c-small/00aa.debug" ] && fail "the least recently used entry was kept over the bound"
[ -e "$TMP/c-small/00bb.debug" ] || fail "an entry that fits was removed"
checks=$((checks + 1))
echo "ok: the bound removed the least recently used entry only"
as_addr2line bound a "bounded cache" "$orig"

# A directory others may write, and a relative one: one line each, no
# cache, lines still there (read compressed).
mkdir -p "$TMP/c-open" && chmod 777 "$TMP/c-open"
run open CPROF_DEBUG_CACHE="$TMP/c-open"
[ "$(wc -l <"$TMP/open.err")" -eq 1 ] || fail "an unsafe directory gave $(wc -l <"$TMP/open.err") lines: $(cat "$TMP/open.err")"
expect_match "$TMP/open.err" "^cprof: debug cache \"$TMP/c-open\": not a directory of this user's that only it may write; debug files are read compressed$" \
  "an unsafe directory is refused in one line"
[ -z "$(ls "$TMP/c-open")" ] || fail "something was written to the unsafe directory"
as_addr2line open a "unsafe directory (no cache)" "$orig"
run rel CPROF_DEBUG_CACHE=relative/dir
expect_match "$TMP/rel.err" '^cprof: CPROF_DEBUG_CACHE="relative/dir": not an absolute directory \(or off\); no debug cache$' \
  "a relative directory is refused in one line"
[ -e relative ] && fail "a relative directory was made"

# The default place, and a HOME that does not exist.
mkdir -p "$TMP/h-home"
run home -u CPROF_DEBUG_CACHE -u XDG_CACHE_HOME HOME="$TMP/h-home"
[ -f "$TMP/h-home/.cache/cprof/debug/$bid.debug" ] || fail "no entry under \$HOME/.cache/cprof/debug"
[ "$(stat -c %a "$TMP/h-home/.cache")" = 700 ] || fail "\$HOME/.cache was made $(stat -c %a "$TMP/h-home/.cache"), not 700"
run xdg -u CPROF_DEBUG_CACHE XDG_CACHE_HOME="$TMP/h-xdg" HOME="$TMP/h-home"
[ -f "$TMP/h-xdg/cprof/debug/$bid.debug" ] || fail "no entry under \$XDG_CACHE_HOME/cprof/debug"
run nohome -u CPROF_DEBUG_CACHE -u XDG_CACHE_HOME HOME="$TMP/missing/home"
[ -s "$TMP/nohome.err" ] && fail "a HOME that does not exist printed: $(cat "$TMP/nohome.err")"
[ -e "$TMP/missing" ] && fail "a HOME that does not exist was made"
# A long name: the refusal shows the whole path, not the 64 bytes that a
# setting's value is cut to.
long="missing-$(printf '%080d' 0)"
run noparent CPROF_DEBUG_CACHE="$TMP/$long/cache"
[ -e "$TMP/$long" ] && fail "a named directory's missing parent was made"
expect_match "$TMP/noparent.err" "^cprof: debug cache \"$TMP/$long/cache\": not a directory" \
  "a named directory whose parent does not exist is refused in one line, with its whole path"
run none CPROF_DEBUG_CACHE=off HOME="$TMP/h-none"
[ -e "$TMP/h-none" ] && fail "CPROF_DEBUG_CACHE=off made $TMP/h-none"
run zero CPROF_DEBUG_CACHE="$TMP/c-zero" CPROF_DEBUG_CACHE_MB=0
[ -e "$TMP/c-zero" ] && fail "CPROF_DEBUG_CACHE_MB=0 made the cache"
checks=$((checks + 1))
echo "ok: the default places are made 0700; off, a bound of 0 and a missing HOME make and say nothing"
finish
