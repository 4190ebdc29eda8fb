#!/usr/bin/env python3
"""Stack figures from `perf script` output, to set beside cprof's.

Reads `perf script` (perf record --call-graph dwarf) on stdin. Prints
"median D mean M main P" (stack depth in frames, and the share of samples
whose stack reaches main or a thread's start routine), then for each FUNC
argument "FUNC SHARE": the percentage of samples whose stack contains it,
by the same name rules as test/e2e/traces.py.
"""
import re
import sys

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/test/e2e")
from traces import short  # noqa: E402

ROOTS = {"main", "__libc_start_call_main", "start_thread", "clone3"}


def samples(lines):
    cur = None
    for line in lines:
        if not line.strip():
            if cur is not None:
                yield cur
            cur = None
            continue
        if not line.startswith((" ", "\t")):
            cur = []
            continue
        if cur is None:
            continue
        m = re.match(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)$", line)
        if m:
            name = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            cur.append(name)
    if cur is not None:
        yield cur


def main(argv):
    ss = list(samples(sys.stdin))
    if not ss:
        print("no samples", file=sys.stderr)
        return 1
    depths = sorted(len(s) for s in ss)
    median = depths[len(depths) // 2]
    mean = sum(depths) / len(depths)
    rooted = sum(1 for s in ss if any(short(f) & ROOTS for f in s))
    print("median %d mean %.1f main %.1f" % (median, mean,
                                             100.0 * rooted / len(ss)))
    for f in argv:
        n = sum(1 for s in ss if any(f in short(x) for x in s))
        print("%s %.1f" % (f, 100.0 * n / len(ss)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
