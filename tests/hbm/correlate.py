#!/usr/bin/env python3
"""Replays the traces of this folder through tpusim's detailed HBM model with
the hbm2 preset and compares the figures with DRAMsim3's (reference.json):
drain cycles within 10%, mean read latency within 20%, row-hit rate within
0.05. Prints one table row a trace (Markdown with --markdown); exit 1 if any
figure is out of tolerance.

usage: correlate.py TPUSIM [--reference reference.json] [--traces DIR] [--markdown]
A trace is NAME.trace or NAME.trace.gz; reference.json names the traces. The
reference is ../shared/hbm/reference.json beside the repository when there is
one (the project's reference set), else the copy in this folder."""
import argparse, gzip, json, os, shutil, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
shared = os.path.join(here, "..", "..", "..", "shared", "hbm", "reference.json")
ap = argparse.ArgumentParser()
ap.add_argument("tpusim")
ap.add_argument("--reference", default=shared if os.path.exists(shared) else os.path.join(here, "reference.json"))
ap.add_argument("--traces", default=here)
ap.add_argument("--config", default="hbm2")
ap.add_argument("--markdown", action="store_true")
args = ap.parse_args()

ref = json.load(open(args.reference))["traces"]
print(f"reference: {os.path.normpath(args.reference)}")
bad = []
rows = []
with tempfile.TemporaryDirectory() as tmp:
    for name, r in sorted(ref.items()):
        src = os.path.join(args.traces, name + ".trace")
        if not os.path.exists(src):
            gz = src + ".gz"
            src = os.path.join(tmp, name + ".trace")
            with gzip.open(gz, "rb") as f, open(src, "wb") as o:
                shutil.copyfileobj(f, o)
        stats = os.path.join(tmp, name + ".json")
        subprocess.run([args.tpusim, "--hbm-trace", src, "--config", args.config, "--stats", stats, "-q"], check=True)
        h = json.load(open(stats))["hbm"]
        if h["requests"] != r["requests"]:
            bad.append(f"{name}: {h['requests']} requests, the reference has {r['requests']}")
        drain = h["drain_cycles"] / r["drain_cycles"] - 1
        lat = h["read_latency_cycles"]["mean"] / r["read_latency_cycles"] - 1
        hit = h["row_hit_rate"] - r["row_hit_rate"]
        for what, err, tol in (("drain cycles", drain, 0.10), ("mean read latency", lat, 0.20), ("row-hit rate", hit, 0.05)):
            if abs(err) > tol:
                bad.append(f"{name}: {what} off by {err:+.3f} (tolerance {tol})")
        rows.append((name, h["drain_cycles"], r["drain_cycles"], drain, h["read_latency_cycles"]["mean"], r["read_latency_cycles"], lat,
                     h["row_hit_rate"], r["row_hit_rate"], h["activates"], r["acts"], h["refreshes"], r["refs"], h["checker"]))

if args.markdown:
    print("| trace | drain cycles (ours / DRAMsim3) | error | mean read latency | error | row-hit rate | activates | refreshes |")
    print("|---|---|---|---|---|---|---|---|")
    for n, d, rd, de, l, rl, le, h, rh, a, ra, f, rf, _ in rows:
        print(f"| {n} | {d:,} / {rd:,} | {de:+.2%} | {l:.1f} / {rl:.1f} | {le:+.2%} | {h:.3f} / {rh:.3f} | {a:,} / {ra:,} | {f} / {rf} |")
else:
    for n, d, rd, de, l, rl, le, h, rh, a, ra, f, rf, chk in rows:
        print(f"{n:14s} drain {d:>8} vs {rd:>8} ({de:+.2%})  latency {l:7.1f} vs {rl:7.1f} ({le:+.2%})  "
              f"row hits {h:.3f} vs {rh:.3f}  acts {a} vs {ra}  refs {f} vs {rf}  checker {chk}")
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
