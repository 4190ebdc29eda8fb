#!/usr/bin/env bash
# The installed tree works where it is put: `cmake --install --prefix` into
# a temporary prefix gives a cprof that starts with LD_LIBRARY_PATH empty
# (it found no libcprof.so.0: no RPATH, no ldconfig) and whose `cprof run`
# finds the installed library, and a cprof.pc that names that prefix, with
# which a program builds and runs. A DESTDIR staging install puts
# everything under DESTDIR, names the real prefix in cprof.pc, and neither
# fails nor runs ldconfig, whoever runs it.
source "$(dirname "$0")/lib.bash"
prefix=$TMP/prefix
cmake --install "$CPROFTEST_BUILD" --prefix "$prefix" >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "cmake --install --prefix"; }
echo "ok: installed into a temporary prefix"

# The tool starts with nothing pointing at the library.
env LD_LIBRARY_PATH= "$prefix/bin/cprof" version >"$TMP/version.txt" 2>&1 || { cat "$TMP/version.txt"; fail "the installed cprof does not start"; }
expect_match "$TMP/version.txt" '^cprof [0-9]+\.[0-9]+\.[0-9]+$' "the installed cprof starts with LD_LIBRARY_PATH empty"
env LD_LIBRARY_PATH= "$prefix/bin/cprof" --help >"$TMP/help.txt" 2>&1 || fail "the installed cprof --help"
expect_match "$TMP/help.txt" '^usage: cprof <command>' "the installed cprof --help"
libdir=$(dirname "$(find "$prefix" -name 'libcprof.so.0' | head -1)")
[ -n "$libdir" ] || fail "no libcprof.so.0 under the prefix"
rel=${libdir#"$prefix"/}
readelf -d "$prefix/bin/cprof" >"$TMP/dynamic.txt"
if grep -q 'NEEDED.*libcprof' "$TMP/dynamic.txt"; then
  expect_match "$TMP/dynamic.txt" "(RPATH|RUNPATH).*\\[\\\$ORIGIN/\\.\\./$rel\\]" "its RPATH is \$ORIGIN/../$rel"
fi
# A copy of the whole tree elsewhere still starts: the RPATH is relative.
cp -a "$prefix" "$TMP/moved"
env LD_LIBRARY_PATH= "$TMP/moved/bin/cprof" version >/dev/null 2>&1 || fail "a moved installation does not start"
echo "ok: a moved installation starts too"

# cprof run finds the installed library (not the build tree's). The TSan
# build cannot preload (lib.bash); under ASan the runtime goes first.
if ! tsan_build "$CPROFTEST_BUILD/cprof"; then
  rt=$(preload_env "$CPROFTEST_BUILD/cprof" | sed 's#[^ ]*libcprof\.so##')
  # The library the shell loaded, from its maps, read with builtins only
  # (no child under the ASan runtime): the program's own LD_PRELOAD no
  # longer names cprof once the library has started.
  (cd "$TMP" && exec env LD_LIBRARY_PATH= LD_PRELOAD="$rt" "$prefix/bin/cprof" run -- sh -c 'while read -r l; do case $l in *libcprof*) echo "${l##* }";; esac; done </proc/$$/maps') >"$TMP/run.txt" 2>&1 ||
    { cat "$TMP/run.txt"; fail "the installed cprof run"; }
  expect_match "$TMP/run.txt" "(^|[ :])$libdir/libcprof\\.so[.0-9]*( |:|$)" "the installed cprof run preloads the installed library"
fi

# pkg-config names the prefix, and a program builds and runs with it.
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --cflags --libs cprof >"$TMP/pc.txt" || fail "pkg-config cprof"
expect_match "$TMP/pc.txt" "-I$prefix/include( |$)" "pkg-config --cflags names the prefix"
expect_match "$TMP/pc.txt" "-L$libdir( |$)" "pkg-config --libs names the prefix"
if sanitized_build "$CPROFTEST_BUILD/cprof"; then
  echo "note: a sanitizer build's library needs its runtime; the program is not built"
else
  cat >"$TMP/hello.c" <<'EOF'
#include <cprof.h>
#include <stdio.h>
int main(void) {
  printf("linked %s\n", cprof_version());
  return 0;
}
EOF
  # shellcheck disable=SC2046
  # Nothing but pkg-config's flags: the RPATH it gives for a prefix
  # outside /usr and /usr/local finds the library.
  expect_match "$TMP/pc.txt" "-Wl,-rpath,$libdir( |$)" "pkg-config --libs gives an RPATH for a prefix outside /usr"
  cc -o "$TMP/hello" "$TMP/hello.c" $(pkg-config --cflags --libs cprof) || fail "building against the installed cprof"
  env LD_LIBRARY_PATH= "$TMP/hello" >"$TMP/hello.txt" || fail "the program built with pkg-config does not run"
  expect_match "$TMP/hello.txt" '^linked [0-9]+\.' "a program built with pkg-config's flags alone runs, LD_LIBRARY_PATH empty"
fi

# DESTDIR: everything under it, the real prefix in cprof.pc, no ldconfig
# (a stand-in first on PATH would record a call), and no failure.
mkdir -p "$TMP/bin"
printf '#!/bin/sh\necho "$@" >>"%s/ldconfig.calls"\n' "$TMP" >"$TMP/bin/ldconfig"
chmod +x "$TMP/bin/ldconfig"
PATH=$TMP/bin:$PATH DESTDIR=$TMP/stage cmake --install "$CPROFTEST_BUILD" --prefix /usr/local >"$TMP/stage.log" 2>&1 ||
  { cat "$TMP/stage.log"; fail "a DESTDIR install failed"; }
[ -x "$TMP/stage/usr/local/bin/cprof" ] || fail "DESTDIR: no cprof under the stage"
pc=$(find "$TMP/stage" -name cprof.pc | head -1)
[ -n "$pc" ] || fail "DESTDIR: no cprof.pc under the stage"
expect_match "$pc" '^prefix=/usr/local$' "DESTDIR: cprof.pc names the real prefix"
expect_no_match "$pc" 'rpath' "cprof.pc for /usr/local adds no RPATH (ldconfig knows the library there)"
[ ! -e "$TMP/ldconfig.calls" ] || fail "DESTDIR: ldconfig was run"
# A prefix outside the system's: no ldconfig either.
PATH=$TMP/bin:$PATH cmake --install "$CPROFTEST_BUILD" --prefix "$TMP/prefix2" >/dev/null 2>&1 || fail "a second install failed"
[ ! -e "$TMP/ldconfig.calls" ] || fail "ldconfig was run for a private prefix"
echo "ok: no ldconfig for DESTDIR or a private prefix"
checks=$((checks + 1))
finish
