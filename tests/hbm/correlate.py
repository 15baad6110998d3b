#!/usr/bin/env python3
"""Replays traces through tpusim's detailed HBM model with the hbm2 preset
and compares the figures with DRAMsim3's. Two sets (docs/memory.md):

- reads: the traces of this folder, DRAMsim3's figures in reference.json
  (or the file --reference names);
- mixed: reads and writes, written by mixed_traces.py, DRAMsim3's figures
  in reference_mixed.json.

Tolerances, per set (TOLERANCE below, the figures docs/memory.md states):
drain cycles, mean read latency (relative) and row-hit rate (absolute).
Prints one row a trace (Markdown with --markdown); exit 1 if any figure is
out of tolerance.

usage: correlate.py TPUSIM [--reference reference.json] [--traces DIR] [--markdown]"""
import argparse, gzip, json, os, shutil, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import mixed_traces  # noqa: E402

TOLERANCE = {"reads": (0.015, 0.015, 0.01), "mixed": (0.015, 0.07, 0.015)}

ap = argparse.ArgumentParser()
ap.add_argument("tpusim")
ap.add_argument("--reference", default=os.path.join(here, "reference.json"))
ap.add_argument("--traces", default=here)
ap.add_argument("--config", default="hbm2")
ap.add_argument("--markdown", action="store_true")
args = ap.parse_args()

print(f"reference: {os.path.normpath(args.reference)} and {os.path.join(here, 'reference_mixed.json')}")
bad = []
rows = []
with tempfile.TemporaryDirectory() as tmp:
    mixed = os.path.join(tmp, "mixed")
    mixed_traces.write(mixed)
    sets = [("reads", args.traces, json.load(open(args.reference))["traces"]),
            ("mixed", mixed, json.load(open(os.path.join(here, "reference_mixed.json")))["traces"])]
    for kind, folder, ref in sets:
        for name, r in sorted(ref.items()):
            src = os.path.join(folder, name + ".trace")
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
            for what, err, tol in zip(("drain cycles", "mean read latency", "row-hit rate"), (drain, lat, hit), TOLERANCE[kind]):
                if abs(err) > tol:
                    bad.append(f"{name}: {what} off by {err:+.4f} (tolerance {tol})")
            rows.append((kind, name, h["drain_cycles"], r["drain_cycles"], drain, h["read_latency_cycles"]["mean"], r["read_latency_cycles"],
                         lat, h["row_hit_rate"], r["row_hit_rate"], h["activates"], r["acts"], h["checker"]))

if args.markdown:
    print("| set | trace | drain cycles (ours / DRAMsim3) | error | mean read latency | error | row-hit rate | activates |")
    print("|---|---|---|---|---|---|---|---|")
    for k, n, d, rd, de, l, rl, le, h, rh, a, ra, _ in rows:
        print(f"| {k} | {n} | {d:,} / {rd:,} | {de:+.2%} | {l:.1f} / {rl:.1f} | {le:+.2%} | {h:.3f} / {rh:.3f} | {a:,} / {ra:,} |")
else:
    for k, n, d, rd, de, l, rl, le, h, rh, a, ra, chk in rows:
        print(f"{k:5s} {n:14s} drain {d:>8} vs {rd:>8} ({de:+.2%})  latency {l:7.1f} vs {rl:7.1f} ({le:+.2%})  "
              f"row hits {h:.3f} vs {rh:.3f}  acts {a} vs {ra}  checker {chk}")
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
