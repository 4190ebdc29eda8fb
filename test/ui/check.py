#!/usr/bin/env python3
"""Checks the JSON that cdp.js printed for one viewer page.

    check.py FILE.json [--index I] [--hot NAME] [--sample TYPE]
             [--min-frames N] [--interact]

(--index picks one page when cdp.js loaded several.)

Fails (exit 1, with the reason) unless the page is ready without an error
element; with --hot, NAME must be the hottest function, that is the frame
with the largest self value, the first row of the top table, and the
widest frame apart from its own callers (every wider frame lies above it
and spans it). Prints a one-line summary.
"""
import argparse
import json
import sys


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--index", type=int)
ap.add_argument("--hot")
ap.add_argument("--sample")
ap.add_argument("--min-frames", type=int, default=2)
ap.add_argument("--interact", action="store_true")
a = ap.parse_args()
d = json.load(open(a.file))
if isinstance(d, list):
    d = d[a.index or 0]
if d["status"] != "ready":
    fail("page status %r, error %r, console %r" % (d["status"], d["error"], d.get("console")))
if d["error"] is not None:
    fail("error element present: %r" % d["error"])
frames = d["frames"]
if d["frameCount"] != len(frames) or len(frames) < a.min_frames:
    fail("frame count %r, %d frames in the DOM" % (d["frameCount"], len(frames)))
if a.sample and d["sample"] != a.sample:
    fail("sample type %r, want %r" % (d["sample"], a.sample))
root = [f for f in frames if f["depth"] == 0][0]
if a.hot:
    hottest = max((f for f in frames if f["depth"] > 0), key=lambda f: f["self"])
    if hottest["name"] != a.hot:
        fail("hottest frame by self is %s, want %s" % (hottest["name"], a.hot))
    if not d["top"] or d["top"][0]["name"] != a.hot:
        fail("top table starts with %r" % (d["top"][:1],))
    eps = 0.05
    for f in frames:
        if f["depth"] == 0 or f is hottest or f["w"] <= hottest["w"] + eps:
            continue
        above = f["depth"] < hottest["depth"]
        spans = f["x"] <= hottest["x"] + eps and f["x"] + f["w"] >= hottest["x"] + hottest["w"] - eps
        if not (above and spans):
            fail("%s (width %.1f) is wider than %s (%.1f) and is not its caller" % (f["name"], f["w"], a.hot, hottest["w"]))
    if hottest["w"] < 0.5 * root["w"]:
        fail("%s is only %.1f of %.1f pixels wide" % (a.hot, hottest["w"], root["w"]))
if a.interact:
    it = d.get("interact") or {}
    if it.get("zoomedWidth") is None or abs(it["zoomedWidth"] - it["rootWidth"]) > 1:
        fail("zoom: the clicked frame is %r wide, root %r" % (it.get("zoomedWidth"), it.get("rootWidth")))
    if it.get("framesAfterReset") != len(frames):
        fail("reset: %r frames, had %d" % (it.get("framesAfterReset"), len(frames)))
    if not it.get("matches") or set(it["matches"]) != {it["hot"]}:
        fail("search for %r highlighted %r" % (it.get("hot"), it.get("matches")))
    if it["hot"] not in it.get("tooltip", ""):
        fail("tooltip %r" % it.get("tooltip"))
    if not (it.get("sortedByCum") and it.get("sortedByName")):
        fail("sorting by header: cum %r, name %r" % (it.get("sortedByCum"), it.get("sortedByName")))
print("ok: %s: ready, %d frames, %s samples, render %.1f ms%s" % (
    d["location"][:90], len(frames), d["samples"], d["renderMs"],
    ", hottest %s" % a.hot if a.hot else ""))
