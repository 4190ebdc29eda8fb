#!/usr/bin/env python3
"""A loopback stand-in for Grafana Pyroscope's POST /ingest, for tests.

It follows the documented protocol (shared spec: fleet-backends.md): the
query must carry name=app{k=v,...} (400 otherwise), numeric from/until, and a
multipart/form-data body with a file field "profile" and no format=pprof
parameter (which would make the server read the body as raw pprof); errors
are JSON {"code": ..., "message": ...} with 400, 401 (tenant required),
413 (body over the limit), 422 (unparsable) and 429 (rate limited).

    pyroscope_receiver.py OUT_DIR [MODE]

MODE: ok (default), fail500, ratelimit, stall (never answers in time),
tenant (requires X-Scope-OrgID). Prints the port it listens on, then
serves until killed. Each accepted profile is saved as OUT_DIR/<n>.pb.gz and
described by a tab-separated line in OUT_DIR/index.tsv ("-" for empty):
n, name, from, until, spyName, sampleRate, authorization, tenant.
"""
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse

LIMIT = 4 << 20
NAME_RE = re.compile(
    r"^[A-Za-z0-9_.\-]+\{([A-Za-z_][A-Za-z0-9_.]*=[^,{}=\"]+"
    r"(,[A-Za-z_][A-Za-z0-9_.]*=[^,{}=\"]+)*)?\}$")
TIME_RE = re.compile(r"^(\d{10}|\d{13}|\d{16}|\d{19})$")

out_dir = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
counter = 0
lock = threading.Lock()


def parse_multipart(body, boundary):
    """Returns {field name: bytes} of a multipart/form-data body."""
    fields = {}
    delim = b"--" + boundary
    for part in body.split(delim)[1:]:
        if part.startswith(b"--"):
            break
        part = part[2:] if part.startswith(b"\r\n") else part
        head, sep, data = part.partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("part without headers")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        m = re.search(rb'name="([^"]*)"', head)
        if not m:
            raise ValueError("part without a name")
        fields[m.group(1).decode()] = data
    return fields


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def error(self, status, code, message):
        body = json.dumps({"code": code, "message": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global counter
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length", "0"))
        if url.path != "/ingest":
            self.rfile.read(length)
            return self.error(404, "not_found", "no such route")
        if length > LIMIT:
            self.rfile.read(length)
            return self.error(413, "resource_exhausted", "request body too large")
        body = self.rfile.read(length)
        if mode == "stall":
            time.sleep(30)
            return
        if mode == "fail500":
            return self.error(500, "internal", "simulated failure")
        if mode == "ratelimit":
            return self.error(429, "resource_exhausted", "rate limited")
        tenant = self.headers.get("X-Scope-OrgID", "")
        if mode == "tenant" and not tenant:
            return self.error(401, "unauthenticated", "no org id")
        q = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        name = q.get("name", [""])[0]
        if not NAME_RE.match(name):
            return self.error(400, "invalid_argument", "invalid name: %r" % name)
        for key in ("from", "until"):
            if key in q and not TIME_RE.match(q[key][0]):
                return self.error(400, "invalid_argument", "invalid " + key)
        if "format" in q:
            return self.error(422, "invalid_argument",
                              "format=pprof expects a raw body, not multipart")
        ctype = self.headers.get("Content-Type", "")
        m = re.match(r"multipart/form-data;\s*boundary=(.+)$", ctype)
        if not m:
            return self.error(422, "invalid_argument", "not multipart: " + ctype)
        try:
            fields = parse_multipart(body, m.group(1).strip('"').encode())
        except ValueError as e:
            return self.error(422, "invalid_argument", str(e))
        if "profile" not in fields or not fields["profile"]:
            return self.error(422, "invalid_argument", "no profile field")
        if "prev_profile" in fields:
            return self.error(422, "invalid_argument", "prev_profile refused")
        with lock:
            counter += 1
            n = counter
            with open(os.path.join(out_dir, "%d.pb.gz" % n), "wb") as f:
                f.write(fields["profile"])
            with open(os.path.join(out_dir, "index.tsv"), "a") as f:
                fields = [
                    str(n), name, q.get("from", [""])[0],
                    q.get("until", [""])[0], q.get("spyName", [""])[0],
                    q.get("sampleRate", [""])[0],
                    self.headers.get("Authorization", ""), tenant]
                f.write("\t".join(x or "-" for x in fields) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
