#!/usr/bin/env bash
# Every CPROF_* environment variable is in one table (src/base/settings.h):
# each name the library's code reads is there, each name there is read by
# the code (the library's or the cprof command's) and documented (README.md
# or docs/), so no setting is hidden and
# no documented one is dead. A name outside the table reads as unset
# (unit/test_env_children).
set -euo pipefail
. "$(dirname "$0")/lib.bash"

table="$CPROFTEST_SRC/src/base/settings.h"
listed=$(grep -oE '^ +X\(CPROF_[A-Z0-9_]+' "$table" | sed 's/.*X(//' | sort -u)
[ "$(wc -l <<<"$listed")" -ge 15 ] || fail "the settings table lists too few names: $listed"
# Names in string literals of the code (CPROF_UNKNOWN is an error's name).
used=$(grep -rhoE '"CPROF_[A-Z0-9_]+"' "$CPROFTEST_SRC/src" "$CPROFTEST_SRC/tools" | tr -d '"' | grep -v '^CPROF_UNKNOWN$' | sort -u)
missing=$(comm -13 <(echo "$listed") <(echo "$used"))
[ -z "$missing" ] || fail "read by the code but not in settings.h: $(echo $missing)"
unused=$(comm -23 <(echo "$listed") <(echo "$used"))
[ -z "$unused" ] || fail "in settings.h but read nowhere: $(echo $unused)"
echo "ok: the code reads exactly the $(wc -l <<<"$listed") settings of settings.h"
checks=$((checks + 1))
undocumented=""
for name in $listed; do
  grep -rqw -- "$name" "$CPROFTEST_SRC/README.md" "$CPROFTEST_SRC/docs" || undocumented="$undocumented $name"
done
[ -z "$undocumented" ] || fail "settings without documentation:$undocumented"
echo "ok: every setting is documented"
checks=$((checks + 1))

# At load, a misspelt name gets one line naming the closest setting, any
# other CPROF_ name one line, and a bad value of a setting read only when
# a profile starts (CPROF_CPU_HZ) its line too, in a program that never
# starts one. The harness's own variables are not CPROF_ names, so a clean
# environment gets no line at all.
prog="$CPROFTEST_BUILD/test/progs/dump_host"
pre=$(preload_env "$prog")
LD_PRELOAD="$pre" "$prog" sleep 0 >/dev/null 2>"$TMP/clean.err"
[ ! -s "$TMP/clean.err" ] || fail "a clean environment printed: $(cat "$TMP/clean.err")"
env CPROF_DUMPP=cpu CPROF_HEAP_RAT=4096 CPROF_WHATEVER=1 CPROF_CPU_HZ=fast \
  LD_PRELOAD="$pre" "$prog" sleep 0 >/dev/null 2>"$TMP/typo.err"
cat "$TMP/typo.err"
expect_match "$TMP/typo.err" '^cprof: CPROF_DUMPP is not a cprof setting \(ignored\); did you mean CPROF_DUMP\?$' 'CPROF_DUMPP named as CPROF_DUMP'
expect_match "$TMP/typo.err" '^cprof: CPROF_HEAP_RAT is not a cprof setting \(ignored\); did you mean CPROF_HEAP_RATE\?$' 'CPROF_HEAP_RAT named as CPROF_HEAP_RATE'
expect_match "$TMP/typo.err" '^cprof: CPROF_WHATEVER is not a cprof setting \(ignored\)$' 'an unknown name is reported'
expect_match "$TMP/typo.err" '^cprof: CPROF_CPU_HZ="fast": not a number; using 100 Hz$' 'a bad CPROF_CPU_HZ is reported at load'
[ "$(wc -l <"$TMP/typo.err")" -eq 4 ] || fail "expected 4 lines, got: $(cat "$TMP/typo.err")"

# A program that defines cprof_keep_environment (cprof.h) keeps its
# CPROF_* variables, and hears nothing of a name cprof does not know; the
# same program without it finds them taken out, and hears of the name.
env CPROF_HEAP_RATE=0 CPROF_NOSUCH=1 "$CPROFTEST_BUILD/test/progs/keep_env" \
  CPROF_HEAP_RATE CPROF_NOSUCH >"$TMP/keep.out" 2>"$TMP/keep.err"
expect_match "$TMP/keep.out" '^CPROF_HEAP_RATE=0$' 'a program that keeps its environment keeps CPROF_HEAP_RATE'
expect_match "$TMP/keep.out" '^CPROF_NOSUCH=1$' 'and an unknown CPROF_ name'
[ ! -s "$TMP/keep.err" ] || fail "a program that keeps its environment was told: $(cat "$TMP/keep.err")"
env CPROF_HEAP_RATE=0 CPROF_NOSUCH=1 "$CPROFTEST_BUILD/test/progs/env_print" \
  CPROF_HEAP_RATE CPROF_NOSUCH >"$TMP/detach.out" 2>"$TMP/detach.err"
expect_match "$TMP/detach.out" '^CPROF_HEAP_RATE=\(unset\)$' 'without it, CPROF_HEAP_RATE is taken out'
expect_match "$TMP/detach.err" '^cprof: CPROF_NOSUCH is not a cprof setting \(ignored\)$' 'and the unknown name reported'
finish
