#!/usr/bin/env bash
# /debug/pprof/symbol is bounded: a body over 64 KiB is refused from its
# Content-Length (413, at once, instead of minutes of lookups under the
# symbolizer's lock), so is a request for more than 4096 addresses, while
# 4096 are answered; other profiles are served while a full-size request
# runs; and the symbolizer's cache stays bounded however many distinct
# addresses clients ask for.
source "$(dirname "$0")/lib.bash"
# The resident set is measured: under ASan, freed memory must not sit in
# its quarantine (the leak check at exit still runs); under TSan, whose
# shadow memory grows with every thread and byte touched, it is shown but
# not checked.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
rss_checked() {
  ! tsan_build "$CPROFTEST_BUILD/test/progs/http_server" || { echo "note: TSan build, resident set not checked"; return 1; }
}

start_server symbol --log
SYM=$PID
B=http://127.0.0.1:$PORT/debug/pprof

# Addresses in the program's own text, as pprof would send them: each
# costs a cold lookup.
base=$(awk -v exe="$(readlink -f "$CPROFTEST_BUILD/test/progs/http_server")" '$2 ~ /x/ && $6 == exe {split($1, a, "-"); print a[1]; exit}' "/proc/$SYM/maps")
addresses() { python3 -c "import sys; sys.stdout.write('+'.join('0x%x' % (0x$base + 4 * i) for i in range($1)))"; }
addresses 279000 >"$TMP/4mib" # just under 4 MiB, the limit there was
echo "body: $(stat -c %s "$TMP/4mib") bytes"
start=$(date +%s%N)
st=$(curl -sS -m 60 -o "$TMP/body" -w '%{http_code}' --data-binary @"$TMP/4mib" "$B/symbol") || true
ms=$((($(date +%s%N) - start) / 1000000))
echo "a 4 MiB POST: status ${st:-none} after $ms ms: $(head -c 200 "$TMP/body" | head -2)"
[ "$st" = 413 ] || fail "a 4 MiB body: status ${st:-none}, want 413"
printf 'request body too large (limit 65536 bytes)\n' | cmp -s - "$TMP/body" || fail "413 text"
echo "ok: a 4 MiB body gets 413"
checks=$((checks + 1))

addresses 4097 >"$TMP/4097"
st=$(curl -sS -m 60 -o "$TMP/body" -w '%{http_code}' --data-binary @"$TMP/4097" "$B/symbol")
[ "$st" = 413 ] || fail "4097 addresses: status $st, want 413"
printf 'too many addresses (limit 4096 per request)\n' | cmp -s - "$TMP/body" || fail "413 text: $(cat "$TMP/body")"
echo "ok: 4097 addresses get 413"
checks=$((checks + 1))

# 4096 addresses in the program's own text are answered; meanwhile another
# profile is served.
addresses 4096 >"$TMP/4096"
curl -sS -m 60 -o "$TMP/sym4096" -w '%{http_code}' --data-binary @"$TMP/4096" "$B/symbol" >"$TMP/sym4096.status" &
big=$!
st=$(curl -sS -m 60 -o "$TMP/body" -w '%{http_code}' "$B/threadcreate?debug=1")
[ "$st" = 200 ] && grep -q '^threadcreate profile: total' "$TMP/body" || fail "threadcreate during /symbol: $st"
wait $big
[ "$(cat "$TMP/sym4096.status")" = 200 ] || fail "4096 addresses: status $(cat "$TMP/sym4096.status")"
[ "$(head -1 "$TMP/sym4096")" = "num_symbols: 1" ] || fail "4096 addresses: $(head -1 "$TMP/sym4096")"
lines=$(($(wc -l <"$TMP/sym4096") - 1))
[ "$lines" -gt 100 ] || fail "only $lines of 4096 addresses in the program's text were named"
echo "ok: 4096 addresses answered ($lines named), another profile served meanwhile"
checks=$((checks + 1))

# The cache: 40 requests of 4096 distinct addresses each (163,840 in all,
# about 700 bytes each once cached) leave the resident set bounded.
before=$(rss_kb "$SYM")
python3 - "$PORT" <<'PY'
import socket, sys
port = int(sys.argv[1])
for r in range(40):
    body = "+".join("0x%x" % (0x100000000000 + 16 * (r * 4096 + i)) for i in range(4096)).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    s.settimeout(60)
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    assert out.startswith(b"HTTP/1.1 200 OK"), out[:100]
PY
after=$(rss_kb "$SYM")
grow=$((after - before))
echo "RSS ${before} KiB -> ${after} KiB after 163,840 distinct addresses (+${grow} KiB)"
if rss_checked; then
  [ "$grow" -lt 40960 ] || fail "the symbolizer's cache grew by $grow KiB"
  echo "ok: the symbolizer's cache is bounded (+$grow KiB, limit 40960 KiB)"
fi
checks=$((checks + 1))
stop_server "$SYM" symbol
finish
