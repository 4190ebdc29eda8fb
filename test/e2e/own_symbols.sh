#!/usr/bin/env bash
# Only the interposers may call the pthread and semaphore functions cprof
# interposes: every other object of the library reaches them through
# real.h/lock.h, so that cprof's own waits never pass through its own
# interposers (and never show up in the application's block or mutex
# profile). Reads each object's undefined symbols with nm and names every
# object that breaks the rule.
set -euo pipefail
. "$(dirname "$0")/lib.bash"

objdir="$CPROF_BUILD/CMakeFiles/cprof_objects.dir/src"
[ -d "$objdir" ] || fail "no objects in $objdir"
interposed='^(pthread_mutex_(lock|trylock|timedlock|clocklock|unlock)|pthread_rwlock_(rd|wr|tryrd|trywr|timedrd|timedwr|clockrd|clockwr|un)lock|pthread_cond_(wait|timedwait|clockwait)|sem_(wait|trywait|timedwait|clockwait)|pthread_barrier_wait|pthread_join|pthread_tryjoin_np)$'
allowed='^(contention|real)\.c\.o$'
bad=0
count=0
for o in "$objdir"/*.o; do
  count=$((count + 1))
  name=$(basename "$o")
  [[ $name =~ $allowed ]] && continue
  syms=$(nm -u "$o" | awk '{print $2}' | grep -E "$interposed" || true)
  if [ -n "$syms" ]; then
    echo "$name calls interposed functions directly: $(echo $syms)" >&2
    bad=1
  fi
done
[ "$count" -gt 10 ] || fail "only $count objects found"
[ "$bad" -eq 0 ] || fail "cprof code outside the interposers calls interposed names"
echo "ok: no object but the interposers calls an interposed pthread function ($count objects)"
checks=$((checks + 1))
finish
