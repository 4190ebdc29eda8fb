#!/usr/bin/env python3
"""Compares every location of pprof profiles with addr2line -i.

Reads the output of `go tool pprof -raw -symbolize=none PROFILE` from the
files given. For each location in a mapping it computes the ELF address
(the address minus the mapping's start plus its file offset, turned into a
virtual address through the object's program headers), asks
`addr2line -a -i -f -C -e OBJECT` for it, and compares the two lists of
(function, file base name, line), innermost first. It prints one line per
mismatch and a summary "locations N mismatched M tail T unknown U plt
P", and
exits 1 when any location mismatched or none was compared.

With --hot FUNCTION, it compares nothing: it sums the first sample value
of the first file's samples by the line addr2line gives for each sample's
innermost address, keeps those whose innermost function (addr2line's)
is FUNCTION, prints one "line FILE:LINE VALUE" row per line, and ends
with "hot FILE:LINE VALUE of TOTAL": the line a profile of the program
must show hot, read from the machine's own code rather than assumed. It
exits 1 when no sample is in FUNCTION.

Both sides are normalised the same way, and only in ways that change no
information: a file is its base name ("??" is the empty name), a missing
line is 0, addr2line's " (discriminator N)" is dropped. Each address is
asked twice in one addr2line run and the second answer is used: binutils
(2.40) names the innermost inlined function of a C++ CU that has no
linkage name after the enclosing symbol the first time it looks it up,
and correctly from then on. Where the two still differ, these are
accepted, each checked rather than assumed:

  * the outermost function of an inline chain: addr2line gives its
    DW_AT_name, which for a C++ function without a linkage name (static
    functions, main, template instances, extern "C" ones) is bare, without
    scope or parameters; cprof gives the demangled symbol, which may carry
    a gcc clone's suffix (.part.0). Both are reduced to the base name (no
    return type, scope, template arguments, parameters or clone suffix),
    which must be the same;
  * the innermost file and line, when the object's line table (as readelf
    decodes it) has a row at that address with cprof's file and line:
    binutils and libdw pick differently where two line programs cover an
    address (glibc's libc-start.c);
  * a function named by another symbol at its address: where several
    names are equally the function's (an assembly function's labels, each
    with a DW_TAG_subprogram of its own, such as glibc's sched_yield and
    __GI_sched_yield), binutils and cprof may pick different ones; both
    must be symbols of the object (nm, its debug file included) at one
    address;
  * addr2line's "??" for a function no symbol or debug information covers
    against cprof's "OBJECT+0xOFFSET" name (docs/symbols.md), OBJECT being
    the profiled file's name (the mapping's, or that of a stripped copy
    compared with the unstripped original);
  * addr2line's "??" for a PLT stub against cprof's "SYMBOL@plt", when
    objdump gives the stub holding the address that name;
  * one extra innermost line (a function left by a tail call, which
    addr2line cannot know) when the instruction ending at the address is a
    direct call (E8 rel32) whose target is that function, as addr2line -f
    names the target, or a PLT stub whose symbol (objdump's name for the
    stub) some mapped object defines at the address of that function's
    symbol (nm, the object's debug file included).
"""
import os
import re
import struct
import subprocess
import sys

LOC = re.compile(r"^\s*(\d+): 0x([0-9a-f]+) (?:M=(\d+) )?(?:\[F\] )?(.*)$")
LINE = re.compile(r"^(.*) (\S*):(-?\d+) s=-?\d+(?:\((.*)\))?$")
MAP = re.compile(r"^(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)(?: ([0-9a-f]+))?")


system_names = {}
build_ids = {}
symbol_tables = {}


def symbol_addresses(obj):
    """{name without version: set of addresses} of obj's dynamic and static
    symbols and of its separate debug file's, found by build ID."""
    if obj not in symbol_tables:
        table = {}
        bid = build_ids.get(obj, "")
        files = [obj]
        debug = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
        if bid and os.path.exists(debug):
            files.append(debug)
        for f in files:
            for flags in (["-D"], []):
                out = subprocess.run(["nm", "--defined-only"] + flags + [f],
                                     capture_output=True, text=True).stdout
                for line in out.splitlines():
                    parts = line.split()
                    if len(parts) == 3:
                        name = re.sub(r"@.*", "", parts[2])
                        table.setdefault(name, set()).add(int(parts[0], 16))
        symbol_tables[obj] = table
    return symbol_tables[obj]


def same_function_elsewhere(called, tail):
    """True when some mapped object defines the symbol called (a PLT
    stub's function) at an address where one of the names in tail is."""
    for obj in build_ids:
        table = symbol_addresses(obj)
        at = table.get(called, set())
        if any(at & table.get(t, set()) for t in tail):
            return True
    return False


def parse_line(text):
    m = LINE.match(text)
    if not m:
        raise ValueError("cannot parse location line %r" % text)
    if m.group(4):
        system_names[m.group(1)] = m.group(4)
    return (m.group(1), os.path.basename(m.group(2)), int(m.group(3)))


SAMPLE = re.compile(r"^\s*(-?\d+)(?:\s+-?\d+)*: ([\d ]+)$")


def parse_raw(path, samples=None):
    """Returns (mappings: id -> (start, offset, file), locations: list of
    (address, mapping id, [lines])); appends (first value, innermost
    location id) for each sample to samples when given."""
    mappings, locations = {}, []
    section = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line in ("Samples:", "Locations", "Mappings"):
                section = line
                continue
            if section == "Samples:" and samples is not None:
                m = SAMPLE.match(line.rstrip())
                if m:
                    samples.append((int(m.group(1)), int(m.group(2).split()[0])))
            elif section == "Locations":
                m = LOC.match(line)
                if m:
                    loc = (int(m.group(2), 16), int(m.group(3) or 0), [],
                           int(m.group(1)))
                    locations.append(loc)
                    if m.group(4):
                        loc[2].append(parse_line(m.group(4)))
                elif line.strip() and locations:
                    locations[-1][2].append(parse_line(line.strip()))
            elif section == "Mappings":
                m = MAP.match(line)
                if m:
                    mappings[int(m.group(1))] = (int(m.group(2), 16),
                                                 int(m.group(4), 16),
                                                 m.group(5))
                    build_ids[m.group(5)] = m.group(6) or ""
    return mappings, locations


def load_segments(obj):
    """The PT_LOAD segments of a 64-bit little-endian ELF file, as
    (file offset, virtual address, file size)."""
    with open(obj, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ValueError("%s: not a 64-bit little-endian ELF file" % obj)
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    segs = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", table, i * phentsize)
        if p_type == 1:
            segs.append((p_offset, p_vaddr, p_filesz))
    return segs


def to_vaddr(segs, off):
    for p_offset, p_vaddr, p_filesz in segs:
        if p_offset <= off < p_offset + p_filesz:
            return off - p_offset + p_vaddr
    return None


def to_offset(segs, vaddr):
    for p_offset, p_vaddr, p_filesz in segs:
        if p_vaddr <= vaddr < p_vaddr + p_filesz:
            return vaddr - p_vaddr + p_offset
    return None


def addr2line(obj, addrs):
    """addr2line -i for each address, as {address: [(func, file, line)]}.
    Each address is asked twice; the second answer is kept."""
    twice = []
    for a in addrs:
        twice += ["%#x" % a, "%#x" % a]
    out = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", obj] + twice,
                         check=True, capture_output=True, text=True).stdout
    result, cur, pending = {}, None, None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line) and pending is None:
            cur = int(line, 16)
            result[cur] = []
            continue
        if pending is None:
            pending = line
            continue
        where = re.sub(r" \(discriminator \d+\)$", "", line)
        file, _, num = where.rpartition(":")
        file = "" if file == "??" else os.path.basename(file)
        result[cur].append((pending, file, int(num) if num.isdigit() else 0))
        pending = None
    return result


line_tables = {}


def line_rows(obj, vaddr):
    """The (file, line) rows at the last address <= vaddr of each sequence
    of obj's line table covering vaddr, as readelf decodes it (following
    the link to a separate debug file)."""
    if obj not in line_tables:
        out = subprocess.run(["readelf", "-W", "-wK", "--debug-dump=decodedline", obj],
                             capture_output=True, text=True).stdout
        seqs, cur = [], []
        for line in out.splitlines():
            m = re.match(r"^(\S+)\s+(\d+|-)\s+(0x[0-9a-f]+)\b", line)
            if not m:
                continue
            if m.group(2) == "-":
                cur.append((int(m.group(3), 16), None, None))
                seqs.append(cur)
                cur = []
            else:
                cur.append((int(m.group(3), 16), m.group(1), int(m.group(2))))
        line_tables[obj] = seqs
    rows = set()
    for seq in line_tables[obj]:
        if not seq or not seq[0][0] <= vaddr < seq[-1][0]:
            continue
        at = max(a for a, _, _ in seq if a <= vaddr)
        rows |= {(f, n) for a, f, n in seq if a == at and f is not None}
    return rows


def without_templates(name):
    """name with every template argument list <...> left out."""
    depth, out = 0, []
    for i, ch in enumerate(name):
        if ch == "<" and not name[:i].endswith("operator"):
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def is_bare(name):
    """True for a name without a parameter list, as DW_AT_name gives C++
    functions (template arguments may hold parentheses)."""
    return "(" not in without_templates(name)


def base_name(name):
    """A function name without return type, scope, template arguments,
    parameters or the suffix of a gcc clone (a symbol's alone):
    "void ns::f<int>(int) const", "f.part.0" and "f<int>" all give "f"."""
    name = re.sub(r"(\.(constprop|isra|part|cold|lto_priv)(\.[0-9]+)?)+$", "",
                  without_templates(name))
    if name.endswith(")") or name.endswith(") const"):
        depth, i = 0, len(name.rstrip(" const")) - 1
        while i >= 0:
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                break
            i -= 1
        name = name[:i]
    return name.split(" ")[-1].split("::")[-1]


def aliases(obj, a, b):
    """True when a and b are plain symbols of obj (or of its debug file)
    at one address: one function under two of its names."""
    if not re.fullmatch(r"[A-Za-z_.$][\w.$]*", a) or not re.fullmatch(r"[A-Za-z_.$][\w.$]*", b):
        return False
    table = symbol_addresses(obj)
    return bool(table.get(a, set()) & table.get(b, set()))


def same_lines(obj, vaddr, norm, ref):
    """True when cprof's lines match addr2line's but for the accepted
    differences of the outermost name and the innermost file:line."""
    if len(norm) != len(ref):
        return False
    for i, (a, b) in enumerate(zip(norm, ref)):
        if a == b:
            continue
        name_ok = a[0] == b[0] or (i == len(ref) - 1 and is_bare(b[0]) and
                                   base_name(a[0]) == base_name(b[0]))
        name_ok = name_ok or aliases(obj, a[0], b[0])
        where_ok = a[1:] == b[1:] or (i == 0 and a[1:] in line_rows(obj, vaddr))
        if not (name_ok and where_ok):
            return False
    return True


_plt_stubs = {}


def plt_stub_at(obj, vaddr):
    """objdump's name for the PLT stub holding vaddr (SYMBOL@plt), or None:
    the stub label of .plt, .plt.sec or .plt.got at or below vaddr, when
    vaddr is before the next label and within 16 bytes."""
    if obj not in _plt_stubs:
        dis = subprocess.run(["objdump", "-d", "-j", ".plt", "-j", ".plt.sec",
                              "-j", ".plt.got", obj],
                             capture_output=True, text=True).stdout
        _plt_stubs[obj] = sorted(
            (int(m.group(1), 16), m.group(2))
            for m in re.finditer(r"^([0-9a-f]+) <([^>]+@plt)>:$", dis, re.M))
    stubs = _plt_stubs[obj]
    for k, (addr, name) in enumerate(stubs):
        end = min(addr + 16, stubs[k + 1][0] if k + 1 < len(stubs) else addr + 16)
        if addr <= vaddr < end:
            return name
    return None


def call_target_names(obj, segs, vaddr):
    """The names of the function a direct call ending at vaddr + 1 calls:
    addr2line -f's for the target, and objdump's (for a PLT stub)."""
    off = to_offset(segs, vaddr - 4)
    if off is None:
        return set(), set()
    with open(obj, "rb") as f:
        f.seek(off)
        code = f.read(5)
    if len(code) != 5 or code[0] != 0xE8:
        return set(), set()
    target = vaddr + 1 + struct.unpack("<i", code[1:])[0]
    names, plt = set(), set()
    res = addr2line(obj, [target]).get(target, [])
    if res:
        names.add(res[-1][0])
    dis = subprocess.run(["objdump", "-d", "--start-address=%#x" % (vaddr - 4),
                          "--stop-address=%#x" % (vaddr + 1), obj],
                         capture_output=True, text=True).stdout
    for m in re.finditer(r"call\s+[0-9a-f]+ <(.*)>", dis):
        name = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
        if name.endswith("@plt"):
            plt.add(name[:-4])
    return names, plt


def hot(path, function):
    """The --hot mode: FUNCTION's lines by samples, as addr2line names the
    samples' innermost addresses."""
    samples = []
    mappings, locations = parse_raw(path, samples)
    where = {}
    for address, mid, _, lid in locations:
        if mid in mappings and mappings[mid][2].startswith("/"):
            start, offset, obj = mappings[mid]
            vaddr = to_vaddr(load_segments(obj), address - start + offset)
            if vaddr is not None:
                where[lid] = (obj, vaddr)
    wanted = {}
    for obj, vaddr in where.values():
        wanted.setdefault(obj, set()).add(vaddr)
    answers = {obj: addr2line(obj, sorted(a)) for obj, a in wanted.items()}
    by_line, total = {}, 0
    for value, lid in samples:
        total += value
        if lid not in where:
            continue
        obj, vaddr = where[lid]
        ref = answers[obj].get(vaddr, [])
        if ref and ref[0][0] == function:
            key = "%s:%d" % (ref[0][1], ref[0][2])
            by_line[key] = by_line.get(key, 0) + value
    for key, value in sorted(by_line.items(), key=lambda kv: -kv[1]):
        print("line %s %d" % (key, value))
    if not by_line:
        print("no sample's innermost address is in %s (%d samples)" % (function, len(samples)))
        return 1
    key = max(by_line, key=lambda k: by_line[k])
    print("hot %s %d of %d" % (key, by_line[key], total))
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "--hot":
        return hot(argv[2], argv[1])
    verbose = "-v" in argv
    files = [a for a in argv if a != "-v"]
    compared = mismatched = tails = unknown = stubs = 0
    segs_cache, wanted = {}, {}
    located = []
    for path in files:
        mappings, locations = parse_raw(path)
        for address, mid, lines, _ in locations:
            if mid not in mappings:
                continue
            start, offset, obj = mappings[mid]
            if not obj.startswith("/"):
                # The vDSO has no file for addr2line to read.
                continue
            if obj not in segs_cache:
                segs_cache[obj] = load_segments(obj)
            vaddr = to_vaddr(segs_cache[obj], address - start + offset)
            if vaddr is None:
                print("no segment holds %#x in %s" % (address, obj))
                mismatched += 1
                continue
            wanted.setdefault(obj, set()).add(vaddr)
            located.append((obj, vaddr, address, lines))
    answers = {obj: addr2line(obj, sorted(addrs)) for obj, addrs in wanted.items()}
    for obj, vaddr, address, lines in located:
        compared += 1
        ref = answers[obj].get(vaddr, [])
        norm = []
        for i, (func, file, num) in enumerate(lines):
            # Code no symbol covers (a PLT stub) is named FILE+0xOFFSET by
            # cprof, FILE being the profiled file's name, which may be a
            # stripped copy of obj's under another name.
            if i < len(ref) and ref[i][0] == "??" and re.fullmatch(
                    r"\S+\+0x[0-9a-f]+", func):
                func = "??"
                unknown += 1
            elif (i < len(ref) and ref[i][0] == "??" and func.endswith("@plt")
                  and plt_stub_at(obj, vaddr) == func):
                func = "??"
                stubs += 1
            norm.append((func, file, num))
        ok = same_lines(obj, vaddr, norm, ref)
        if not ok and len(norm) == len(ref) + 1 and same_lines(obj, vaddr, norm[1:], ref):
            names, plt = call_target_names(obj, segs_cache[obj], vaddr)
            tail = {norm[0][0], re.sub(r"@.*", "", system_names.get(norm[0][0], ""))}
            ok = bool(tail & names) or any(same_function_elsewhere(c, tail) for c in plt)
            if ok:
                tails += 1
            elif verbose:
                print("  call target at %#x: %s" % (vaddr, sorted(names)))
        if not ok:
            mismatched += 1
            print("MISMATCH %s %#x (%#x)" % (os.path.basename(obj), vaddr, address))
            print("  cprof:     %s" % norm)
            print("  addr2line: %s" % ref)
        elif verbose:
            print("ok %s %#x %s" % (os.path.basename(obj), vaddr, norm))
    print("locations %d mismatched %d tail %d unknown %d plt %d" %
          (compared, mismatched, tails, unknown, stubs))
    return 1 if mismatched or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
