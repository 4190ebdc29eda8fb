#!/usr/bin/env bash
# A plugin without frame pointers loaded and unloaded 1,000 times while the
# CPU profile runs at 1000 Hz, every allocation is sampled and goroutine
# profiles signal every thread: no crash (the handlers read code only
# through the fault-free reader, and an unloaded object's unwind table is
# freed only when no walk can read it), and while it is loaded, its frames
# are walked by their CFI rows: the plugin's innermost function keeps its
# callers in the plugin and in the program.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/dlcycle
lib=$CPROFTEST_BUILD/test/progs/libdlcfi.so
cycles=1000
if sanitized_build "$prog"; then cycles=200; fi
"$prog" "$lib" "$cycles" >"$TMP/cpu.pb.gz" 2>"$TMP/err.txt" ||
  { cat "$TMP/err.txt"; fail "dlcycle died"; }
expect_match "$TMP/err.txt" "^$cycles cycles done" "$cycles load/unload cycles under profiling"
pprof -traces "$TMP/cpu.pb.gz" >"$TMP/traces.txt"
given=$(python3 "$CPROFTEST_SRC/test/e2e/traces.py" --given dlcfi_inner dlcfi_middle dlcfi_work run_plugin main <"$TMP/traces.txt")
echo "$given"
awk '$2 + 0 < 95 { bad = 1 } END { exit bad }' <<<"$given" ||
  fail "stacks through the plugin lost frames"
checks=$((checks + 1))
echo "ok: samples in the plugin keep dlcfi_middle, dlcfi_work, run_plugin and main"
finish
