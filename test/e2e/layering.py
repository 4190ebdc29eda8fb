#!/usr/bin/env python3
"""The layering rules of src/ (docs/design.md), checked on the built objects
and on the sources.

  layering.py OBJDIR SRCDIR [DESIGN_MD]

OBJDIR holds the library's objects as CMake leaves them
(CMakeFiles/cprof_objects.dir/src), SRCDIR is the source tree's src/.

Checks, each failing with the offending edge named:
  1. every source file sits in a layer folder (or is one of the top
     layer's files, src/init.c and src/exit.c), and every
     layer folder holds at least one file;
  2. no object uses a symbol defined by an object of a higher layer (nm:
     undefined symbols of each object against defined ones of all others);
  3. no file includes a header of a higher layer, and every include of a
     cprof header names its layer ("base/mem.h", not "mem.h");
  4. only source/*_interpose.c objects define or call the libc names cprof
     interposes (malloc family, the pthread and semaphore waits,
     pthread_create, sigaction and signal's family): everything else
     reaches them through base/real.h (cprof's own dispositions through
     source/signals.h's cprof__sig_set_own, on the real sigaction).
  5. with DESIGN_MD, its table names every file under src/ and no file
     that does not exist;
  6. no two headers share a file name, whatever their folders;
  7. no two objects use each other's symbols, directly or through others
     (no cycle in the call graph between files);
  8. every fork handler registration (cprof__atfork) names a slot of its
     own file's layer in base/fork.h, whose slots run in layer order, and
     no slot is registered by two files.
Prints one line per check that passed; exits 1 with every violation listed.
"""
import os
import re
import subprocess
import sys

LAYERS = ["base", "capture", "source", "encode", "profile", "sink"]
TOP = len(LAYERS)  # src/init.c, src/exit.c
TOP_FILES = {"init.c", "exit.c", "exit.h"}
# References that are not calls: base/mem.c names the constructor's anchor
# so that a static link, which pulls in mem.o whatever it calls, always
# pulls in init.o (and the constructor) too.
ANCHORS = {"cprof__init_anchor"}
# libc names source/fd_interpose.c interposes that every layer may call:
# a call is libc's, which the interposer passes through for cprof's own
# code (inside its guard) and for every descriptor that is not cprof's.
LIBC_PASSTHROUGH = {"close", "close_range", "closefrom", "dup2", "dup3",
                    "eventfd", "pipe", "pipe2"}
INTERPOSED = re.compile(
    r"^(malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|"
    r"memalign|valloc|pvalloc|malloc_usable_size|"
    r"_Zn[wa]m.*|_Zd[la]Pv.*|"
    r"pthread_create|pthread_join|pthread_tryjoin_np|pthread_timedjoin_np|"
    r"pthread_mutex_(lock|trylock|timedlock|clocklock|unlock)|"
    r"pthread_rwlock_(rd|wr|tryrd|trywr|timedrd|timedwr|clockrd|clockwr|un)lock|"
    r"pthread_cond_(wait|timedwait|clockwait)|"
    r"sem_(wait|trywait|timedwait|clockwait)|pthread_barrier_wait|"
    r"sigaction|__sigaction|signal|sigset|bsd_signal|sysv_signal|sigignore|"
    r"sigwait|sigwaitinfo|sigtimedwait|signalfd)$")


def rank_of(rel):
    """rel: a path under src/ ('base/mem.c'); its layer's rank, or None."""
    parts = rel.split("/")
    if len(parts) == 1:
        return TOP if parts[0] in TOP_FILES else None
    return LAYERS.index(parts[0]) if parts[0] in LAYERS else None


def nm(paths, undefined):
    """The global symbols each object in paths uses (undefined) or defines,
    as {path: set}: one nm for all of them (one each cost a fifth of a
    second apiece, most of this checker's time)."""
    args = ["nm", "-A", "-u" if undefined else "--defined-only"] + list(paths)
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    syms = {p: set() for p in paths}
    for line in out.splitlines():
        path, sep, rest = line.partition(":")
        f = rest.split()
        if not sep or not f or path not in syms:
            continue
        if undefined:
            syms[path].add(f[-1])
        elif len(f) >= 3 and f[1] in "TDBRVWGS":  # global definitions only
            syms[path].add(f[2])
    return syms


def main():
    objdir, srcdir = sys.argv[1], sys.argv[2]
    errors = []
    passed = []

    # 1. Every file in a layer.
    sources = []
    for root, _, files in os.walk(srcdir):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(root, f), srcdir)
            if rank_of(rel) is None:
                errors.append(f"{rel}: not in a layer folder ({', '.join(LAYERS)})")
            sources.append(rel)
    for layer in LAYERS:
        if not any(s.startswith(layer + "/") for s in sources):
            errors.append(f"src/{layer}/ is empty")
    passed.append(f"{len(sources)} files, each in one of {len(LAYERS)} layers")

    # 2. Symbol edges.
    objs = {}
    for root, _, files in os.walk(objdir):
        for f in files:
            if f.endswith(".c.o"):
                rel = os.path.relpath(os.path.join(root, f), objdir)[:-2]
                # An object whose source is gone is a leftover of an older
                # tree in a reused build directory, not part of this one.
                if os.path.exists(os.path.join(srcdir, rel)):
                    objs[rel] = os.path.join(root, f)
    if len(objs) < 20:
        errors.append(f"only {len(objs)} objects under {objdir}")
    defined, undefined = {}, {}
    used = nm(objs.values(), True)
    defs = nm(objs.values(), False)
    for rel, path in objs.items():
        undefined[rel] = used[path]
        for s in defs[path]:
            defined.setdefault(s, rel)
    edges = 0
    for rel, syms in sorted(undefined.items()):
        r = rank_of(rel)
        if r is None:
            errors.append(f"{rel}: object outside every layer")
            continue
        for s in sorted(syms):
            d = defined.get(s)
            if d is None or d == rel or s in ANCHORS or s in LIBC_PASSTHROUGH:
                continue
            edges += 1
            if rank_of(d) > r:
                errors.append(f"upward call: {rel} uses {s} from {d}")
    passed.append(f"{edges} symbol edges between {len(objs)} objects, none upward")

    # 3. Include edges.
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    includes = 0
    for rel in sources:
        with open(os.path.join(srcdir, rel)) as fh:
            text = fh.read()
        r = rank_of(rel)
        for h in inc.findall(text):
            if h in ("cprof.h", "cprof_ui_page.h"):
                continue
            includes += 1
            hr = rank_of(h)
            if hr is None or not os.path.exists(os.path.join(srcdir, h)):
                errors.append(f"{rel} includes \"{h}\": not a layer-qualified cprof header")
            elif hr > r:
                errors.append(f"upward include: {rel} includes {h}")
    passed.append(f"{includes} includes, none upward")

    # 4. Interposed names only in the interposers.
    def may(rel):
        return rel.startswith("source/") and rel.endswith("_interpose.c")
    for rel in sorted(objs):
        if may(rel):
            continue
        bad = sorted(s for s in undefined[rel] if INTERPOSED.match(s))
        if bad:
            errors.append(f"{rel} calls interposed names: {' '.join(bad)}")
        bad = sorted(s for s, d in defined.items() if d == rel and INTERPOSED.match(s))
        if bad:
            errors.append(f"{rel} defines interposed names: {' '.join(bad)}")
    passed.append("interposed libc names only in source/*_interpose.c")

    # 5. The design document's table against the tree.
    if len(sys.argv) > 3:
        named = set()
        tick = re.compile(r"`([^`]+)`")
        with open(sys.argv[3]) as fh:
            for line in fh:
                if not line.startswith("|"):
                    continue
                folder = None
                for t in tick.findall(line):
                    if t.startswith("src/"):
                        folder = os.path.dirname(t[4:])
                        named.add(t[4:])
                    elif folder is not None and "/" not in t and t.endswith((".c", ".h")):
                        named.add(os.path.join(folder, t) if folder else t)
        for rel in sorted(set(sources) - named):
            errors.append(f"{rel}: not in the design document's table")
        for rel in sorted(named - set(sources)):
            if rel.endswith((".c", ".h")):
                errors.append(f"the design document names {rel}, which does not exist")
        passed.append(f"the design document names all {len(sources)} files and no other")

    # 6. Unique header names.
    seen = {}
    for rel in sorted(sources):
        if rel.endswith(".h"):
            b = os.path.basename(rel)
            if b in seen:
                errors.append(f"{rel} and {seen[b]} share a header name")
            seen.setdefault(b, rel)
    passed.append(f"{len(seen)} header names, each used once")

    # 7. No cycle between files: Tarjan's strongly connected components.
    graph = {rel: set() for rel in objs}
    for rel, syms in undefined.items():
        for s in syms:
            d = defined.get(s)
            if d and d != rel and s not in ANCHORS and s not in LIBC_PASSTHROUGH:
                graph[rel].add(d)
    index, low, on, stack, comps = {}, {}, set(), [], []
    def strong(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            u, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[u] = min(low[u], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[u])
            if low[u] == index[u]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == u:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    for comp in comps:
        errors.append("call cycle between files: " + " <-> ".join(comp))
    passed.append(f"no call cycle between the {len(graph)} objects")

    # 8. Fork handler slots in layer order, each used by one file.
    fork_h = os.path.join(srcdir, "base", "fork.h")
    slots = {}
    if os.path.exists(fork_h):
        with open(fork_h) as fh:
            text = fh.read()
        m = re.search(r"typedef enum cprof__fork_slot \{(.*?)\}", text, re.S)
        layer = None
        for line in (m.group(1) if m else "").splitlines():
            c = re.match(r"\s*/\* (\w+) \*/\s*$", line)
            if c and c.group(1) in LAYERS:
                if layer is not None and LAYERS.index(c.group(1)) < LAYERS.index(layer):
                    errors.append(f"base/fork.h: the {c.group(1)} slots come after {layer}'s")
                layer = c.group(1)
                continue
            e = re.match(r"\s*(CPROF__FORK_\w+)", line)
            if e and e.group(1) != "CPROF__FORK_SLOTS":
                slots[e.group(1)] = layer
        if not slots:
            errors.append("base/fork.h: no fork slots found")
    call = re.compile(r"cprof__atfork\(\s*(\w+)")
    users = {}
    for rel in sorted(sources):
        if not rel.endswith(".c") or rel == "base/fork.c":
            continue
        with open(os.path.join(srcdir, rel)) as fh:
            for slot in call.findall(fh.read()):
                users.setdefault(slot, []).append(rel)
                want = slots.get(slot)
                if want is None:
                    errors.append(f"{rel}: cprof__atfork with {slot}, not a slot of base/fork.h")
                elif rank_of(rel) != LAYERS.index(want):
                    errors.append(f"{rel}: fork slot {slot} is a {want} slot")
    for slot, files in sorted(users.items()):
        if len(files) > 1:
            errors.append(f"fork slot {slot} registered by {' and '.join(files)}")
    passed.append(f"{len(users)} fork handler registrations, each in its layer's slot")

    if errors:
        for e in errors:
            print("layering:", e, file=sys.stderr)
        sys.exit(1)
    for p in passed:
        print("ok:", p)


if __name__ == "__main__":
    main()
