#!/usr/bin/env bash
# A setuid program linked with cprof must not take settings from the
# environment of whoever runs it (CPROF_DUMP_OUT could name any file the
# program's owner may write, CPROF_HTTP could serve its memory's secrets): in a privileged process (AT_SECURE) every
# CPROF_* variable is ignored, and one line says so. Making a setuid copy
# needs root; without it the decision is covered by test_env's seam.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
[ "$(id -u)" -eq 0 ] || skip_rest "not root: cannot make a setuid copy (test_env covers the decision)"
nobody=$(id -u nobody 2>/dev/null) || skip_rest "no user nobody to own the setuid copy"
# A sanitizer's runtime cannot read its options (/proc/self/environ) in a
# setuid process, and LeakSanitizer then fails it at exit.
sanitized_build "$host" && skip_rest "sanitizer build: a setuid copy cannot run under it (test_env covers the decision)"
# A directory every user can enter, and a copy owned by nobody with the
# setuid bit: run by root, its effective uid differs from its real one.
dir=$TMP/suid
mkdir "$dir"
chmod 755 "$TMP" "$dir"
cp "$host" "$dir/host"
chown nobody "$dir/host"
chmod 4755 "$dir/host"
export CPROF_MUTEX_FRACTION=5 CPROF_DUMP="block=rate=7"
(cd "$dir" && ./host rates) >"$TMP/suid.out" 2>"$TMP/suid.err" || { cat "$TMP/suid.err"; fail "the setuid copy failed"; }
# The filesystem may not honour setuid (nosuid, no_new_privs): then there
# is nothing to test here.
(cd "$dir" && ./host ids) >"$TMP/ids.out" 2>/dev/null
grep -q "^uid=0 euid=$nobody\$" "$TMP/ids.out" || skip_rest "setuid not honoured here ($(cat "$TMP/ids.out"))"
cat "$TMP/suid.out" "$TMP/suid.err"
expect_match "$TMP/suid.out" '^mutex=0 block=0 heap=524288$' "the setuid copy ignored CPROF_MUTEX_FRACTION and CPROF_DUMP"
expect_match "$TMP/suid.err" '^cprof: privileged process \(setuid, setgid or file capabilities\): CPROF_\* environment variables ignored$' "one line says so"
[ "$(grep -c . "$TMP/suid.err")" -eq 1 ] || fail "expected exactly one line on stderr"
checks=$((checks + 1))

# The same binary without the bit takes them.
cp "$host" "$dir/plain"
(cd "$dir" && ./plain rates) >"$TMP/plain.out" 2>/dev/null
expect_match "$TMP/plain.out" '^mutex=5 block=7 ' "an unprivileged copy takes the settings"
finish
