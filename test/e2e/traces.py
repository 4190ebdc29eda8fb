#!/usr/bin/env python3
"""Shares of a profile's samples by the functions on their stacks.

Reads `go tool pprof -traces` output on stdin. For each FUNC argument it
prints "FUNC SHARE", the percentage of the total value whose stack contains
a frame named FUNC (the whole name, or its last "::" or "." part before the
argument list, gcc's clone suffixes such as .constprop.0 left out). With --given G, shares are of the samples whose stack
contains G. FUNC may list alternatives, F|G: stacks with either count.
With --depths, prints the depth distribution instead (median,
mean, and the share of samples at each depth up to 20). Values carry pprof's
units (ms, s, kB, MB, ...) or none.
"""
import re
import sys

UNITS = {"": 1, "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1,
         "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def value(text):
    m = re.fullmatch(r"([0-9.]+)([a-zA-Zµ]*)", text)
    if not m or m.group(2) not in UNITS:
        raise ValueError("unknown value %r" % text)
    return float(m.group(1)) * UNITS[m.group(2)]


def short(name):
    name = re.sub(r" \(inline\)$", "", name.strip())
    base = name.split("(")[0]
    # gcc's clones (f.constprop.0, f.part.1, f.isra.0, f.cold) are f.
    base = re.sub(r"(\.(constprop|isra|part|cold|lto_priv)(\.[0-9]+)?)+$", "",
                  base)
    return {name, base, base.split("::")[-1], base.split(".")[-1]}


def traces(lines):
    out, cur = [], None
    for line in lines:
        if line.startswith("-----------+"):
            if cur:
                out.append(cur)
            cur = None
            continue
        if cur is None:
            m = re.match(r"^\s+([0-9.]+[a-zA-Zµ]*)\s+(\S.*)$", line)
            if m and not re.match(r"^\s+[a-z_]+:\s", line):
                cur = [value(m.group(1)), [m.group(2)]]
            continue
        if line.strip() and not re.match(r"^\s+[a-z_]+:\s", line):
            cur[1].append(line.strip())
    if cur:
        out.append(cur)
    return out


def main(argv):
    given = None
    depths = False
    funcs = []
    i = 0
    while i < len(argv):
        if argv[i] == "--given":
            given = argv[i + 1]
            i += 2
            continue
        if argv[i] == "--depths":
            depths = True
        else:
            funcs.append(argv[i])
        i += 1
    ts = traces(sys.stdin)
    if given:
        ts = [t for t in ts if any(given in short(f) for f in t[1])]
    total = sum(t[0] for t in ts)
    if total <= 0:
        print("no samples", file=sys.stderr)
        return 1
    if depths:
        ds = sorted((len(t[1]), t[0]) for t in ts)
        acc, median = 0.0, 0
        for d, v in ds:
            acc += v
            if acc >= total / 2:
                median = d
                break
        mean = sum(d * v for d, v in ds) / total
        print("median %d mean %.1f" % (median, mean))
        return 0
    for f in funcs:
        alts = f.split("|")
        v = sum(t[0] for t in ts
                if any(a in short(x) for x in t[1] for a in alts))
        print("%s %.1f" % (f, 100.0 * v / total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
