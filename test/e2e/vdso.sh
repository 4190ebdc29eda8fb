#!/usr/bin/env bash
# Frames in the vDSO are named from the vDSO's own symbol table, as perf
# names them: a program that loops on clock_gettime is CPU-profiled, and
# the frames of its samples in the [vdso] mapping must carry the global
# name (__vdso_clock_gettime on x86-64) that the image, written out by the
# program and read with readelf, gives the function holding clock_gettime's
# code; never [vdso]+0xOFFSET, nor the weak alias (clock_gettime), which a
# profile would mix up with libc's function of that name.
source "$(dirname "$0")/lib.bash"
prog=$CPROF_BUILD/test/progs/vdso_loop

rc=0
"$prog" 1 "$TMP/vdso.so" >"$TMP/cpu.pb.gz" 2>"$TMP/err.txt" || rc=$?
cat "$TMP/err.txt"
[ "$rc" = 3 ] && skip_rest "the kernel maps no vDSO here ($(head -1 "$TMP/err.txt"))"
[ "$rc" = 0 ] || fail "vdso_loop exited $rc"

# The image's exported functions: address, binding, name (version
# dropped), as readelf reads them.
readelf --dyn-syms -W "$TMP/vdso.so" |
  awk '$4 == "FUNC" && $7 != "UND" {sub(/@.*/, "", $8); print $2, $5, $8}' >"$TMP/funcs.txt"
echo "the vDSO's functions (address, binding, name):"
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
expect_no_match "$TMP/top.txt" '\[vdso\]' "no frame named by [vdso] and an offset"

# Every location in the [vdso] mapping has one of its global names.
pprof -raw -symbolize=none "$TMP/cpu.pb.gz" >"$TMP/raw.txt"
awk '$2 == "GLOBAL" {print $3}' "$TMP/funcs.txt" >"$TMP/globals.txt"
awk 'FNR == NR {ok[$1] = 1; next}
  /^Mappings/ {m = 1} m && / \[vdso\]/ {sub(":", "", $1); id = $1}
  !m && / M=[0-9]+ / {loc[++n] = $0}
  END {for (i = 1; i <= n; i++) if (loc[i] ~ (" M=" id " ")) {
         split(loc[i], f, " "); seen++; if (!(f[4] in ok)) {print "not a global vDSO name:", loc[i]; bad++}}
       print seen + 0, "locations in the vDSO"; exit bad || !seen}' \
  "$TMP/globals.txt" "$TMP/raw.txt" >"$TMP/vdso_locs.txt" ||
  { cat "$TMP/vdso_locs.txt" >&2; fail "the [vdso] mapping's locations are not all named by the vDSO's global symbols"; }
checks=$((checks + 1))
echo "ok: $(tail -1 "$TMP/vdso_locs.txt"), each named by a global symbol of the vDSO"

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
