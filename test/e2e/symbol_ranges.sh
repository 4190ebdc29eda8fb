#!/usr/bin/env bash
# The symbol cache names an address of an object without debug
# information by the range of another address's entry (docs/symbols.md,
# "The symbol cache"): the same symbol, or where no symbol is the same
# FDE, names every address of the range alike. test/progs/sym_units names
# every STEP-th address of a library: with the cache off (libdwfl and the
# symbol tables), then with a cache filled from every FILL-th address
# (FILL odd, and not STEP), where most of the others are named by ranges.
# The two must be the same, frame for frame, for Debian's libz (PLT stubs
# next to an FDE of the whole .plt, which no range may cross), libstdc++
# (C++ names, 1 MB of code) and test/progs/libsymorder.so (symbols
# sharing addresses, sized and sizeless).
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/sym_units

# same LABEL LIBRARY STEP FILL: the comparison for one library.
same() {
  local label=$1 lib=$2 step=$3 fill=$4 cache=$TMP/cache-$1
  mkdir -m 700 "$cache"
  CPROF_DEBUG_CACHE=off "$prog" "$step" "$lib" >"$TMP/$label.off" 2>"$TMP/$label.off.err" ||
    fail "$label: sym_units failed with the cache off: $(cat "$TMP/$label.off.err")"
  CPROF_DEBUG_CACHE=$cache "$prog" "$fill" "$lib" >/dev/null 2>"$TMP/$label.fill.err" ||
    fail "$label: sym_units failed filling the cache: $(cat "$TMP/$label.fill.err")"
  CPROF_DEBUG_CACHE=$cache "$prog" "$step" "$lib" >"$TMP/$label.read" 2>"$TMP/$label.read.err" ||
    fail "$label: sym_units failed reading the cache: $(cat "$TMP/$label.read.err")"
  if ! diff "$TMP/$label.off" "$TMP/$label.read" >"$TMP/$label.diff"; then
    head -20 "$TMP/$label.diff" >&2
    fail "$label: names by ranges differ from the symbol tables' ($(grep -c '^[<>]' "$TMP/$label.diff") lines)"
  fi
  local ranged
  ranged=$(sed -n 's/.*, \([0-9]*\) named by a cached range/\1/p' "$TMP/$label.read.err")
  [ "${ranged:-0}" -gt 0 ] ||
    fail "$label: no address was named by a range ($(cat "$TMP/$label.read.err"))"
  checks=$((checks + 1))
  echo "ok: $label: the same names as the symbol tables', $(cat "$TMP/$label.read.err")"
}

# A library of the machine's, when it has no debug information to find.
system_lib() {
  local path id
  path=$(readlink -f "$(ldconfig -p | awk -v n="$1" '$1 == n && /x86-64/ {print $NF; exit}')" 2>/dev/null) || return 1
  [ -f "$path" ] || return 1
  readelf -S "$path" | grep -q '\.debug_info' && return 1
  id=$(readelf -n "$path" | awk '/Build ID/ {print $3}')
  [ -n "$id" ] && [ -e "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] && return 1
  echo "$path"
}

# libz's fill names an address of its PLT's first entry (the FDE's
# start, no stub's) and none of the next stub's first bytes: a range made
# there would name that stub.
same symorder "$CPROFTEST_BUILD/test/progs/libsymorder.so" 1 13
for spec in libz.so.1:1:13 libstdc++.so.6:7:61; do
  IFS=: read -r name step fill <<<"$spec"
  if lib=$(system_lib "$name"); then
    same "${name%%.so*}" "$lib" "$step" "$fill"
  else
    skip_check "$name: not installed, or its debug information is"
  fi
done
finish
