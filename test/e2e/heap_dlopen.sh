#!/usr/bin/env bash
# Heap samples through a plugin loaded after the unwind tables were built
# (test/progs/heap_dlopen.c): the heap sampler refreshes its tables at a
# thread's first sample, every 64th after, and when a walk meets code the
# tables do not know, which it then walks again. The plugin's allocations
# come before any routine refresh, and every one of them keeps its callers
# in the plugin (walkable only by their CFI rows) and in the program.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/heap_dlopen
lib=$CPROFTEST_BUILD/test/progs/libdlcfi.so
"$prog" "$lib" >"$TMP/allocs.pb.gz" 2>"$TMP/err.txt" ||
  { cat "$TMP/err.txt"; fail "heap_dlopen failed"; }
pprof -traces -sample_index=alloc_objects "$TMP/allocs.pb.gz" >"$TMP/traces.txt"
n=$(grep -c "dlcfi_inner" "$TMP/traces.txt" || true)
[ "$n" -gt 0 ] || { cat "$TMP/traces.txt"; fail "no sample in the plugin"; }
given=$(python3 "$CPROFTEST_SRC/test/e2e/traces.py" --given dlcfi_inner dlcfi_middle dlcfi_work main <"$TMP/traces.txt")
echo "$given"
awk '$2 + 0 < 100 { bad = 1 } END { exit bad }' <<<"$given" ||
  { cat "$TMP/traces.txt"; fail "heap samples through the plugin lost frames"; }
checks=$((checks + 1))
echo "ok: every heap sample in the plugin keeps dlcfi_middle, dlcfi_work and main"
finish
