#!/usr/bin/env python3
"""with_seccomp.py COMMAND [ARGS...]: runs COMMAND under a seccomp filter
that allows every system call, as a container runtime's or a sandbox's
filter would be seen from inside (/proc/self/status says "Seccomp: 2"),
with no_new_privs set, as installing a filter requires of a process
without CAP_SYS_ADMIN. Every process the command starts inherits both.
cprof does not try perf events there (docs/goroutine.md)."""
import ctypes
import os
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8),
                ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]


def main(argv):
    if not argv:
        sys.exit("usage: with_seccomp.py COMMAND [ARGS...]")
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p,
                      ctypes.c_ulong, ctypes.c_ulong]
    allow = (SockFilter * 1)(SockFilter(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog = SockFprog(1, allow)
    if prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        sys.exit("with_seccomp.py: %s" % os.strerror(ctypes.get_errno()))
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
