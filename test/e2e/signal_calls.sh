#!/usr/bin/env bash
# What cprof's signal handlers can reach, read from the machine code: from
# each handler (on_sigprof, the goroutine profile's on_signal, the dumper's
# on_dump_signal), every direct call and jump is followed through
# libcprof.so, and every call that leaves the library must be to a function
# POSIX lists as async-signal-safe (or errno's accessor). So no handler can
# reach malloc, a lock, stdio or the dynamic loader, whatever the source
# says. The handlers' own functions are listed too, so the test cannot pass
# by finding nothing. And the source's marking agrees: everything a handler
# reaches is in the cprof_signal_text section (CPROF__SIGNAL_SAFE), and
# nothing in that section calls out of it but the same allowlist.
source "$(dirname "$0")/lib.bash"
lib=$CPROFTEST_BUILD/libcprof.so
if sanitized_build "$lib"; then
  skip_rest "sanitizer instrumentation adds calls into its runtime"
fi
command -v objdump >/dev/null || skip_rest "objdump is not installed"
objdump -d --no-show-raw-insn "$lib" >"$TMP/lib.dis"
python3 - "$TMP/lib.dis" >"$TMP/reach.txt" <<'PY'
import collections
import re
import sys

# POSIX.1-2017's async-signal-safe functions that the handlers use, and
# errno's accessor.
ALLOWED = {"_exit", "clock_gettime", "memcpy", "memcmp", "memset",
           "pthread_sigmask", "raise", "sigaction", "sigaddset",
           "sigemptyset", "sigfillset", "sigprocmask", "syscall", "write",
           "getpid", "kill", "__errno_location"}
ROOTS = ["on_sigprof", "on_signal", "on_dump_signal"]
calls = collections.defaultdict(set)
defined = set()
section_of = {}
section = None
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"^Disassembly of section (\S+):$", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
    if m:
        cur = m.group(1)
        defined.add(cur)
        section_of[cur] = section
        continue
    if cur is None:
        continue
    m = re.search(r"\s(call|jmp)\s+[0-9a-f]+ <([^>]+)>", line)
    if m:
        t = m.group(2)
        if not t.endswith("@plt"):
            t = t.split("+")[0]
        if t != cur:
            calls[cur].add(t)
    elif re.search(r"\scall\s+\*", line):
        calls[cur].add("*indirect*")
missing = [r for r in ROOTS if r not in defined]
seen, stack, bad = set(), list(ROOTS), []
while stack:
    f = stack.pop()
    if f in seen:
        continue
    seen.add(f)
    for t in sorted(calls.get(f, ())):
        if t == "*indirect*":
            # Only the dumper chains to the program's own handler.
            if f != "on_dump_signal":
                bad.append("%s -> an indirect call" % f)
        elif t.endswith("@plt"):
            name = t[:-4].split("@")[0]
            if name not in ALLOWED:
                bad.append("%s -> %s" % (f, name))
        else:
            stack.append(t)
SECTION = "cprof_signal_text"
marked = sorted(f for f, sec in section_of.items() if sec == SECTION)
for f in sorted(seen):
    if section_of.get(f) != SECTION:
        bad.append("%s is reached from a handler but not marked CPROF__SIGNAL_SAFE" % f)
for f in marked:
    for t in sorted(calls.get(f, ())):
        if t == "*indirect*":
            if f != "on_dump_signal":
                bad.append("%s (marked) -> an indirect call" % f)
        elif t.endswith("@plt"):
            if t[:-4].split("@")[0] not in ALLOWED:
                bad.append("%s (marked) -> %s" % (f, t[:-4]))
        elif section_of.get(t) != SECTION:
            bad.append("%s (marked) -> %s, which is not" % (f, t))
print("marked: %d functions: %s" % (len(marked), " ".join(marked)))
for r in missing:
    print("missing handler: %s" % r)
for b in bad:
    print("not async-signal-safe: %s" % b)
print("reached: %d functions: %s" % (len(seen), " ".join(sorted(seen))))
PY
cat "$TMP/reach.txt"
if grep -q '^missing handler\|^not async-signal-safe' "$TMP/reach.txt"; then
  fail "a handler reaches code it must not"
fi
expect_match "$TMP/reach.txt" 'reached: .* cprof__stack_walk_ucontext .*' "the CPU handler's walk is among what was followed"
expect_match "$TMP/reach.txt" 'reached: .* cprof__cfi_find .*' "the CFI lookup is among what was followed"
expect_match "$TMP/reach.txt" 'marked: .* on_sigprof .*' "the CPU handler is in the signal section"
finish
