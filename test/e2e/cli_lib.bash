# Helpers for the end-to-end tests of the cprof tool (sourced after
# lib.bash, not run on its own).

# measure OUT CMD...: runs CMD and writes "PEAK_RSS_KB CPU_SECONDS STATUS"
# into OUT (python3 is already a dependency of the suite; GNU time is not).
# The peak includes the few MB of the forked python before it execs CMD.
measure() {
  local out=$1
  shift
  python3 -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%d %.2f %d\n" % (ru.ru_maxrss, ru.ru_utime + ru.ru_stime, rc))
' "$out" "$@"
}

# small_profile OUT: writes a raw pprof of one sample (7 of "samples",
# unit "count") in leaf_fn, and prints its size in bytes.
small_profile() {
  python3 - "$1" <<'PY'
import sys
def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))
def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload
prof = (field(1, b"\x08\x01\x10\x02") +                    # sample type
        field(2, field(1, b"\x01") + field(2, b"\x07")) +  # the sample
        field(4, b"\x08\x01" + field(4, b"\x08\x01")) +    # location 1
        field(5, b"\x08\x01\x10\x03") +                    # function 1
        b"".join(field(6, s) for s in (b"", b"samples", b"count", b"leaf_fn")))
open(sys.argv[1], "wb").write(prof)
print(len(prof))
PY
}
