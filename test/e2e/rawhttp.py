"""Raw HTTP for the end-to-end tests: what curl will not send.

Imported by the tests' inline python (sys.path gets test/e2e from
CPROFTEST_SRC). read_all reads a socket to its end, or until the timeout,
and returns what arrived.
"""


def read_all(s, timeout):
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except OSError:
        pass
    return out
