#!/usr/bin/env bash
# docs/design.md's recipe for a profile, made true on a copy of the tree:
# the toy windowed profile of test/e2e/recipe/ (a profile file and its
# header) and two lines in the registry's table are all that is added,
# and every sink serves it with no change of its own: the endpoint's
# index page lists it and /debug/pprof/toy?seconds=1 answers a profile
# go tool pprof reads, and CPROF_DUMP=toy dumps it when SIGTERM ends the
# program, which `cprof extract` gets back. The copy is built -O0 as one
# shared library.
set -euo pipefail
. "$(dirname "$0")/lib.bash"

sanitized_build "$CPROFTEST_BUILD/test/progs/parked" && skip_rest "checked in the normal build (the same sources)"
command -v pkg-config >/dev/null || skip_rest "pkg-config is not installed"
tree=$TMP/tree
mkdir -p "$tree"
cp -r "$CPROFTEST_SRC/src" "$CPROFTEST_SRC/include" "$tree/"
cp "$CPROFTEST_SRC/test/e2e/recipe/toy.c" "$CPROFTEST_SRC/test/e2e/recipe/toy.h" "$tree/src/profile/"
reg=$tree/src/profile/registry.c
sed -i 's|^#include "profile/threadcreate.h"$|&\n#include "profile/toy.h"|' "$reg"
sed -i 's|^    &cprof__threadcreate_profile,$|&\n    \&cprof__toy_profile,|' "$reg"

# The recipe's claim: a profile file, its header and the registry's lines.
(cd "$TMP" && diff -r "$CPROFTEST_SRC/src" tree/src >"$TMP/tree.diff") || true
grep -E '^(Only in|diff )' "$TMP/tree.diff" | sed "s|$CPROFTEST_SRC/||" >"$TMP/changed.txt"
cat "$TMP/changed.txt"
expect_match "$TMP/changed.txt" '^Only in tree/src/profile: toy\.c$' "the profile file is added"
expect_match "$TMP/changed.txt" '^Only in tree/src/profile: toy\.h$' "its header is added"
expect_match "$TMP/changed.txt" '^diff -r src/profile/registry\.c tree/src/profile/registry\.c$' "the registry gets its line"
[ "$(wc -l <"$TMP/changed.txt")" -eq 3 ] || fail "the recipe changed more than the profile and the registry"
[ "$(grep -c '^>' "$TMP/tree.diff")" -eq 2 ] || fail "the registry got more than two lines: $(cat "$TMP/tree.diff")"
echo "ok: nothing else changed (no sink, encoder or source file)"
checks=$((checks + 1))

flags=(-O0 -g -fPIC -fvisibility=hidden -D_GNU_SOURCE -DCPROF_BUILDING -fno-omit-frame-pointer
  -I"$tree/include" -I"$tree/src" -I"$CPROFTEST_BUILD/generated"
  $(pkg-config --cflags libmicrohttpd libcurl libdw zlib))
mkdir -p "$TMP/obj"
find "$tree/src" -name '*.c' | sort >"$TMP/sources"
export TMP
xargs -P "$(nproc)" -I{} sh -c 's=$1; shift; exec cc "$@" -c "$s" -o "$TMP/obj/$(echo "$s" | tr / _).o"' _ {} "${flags[@]}" <"$TMP/sources" 2>"$TMP/cc.err" ||
  { cat "$TMP/cc.err"; fail "the tree with the toy profile does not build"; }
# The C++ operator new interposers need -fexceptions (CMakeLists.txt).
cc "${flags[@]}" -fexceptions -c "$tree/src/source/cxx_interpose.c" -o "$TMP/obj/cxx.o"
rm -f "$TMP"/obj/*source_cxx_interpose.c.o
cc -shared -o "$TMP/libtoy.so" "$TMP"/obj/*.o -lz -ldl -lpthread -Wl,-z,now ||
  fail "the tree with the toy profile does not link"
echo "ok: the tree with the toy profile builds"
checks=$((checks + 1))

port=$(free_port)
CPROF_HTTP=127.0.0.1:$port CPROF_DUMP=toy CPROF_DUMP_OUT="$TMP/dump.log" \
  LD_PRELOAD="$TMP/libtoy.so" "$CPROFTEST_BUILD/test/progs/plain_worker" 60 \
  >/dev/null 2>"$TMP/worker.err" &
pid=$!
track "$pid"
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/debug/pprof/" >"$TMP/index.html" && break
  sleep 0.05
done
expect_match "$TMP/index.html" 'href="toy\?debug=1">toy</a>|href=.toy' "the index page lists the toy profile"
curl -sf -o "$TMP/toy.pb.gz" "http://127.0.0.1:$port/debug/pprof/toy?seconds=1" ||
  fail "/debug/pprof/toy?seconds=1 did not answer"
pprof -raw "$TMP/toy.pb.gz" >"$TMP/toy.raw"
expect_match "$TMP/toy.raw" '^toy/nanoseconds' "the endpoint's toy profile has its sample type"
expect_match "$TMP/toy.raw" 'worker' "and the worker threads' stacks"
# SIGTERM, a dump signal, ends it as soon as the endpoint's checks are
# done, however long they took on this machine.
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 143 ] || fail "the program did not die of SIGTERM (status $status): $(cat "$TMP/worker.err")"
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/x" "$TMP/dump.log" >"$TMP/extract.txt"
toy=$(ls "$TMP"/x/toy-*.pb.gz) || fail "no toy profile was dumped: $(cat "$TMP/extract.txt")"
pprof -raw "$toy" >"$TMP/dump.raw"
expect_match "$TMP/dump.raw" '^toy/nanoseconds' "the final dump's toy profile has its sample type"
finish
