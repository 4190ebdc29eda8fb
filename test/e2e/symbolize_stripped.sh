#!/usr/bin/env bash
# Functions no symbol covers are named by object and offset: a shared
# library stripped with strip --strip-all keeps only its dynamic symbols,
# so its hidden and static functions have no name left. A program that
# dlopens it and profiles it must show them as
# "libstripped.so+0xOFFSET", each function on its own, with OFFSET the ELF
# address of its first byte (what addr2line and pprof take, so the
# unstripped library still names it), and the exported function by its
# dynamic symbol; no location may be named "" or "??", and the library's
# mapping must not claim has_functions, so that pprof symbolizes it again.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/dlopen_stripped
lib=$CPROFTEST_BUILD/test/progs/libstripped.so

mkdir -p "$TMP/lib"
cp "$lib" "$TMP/lib/libstripped.so"
strip --strip-all "$TMP/lib/libstripped.so"
readelf -S "$TMP/lib/libstripped.so" >"$TMP/sections"
grep -qE '\.symtab|\.debug_' "$TMP/sections" &&
  fail "strip left a symbol table or debug information"
nm -D --defined-only "$TMP/lib/libstripped.so" >"$TMP/dynsym"
grep -qE 'stripped_(hidden|static)' "$TMP/dynsym" &&
  fail "the hidden and static functions are dynamic symbols"
hidden=$(nm "$lib" | awk '$3 == "stripped_hidden" {print $1}' | sed 's/^0*//')
static=$(nm "$lib" | awk '$3 == "stripped_static" {print $1}' | sed 's/^0*//')
[ -n "$hidden" ] && [ -n "$static" ] || fail "no symbols in the unstripped library"
checks=$((checks + 1))
echo "ok: stripped copy; stripped_hidden at 0x$hidden, stripped_static at 0x$static in the original"

"$prog" "$TMP/lib/libstripped.so" "$TMP/cpu.pb.gz" "$TMP/heap.pb.gz" >/dev/null ||
  fail "dlopen_stripped failed"
for kind in cpu heap; do
  pprof -raw -symbolize=none "$TMP/$kind.pb.gz" >"$TMP/$kind.raw"
  opt=(); [ "$kind" = heap ] && opt=(-sample_index=alloc_space)
  pprof -top "${opt[@]}" -symbolize=none "$TMP/$kind.pb.gz" >"$TMP/$kind.top"
  pprof -traces "${opt[@]}" -symbolize=none "$TMP/$kind.pb.gz" >"$TMP/$kind.traces"
done

expect_match "$TMP/cpu.top" " libstripped\\.so\\+0x$hidden\$" "CPU: the hidden function as libstripped.so+0x$hidden"
expect_match "$TMP/cpu.top" " libstripped\\.so\\+0x$static\$" "CPU: the static function as libstripped.so+0x$static"
expect_match "$TMP/heap.top" " libstripped\\.so\\+0x$hidden\$" "heap: the hidden function's allocation"
expect_match "$TMP/heap.top" " stripped_work\$" "heap: the exported function by its dynamic symbol"
# The stacks go on through the library to main.
awk -v RS='-----------\\+-+' -v h="libstripped.so\\+0x$hidden" '$0 ~ h && /stripped_work/ && /main/ {n++} END {exit !n}' \
  "$TMP/cpu.traces" || { cat "$TMP/cpu.traces" >&2; fail "no CPU stack goes from the hidden function to main"; }
checks=$((checks + 1))
echo "ok: CPU stacks go from libstripped.so+0x$hidden through stripped_work to main"
# Each name stands for one function: every location named after the
# library has one of the two offsets (or the exported function's name).
bad=$(grep -hoE 'libstripped\.so\+0x[0-9a-f]+' "$TMP/cpu.raw" "$TMP/heap.raw" | sort -u |
  grep -vE "\\+0x($hidden|$static)\$" || true)
[ -z "$bad" ] || fail "names that are no function's first address: $bad"
checks=$((checks + 1))
echo "ok: every libstripped.so+0x... name is a function's first address"
# addr2line names them from the unstripped library.
for off in $hidden $static; do
  addr2line -f -e "$lib" "0x$off" | head -1 >"$TMP/a2l"
  expect_match "$TMP/a2l" '^stripped_(hidden|static)$' "addr2line -e the original 0x$off: $(cat "$TMP/a2l")"
done
for kind in cpu heap; do
  awk '/^Locations/ {on = 1; next} /^Mappings/ {on = 0} on' "$TMP/$kind.raw" >"$TMP/$kind.locs"
  # A mapped location without a line, or a line whose function is "??" or
  # has no name at all (pprof -raw prints a space for it).
  expect_no_match "$TMP/$kind.locs" '(M=[0-9]+ $|M=[0-9]+ (\?\?| )|^ {13}(\?\?| ))' \
    "$kind: no location unnamed or named ??"
  expect_no_match "$TMP/$kind.raw" "libstripped\\.so [0-9a-f]* ?\\[FN\\]" \
    "$kind: the library's mapping does not claim has_functions"
done
finish
