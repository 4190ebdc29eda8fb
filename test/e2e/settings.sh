#!/usr/bin/env bash
# Every CPROF_* environment variable is in one table (src/base/settings.h):
# each name the library's code reads is there, each name there is read by
# the code and documented (README.md or docs/), so no setting is hidden and
# no documented one is dead. A name outside the table reads as unset
# (unit/test_env_children).
set -euo pipefail
. "$(dirname "$0")/lib.bash"

table="$CPROF_SRC/src/base/settings.h"
listed=$(grep -oE '^ +X\(CPROF_[A-Z0-9_]+' "$table" | sed 's/.*X(//' | sort -u)
[ "$(wc -l <<<"$listed")" -ge 15 ] || fail "the settings table lists too few names: $listed"
# Names in string literals of the code (CPROF_UNKNOWN is an error's name).
used=$(grep -rhoE '"CPROF_[A-Z0-9_]+"' "$CPROF_SRC/src" | tr -d '"' | grep -v '^CPROF_UNKNOWN$' | sort -u)
missing=$(comm -13 <(echo "$listed") <(echo "$used"))
[ -z "$missing" ] || fail "read by the code but not in settings.h: $(echo $missing)"
unused=$(comm -23 <(echo "$listed") <(echo "$used"))
[ -z "$unused" ] || fail "in settings.h but read nowhere: $(echo $unused)"
echo "ok: the code reads exactly the $(wc -l <<<"$listed") settings of settings.h"
checks=$((checks + 1))
undocumented=""
for name in $listed; do
  grep -rqw -- "$name" "$CPROF_SRC/README.md" "$CPROF_SRC/docs" || undocumented="$undocumented $name"
done
[ -z "$undocumented" ] || fail "settings without documentation:$undocumented"
echo "ok: every setting is documented"
checks=$((checks + 1))
finish
