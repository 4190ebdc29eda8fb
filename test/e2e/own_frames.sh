#!/usr/bin/env bash
# cprof's own code in a program's CPU profile is folded into frames that say
# what it is ([cprof: heap sampling], [cprof: unwind tables] ...), and no
# function of cprof's (every one libcprof.so defines, but the interposers,
# which stand for the libc functions the program called) is named:
#   - a malloc churn sampled every 4 KiB, where cprof's work is plain to
#     see: the folded frames are there, cprof's function names are not;
#   - openssl at the default settings: no cprof function name, and the
#     folded frames together under 3% of the samples.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
lib=$CPROFTEST_BUILD/libcprof.so
if sanitized_build "$cprof"; then
  skip_rest "the shares are measured in the normal build"
fi
command -v openssl >/dev/null || skip_rest "openssl is not installed"
# cprof's function names: its symbol table's text symbols, less what it
# exports under other libraries' names (its interposers).
nm --defined-only "$lib" | awk '$2 ~ /^[tT]$/ { sub(/\..*/, "", $3); print $3 }' | sort -u >"$TMP/own.txt"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ && $3 !~ /^cprof/ { print $3 }' | sort -u >"$TMP/interposers.txt"
comm -23 "$TMP/own.txt" "$TMP/interposers.txt" >"$TMP/names.txt"
[ "$(wc -l <"$TMP/names.txt")" -gt 100 ] || fail "too few of cprof's function names from nm ($(wc -l <"$TMP/names.txt"))"

# run NAME CMD...: CMD under cprof run --dump cpu; its CPU profile's
# function names in $TMP/NAME.names and pprof -top in $TMP/NAME.top.
run() {
  local name=$1
  shift
  "$cprof" run --dump cpu --dump-out "$TMP/$name.log" "$@" >/dev/null 2>"$TMP/$name.err" ||
    { cat "$TMP/$name.err"; fail "$name: the program failed"; }
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  local f
  f=$(ls "$TMP/$name"/cpu-*.pb.gz | head -1)
  [ -n "$f" ] || fail "$name: no CPU profile"
  pprof -raw "$f" | awk '/^Locations/ {on=1; next} /^Mappings/ {on=0} on' |
    sed -nE 's/^ +([0-9]+: 0x[0-9a-f]+ M=[0-9]+ )?([^ ]+) .*/\2/p' | sort -u >"$TMP/$name.names"
  [ "$(wc -l <"$TMP/$name.names")" -ge 5 ] || { pprof -raw "$f" | head -40; fail "$name: too few function names read from the profile"; }
  pprof -top -nodefraction=0 "$f" >"$TMP/$name.top"
  local found
  found=$(comm -12 "$TMP/names.txt" "$TMP/$name.names" | head -5 | tr '\n' ' ')
  [ -z "$found" ] || { cat "$TMP/$name.top"; fail "$name: cprof's functions named in the profile: $found"; }
  checks=$((checks + 1))
  echo "ok: $name: none of cprof's $(wc -l <"$TMP/names.txt") function names in the profile's $(wc -l <"$TMP/$name.names") names"
}

run churn --heap-rate 4096 -- "$CPROFTEST_BUILD/test/progs/plain_heap_churn" 1000000
expect_match "$TMP/churn.top" '\[cprof: heap sampling\]$' "churn: cprof's heap sampling is in the profile, folded"
echo "churn: flat% of the folded frames: $(awk '/\[cprof/ { sub(/^.*%  /, ""); printf "%s; ", $0 }' "$TMP/churn.top")"
grep -E '\[cprof' "$TMP/churn.top" | sed 's/^/  /' 

run openssl -- openssl speed -seconds 1 -bytes 16 sha256
share=$(awk '/\[cprof/ { gsub(/%/, "", $2); s += $2 } END { printf "%.2f", s + 0 }' "$TMP/openssl.top")
echo "openssl: the folded frames hold ${share}% of the samples"
awk -v s="$share" 'BEGIN { exit !(s < 3) }' || { cat "$TMP/openssl.top"; fail "openssl: cprof's folded frames hold ${share}%, 3% or more"; }
checks=$((checks + 1))
finish
