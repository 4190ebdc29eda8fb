#!/usr/bin/env bash
# What cprof's signal handlers can reach, read from the machine code: from
# each handler (on_sigprof, thread sampling's on_signal, the dumper's
# on_dump_signal) and each interposer of a function POSIX lists as
# async-signal-safe (_exit, _Exit, execve, execv, execl, execle, fexecve:
# a program's handler may call them), every direct call and jump is
# followed through libcprof.so, and every call that leaves the library
# must be to a function POSIX lists as async-signal-safe (or errno's
# accessor). It is checked twice: on the library as built, and on the
# same sources built -O0 (libcprof_o0.so), so that the contract does not
# hold only because the optimiser inlined a helper into a marked function. So no handler can
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
cat >"$TMP/reach.py" <<'PY'
import collections
import re
import sys

# POSIX.1-2017's async-signal-safe functions that the handlers use, and
# errno's accessor.
ALLOWED = {"_exit", "clock_gettime", "memcpy", "memcmp", "memset",
           "pthread_sigmask", "raise", "sigaddset",
           "sigemptyset", "sigfillset", "sigprocmask", "syscall", "write",
           "getpid", "kill", "__errno_location", "strlen", "strcmp",
           "strncmp", "strcspn"}
ROOTS = ["on_sigprof", "on_signal", "on_dump_signal", "_exit", "_Exit",
         "execve", "execv", "execl", "execle", "fexecve"]
# The only indirect calls: the dumper chaining to the program's own handler,
# and the interposers calling the function they stand in front of.
CHAINS = {"on_dump_signal", "chain_previous", "exit_through", "do_execve",
          "fexecve"}
# Functions are told apart by address: at -O0 two files' static helpers
# may share a name (an intern here, an intern there), which a check by
# name would merge.
# Reached but not followed, each for a reason the docs give
# (docs/design.md, the signal contract): the process tree's hand-over at
# exit, which _exit runs before the dump.
NOT_FOLLOWED = {"cprof__tree_hand_over"}
calls = collections.defaultdict(set)
name_at = {}
section_of = {}
section = None
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"^Disassembly of section (\S+):$", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
    if m:
        cur = int(m.group(1), 16)
        name_at[cur] = m.group(2)
        section_of[cur] = section
        continue
    if cur is None:
        continue
    m = re.search(r"\s(call|jmp)\s+([0-9a-f]+) <([^>]+)>", line)
    if m:
        t = m.group(3)
        if t.endswith("@plt"):
            calls[cur].add(t)
        elif "+" not in t:
            if int(m.group(2), 16) != cur:
                calls[cur].add(int(m.group(2), 16))
        # a jump inside a function (name+offset) stays in it
    elif re.search(r"\scall\s+\*", line):
        calls[cur].add("*indirect*")
count = collections.Counter(name_at.values())
def show(a):
    n = name_at.get(a, hex(a))
    return n if count[n] == 1 else "%s@%x" % (n, a)
by_name = {}
for a, n in name_at.items():
    by_name.setdefault(n, a)
missing = [r for r in ROOTS if r not in by_name]
seen, stack, bad = set(), [by_name[r] for r in ROOTS if r in by_name], []
while stack:
    f = stack.pop()
    if f in seen:
        continue
    seen.add(f)
    if name_at.get(f) in NOT_FOLLOWED:
        print("not followed: %s" % show(f))
        continue
    for t in sorted(calls.get(f, ()), key=str):
        if t == "*indirect*":
            if name_at.get(f) not in CHAINS:
                bad.append("%s -> an indirect call" % show(f))
        elif isinstance(t, str):
            name = t[:-4].split("@")[0]
            if name not in ALLOWED:
                bad.append("%s -> %s" % (show(f), name))
        else:
            stack.append(t)
SECTION = "cprof_signal_text"
marked = sorted(f for f, sec in section_of.items() if sec == SECTION)
for f in sorted(seen):
    if section_of.get(f) != SECTION and name_at.get(f) not in NOT_FOLLOWED:
        bad.append("%s is reached from a handler but not marked CPROF__SIGNAL_SAFE" % show(f))
for f in marked:
    for t in sorted(calls.get(f, ()), key=str):
        if t == "*indirect*":
            if name_at.get(f) not in CHAINS:
                bad.append("%s (marked) -> an indirect call" % show(f))
        elif isinstance(t, str):
            if t[:-4].split("@")[0] not in ALLOWED:
                bad.append("%s (marked) -> %s" % (show(f), t[:-4]))
        elif section_of.get(t) != SECTION and name_at.get(t) not in NOT_FOLLOWED:
            bad.append("%s (marked) -> %s, which is not" % (show(f), show(t)))
print("marked: %d functions: %s" % (len(marked), " ".join(sorted(show(f) for f in marked))))
for r in missing:
    print("missing handler: %s" % r)
for b in bad:
    print("not async-signal-safe: %s" % b)
print("reached: %d functions: %s" % (len(seen), " ".join(sorted(show(f) for f in seen))))
PY

# check NAME LIB: leaves $TMP/NAME.reach; fails when a handler reaches
# what it must not.
check() {
  objdump -d --no-show-raw-insn "$2" >"$TMP/$1.dis"
  python3 "$TMP/reach.py" "$TMP/$1.dis" >"$TMP/$1.reach"
  echo "== $1 ($2)"
  cat "$TMP/$1.reach"
  if grep -q '^missing handler\|^not async-signal-safe' "$TMP/$1.reach"; then
    fail "$1: a handler reaches code it must not"
  fi
  expect_match "$TMP/$1.reach" 'reached: .* cprof__stack_walk_ucontext .*' "$1: the CPU handler's walk is among what was followed"
  expect_match "$TMP/$1.reach" 'reached: .* cprof__cfi_find .*' "$1: the CFI lookup is among what was followed"
  expect_match "$TMP/$1.reach" 'marked: .* on_sigprof .*' "$1: the CPU handler is in the signal section"
  expect_match "$TMP/$1.reach" 'reached: .* exit_through .*' "$1: _exit's interposer is among what was followed"
}
check optimised "$lib"
o0=$CPROFTEST_BUILD/libcprof_o0.so
[ -f "$o0" ] || fail "no $o0: the -O0 build of the library is missing"
check O0 "$o0"

# The check catches what it should: a handler whose unmarked helper calls
# malloc, built -O0 as the library's second build is, fails it, naming
# the helper and the call.
cat >"$TMP/bad.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#define SAFE __attribute__((section("cprof_signal_text")))
static void *helper(void) { return malloc(16); }
SAFE void on_sigprof(int sig, siginfo_t *si, void *uc) {
  (void)sig; (void)si; (void)uc;
  free(helper());
}
SAFE void on_signal(int sig) { (void)sig; }
SAFE void on_dump_signal(int sig) { (void)sig; }
SAFE void _exit(int status) { for (;;) (void)status; }
SAFE void _Exit(int status) { for (;;) (void)status; }
SAFE int execve(const char *p, char *const a[], char *const e[]) { (void)p; (void)a; (void)e; return -1; }
SAFE int execv(const char *p, char *const a[]) { (void)p; (void)a; return -1; }
SAFE int execl(const char *p, const char *a, ...) { (void)p; (void)a; return -1; }
SAFE int execle(const char *p, const char *a, ...) { (void)p; (void)a; return -1; }
SAFE int fexecve(int fd, char *const a[], char *const e[]) { (void)fd; (void)a; (void)e; return -1; }
C
cc -O0 -fPIC -shared -o "$TMP/bad.so" "$TMP/bad.c"
objdump -d --no-show-raw-insn "$TMP/bad.so" >"$TMP/bad.dis"
python3 "$TMP/reach.py" "$TMP/bad.dis" >"$TMP/bad.reach"
cat "$TMP/bad.reach"
expect_match "$TMP/bad.reach" '^not async-signal-safe: helper is reached from a handler but not marked' "an unmarked helper on a handler path is caught"
expect_match "$TMP/bad.reach" '^not async-signal-safe: helper -> malloc' "malloc on a handler path is caught"
finish
