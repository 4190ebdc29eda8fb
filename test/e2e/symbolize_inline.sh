#!/usr/bin/env bash
# Inlined frames as addr2line -i gives them: a C++ program built -O2 -g
# whose hot code is inlined std::map, std::string and std::sort code runs
# under `cprof run --dump cpu,heap`; every location of both profiles, as
# go tool pprof -raw lists it, must have the frames addr2line -i -f -C
# gives for its address: each inlined level with its own file:line, and
# the real function with the line of the call into the first inlined
# level (addr2line_check.py says what it normalises, and why).
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/nofp_inline
src=$CPROFTEST_SRC/test/progs/nofp_inline.cc
check=$CPROFTEST_SRC/test/e2e/addr2line_check.py
if tsan_build "$prog"; then
  skip_rest "preloaded runs are covered by the plain and ASan builds"
fi
rt=$(preload_env "$prog" | sed 's#[^ ]*libcprof\.so##')

CPROF_HEAP_RATE=16384 LD_PRELOAD="$rt" "$cprof" run --dump cpu,heap \
  --dump-out "$TMP/run.log" -- "$prog" 1.5 >/dev/null
"$cprof" extract -o "$TMP/out" "$TMP/run.log" >/dev/null
for kind in cpu heap; do
  pprof -raw -symbolize=none "$TMP/out/$kind"-*.pb.gz >"$TMP/$kind.raw"
done

# Enough to mean something: locations, and deep inline chains among them.
n=$(grep -cE '^ +[0-9]+: 0x' "$TMP/cpu.raw" "$TMP/heap.raw" | awk -F: '{s += $2} END {print s}')
[ "$n" -ge 60 ] || fail "only $n locations in the profiles"
deep=$(awk '/^Locations/ {on = 1; next} /^Mappings/ {on = 0} !on {next}
  /^ +[0-9]+: 0x/ {if (k >= 4) d++; k = 1; next} /^ +[^ ]/ {k++}
  END {if (k >= 4) d++; print d + 0}' "$TMP/cpu.raw")
[ "$deep" -ge 10 ] || fail "only $deep CPU locations with 4 or more inline levels"
checks=$((checks + 1))
echo "ok: $n locations, $deep CPU locations with 4 or more levels"

# Every inline level of a std::map<std::string> lookup, in order, and the
# real function with its own line (the call site), not the callee's.
line=$(grep -n 'LINE:count_words' "$src" | cut -d: -f1)
python3 - "$TMP/cpu.raw" "$line" <<'PY' >"$TMP/chain.txt" || { cat "$TMP/chain.txt" >&2; fail "no complete std::map lookup chain"; }
import re, sys
want = ["std::less<", "::_M_lower_bound(", "::lower_bound(", "::lower_bound(",
        "::operator[](", "count_words("]
on, locs = False, []
for line in open(sys.argv[1]):
    if line.startswith("Locations"):
        on = True
    elif line.startswith("Mappings"):
        on = False
    elif on:
        m = re.match(r"^ +[0-9]+: 0x[0-9a-f]+ (?:M=[0-9]+ )?(.*)$", line)
        if m:
            locs.append([m.group(1)])
        elif line.strip() and locs:
            locs[-1].append(line.strip())
for loc in locs:
    names = [l.split(" /")[0] for l in loc]
    # From the first std::less level outwards.
    first = next((i for i, n in enumerate(names) if n.startswith("std::less<")), None)
    if first is None:
        continue
    rest = loc[first:]
    if len(rest) != len(want):
        continue
    ok = rest[0].startswith(want[0]) and all(
        w in r.split(" /")[0] for w, r in zip(want[1:], rest[1:]))
    ok = ok and "map<" in rest[3] and "map<" in rest[4]
    ok = ok and re.search(r" \S*nofp_inline\.cc:%s s=" % sys.argv[2], rest[-1])
    if ok:
        print("\n".join(loc))
        sys.exit(0)
print("\n\n".join("\n".join(l) for l in locs if any("std::less<" in x.split(" /")[0][:10] for x in l)))
sys.exit(1)
PY
checks=$((checks + 1))
echo "ok: std::less -> _M_lower_bound -> lower_bound -> lower_bound -> operator[] -> count_words at nofp_inline.cc:$line"

# Every location against addr2line.
if ! python3 "$check" "$TMP/cpu.raw" "$TMP/heap.raw" >"$TMP/check.txt"; then
  head -c 20000 "$TMP/check.txt" >&2
  fail "locations differ from addr2line -i: $(tail -1 "$TMP/check.txt")"
fi
checks=$((checks + 1))
echo "ok: every location as addr2line -i gives it: $(tail -1 "$TMP/check.txt")"
finish
