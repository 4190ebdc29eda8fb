#!/usr/bin/env bash
# Frames in the vDSO are named from the vDSO's own symbol table, as perf
# names them: a program that loops on clock_gettime is CPU-profiled, and
# the frames of its samples in the [vdso] mapping must carry the global
# name (__vdso_clock_gettime on x86-64) that the image, written out by the
# program and read with readelf, gives the function holding clock_gettime's
# code; never [vdso]+0xOFFSET, nor the weak alias (clock_gettime), which a
# profile would mix up with libc's function of that name. Code the image
# exports no symbol for (with the kvm-clock clock source, the reader of
# the paravirtual clock is a local function below every exported one)
# is named [vdso]+0xSTART, the start of its function by the image's
# unwind table; perf shows such frames as bare addresses.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/vdso_loop

rc=0
"$prog" 1 "$TMP/vdso.so" >"$TMP/cpu.pb.gz" 2>"$TMP/err.txt" || rc=$?
cat "$TMP/err.txt"
[ "$rc" = 3 ] && skip_rest "the kernel maps no vDSO here ($(head -1 "$TMP/err.txt"))"
[ "$rc" = 0 ] || fail "vdso_loop exited $rc"

# The image's exported functions: address, binding, name (version
# dropped), as readelf reads them.
readelf --dyn-syms -W "$TMP/vdso.so" |
  awk '$4 == "FUNC" && $7 != "UND" {sub(/@.*/, "", $8); print $2, $5, $8, $3}' >"$TMP/funcs.txt"
echo "the vDSO's functions (address, binding, name, size):"
sed 's/^/  /' "$TMP/funcs.txt"
addr=$(awk '$3 ~ /(^|_)clock_gettime$/ {print $1; exit}' "$TMP/funcs.txt")
[ -n "$addr" ] || fail "the vDSO exports no clock_gettime"
want=$(awk -v a="$addr" '$1 == a && $2 == "GLOBAL" {print $3; exit}' "$TMP/funcs.txt")
[ -n "$want" ] || want=$(awk -v a="$addr" '$1 == a {print $3; exit}' "$TMP/funcs.txt")
checks=$((checks + 1))
echo "ok: clock_gettime's code at $addr in the vDSO, whose global name is $want"

pprof -top "$TMP/cpu.pb.gz" >"$TMP/top.txt"
cat "$TMP/top.txt"
expect_match "$TMP/top.txt" "^ *[0-9.]+m?s +[0-9.]+% .* $want\$" "pprof -top shows the vDSO function as $want"

# Every location in the [vdso] mapping inside an exported function has
# that function's global name; one outside every exported function is
# [vdso]+0xSTART with START at or below it and in no exported function.
pprof -raw -symbolize=none "$TMP/cpu.pb.gz" >"$TMP/raw.txt"
awk 'FNR == NR {if ($2 == "GLOBAL") {n++; lo[n] = hex($1); hi[n] = lo[n] + $4; name[n] = $3}; next}
  /^Mappings/ {m = 1} m && / \[vdso\]/ {sub(":", "", $1); id = $1; split($2, r, "/"); base = hex(r[1])}
  !m && / M=[0-9]+ / {loc[++nl] = $0}
  function hex(x,   v, i, c) {sub(/^0x/, "", x); v = 0
    for (i = 1; i <= length(x); i++) {c = index("0123456789abcdef", tolower(substr(x, i, 1))); v = v * 16 + c - 1}
    return v}
  function inside(off,   i) {for (i = 1; i <= n; i++) if (off >= lo[i] && off < hi[i]) return i; return 0}
  END {for (j = 1; j <= nl; j++) if (loc[j] ~ (" M=" id " ")) {
         split(loc[j], f, " "); off = hex(f[2]) - base; seen++; i = inside(off)
         if (i && f[4] != name[i]) {print "not named", name[i] ":", loc[j]; bad++}
         else if (!i) {
           if (f[4] !~ /^\[vdso\]\+0x[0-9a-f]+$/) {print "not [vdso]+0xSTART:", loc[j]; bad++; continue}
           start = hex(substr(f[4], 8))
           if (start > off || inside(start)) {print "a wrong start:", loc[j]; bad++}
           else {local++; starts[f[4]] = 1}
         }}
       for (s in starts) list = list " " s
       print seen + 0, "locations in the vDSO,", local + 0, "of them in code it exports no symbol for" (list ? " (" substr(list, 2) ")" : "")
       exit bad || !seen}' \
  "$TMP/funcs.txt" "$TMP/raw.txt" >"$TMP/vdso_locs.txt" ||
  { cat "$TMP/vdso_locs.txt" >&2; fail "the [vdso] mapping's locations are not named by the vDSO's global symbols"; }
checks=$((checks + 1))
echo "ok: $(tail -1 "$TMP/vdso_locs.txt"); each in an exported function carries its global name"

# The names come from the image in memory, not from libdw: with a libdw
# that cannot be loaded (a file that is not an ELF object found first),
# every other frame is an address (pprof is told not to symbolize them
# itself), the vDSO's function is still named.
mkdir -p "$TMP/lib"
printf 'not an ELF object\n' >"$TMP/lib/libdw.so.1"
LD_LIBRARY_PATH="$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$prog" 0.5 "$TMP/vdso2.so" >"$TMP/nolibdw.pb.gz" 2>"$TMP/nolibdw.err" ||
  { cat "$TMP/nolibdw.err" >&2; fail "vdso_loop failed without libdw"; }
expect_match "$TMP/nolibdw.err" 'cannot load libdw' "without libdw: cprof says it cannot load it"
pprof -top -symbolize=none "$TMP/nolibdw.pb.gz" >"$TMP/nolibdw.txt"
expect_no_match "$TMP/nolibdw.txt" ' spin$' "without libdw: the program's own functions have no names"
expect_match "$TMP/nolibdw.txt" "^ *[0-9.]+m?s +[0-9.]+% .* $want\$" "without libdw: the vDSO function is still $want"
finish
