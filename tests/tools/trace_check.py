#!/usr/bin/env python3
"""Checks a tpusim timeline and time series.

    trace_check.py TRACE.json [STATS.json INTERVALS.csv]

The trace: valid JSON; on every track (pid, tid) the complete events ("X")
are disjoint or nested, never partly overlapping (the trace-event rule
Perfetto enforces); a kernels track exists. The time series: its rows tile
[0, cycles) and each column adds up to stats.json's total."""
import csv
import json
import sys


def check_trace(path):
    trace = json.load(open(path))
    tracks = {}
    names = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    bad = 0
    eps = 1e-9
    for key, ev in tracks.items():
        ev.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, e, n in ev:
            while stack and stack[-1][1] <= s + eps:
                stack.pop()
            if stack and e > stack[-1][1] + eps:
                if bad < 5:
                    print(f"track {names.get(key, key)}: {n} [{s}, {e}) overlaps {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}) partly")
                bad += 1
            stack.append((s, e, n))
    if not any(v == "kernels" for v in names.values()):
        print("no kernels track")
        bad += 1
    print(f"{path}: {sum(len(v) for v in tracks.values())} slices on {len(tracks)} tracks, {bad} partial overlaps")
    return bad


def check_series(stats_path, csv_path):
    stats = json.load(open(stats_path))
    rows = list(csv.DictReader(open(csv_path)))
    bad = 0
    at = 0
    for r in rows:
        if int(r["cycle_start"]) != at or int(r["cycle_end"]) <= at:
            print(f"row [{r['cycle_start']}, {r['cycle_end']}) does not follow {at}")
            bad += 1
        at = int(r["cycle_end"])
    if at != stats["cycles"]:
        print(f"the rows end at {at}, the run at {stats['cycles']}")
        bad += 1
    for col in rows[0].keys():
        if col in ("cycle_start", "cycle_end"):
            continue
        total = sum(int(r[col]) for r in rows)
        unit, field = col.rsplit(".", 1)
        if unit.startswith("hbm.channel"):  # a channel's device bytes (detailed model)
            ch = stats["hbm"]["channels"][int(unit[len("hbm.channel"):])]
            want = ch["device_bytes_read"] + ch["device_bytes_written"]
        else:
            want = stats["hbm"][field] if unit == "hbm" else stats["units"][unit][field]
        if total != want:
            print(f"{col}: the rows add up to {total}, stats.json says {want}")
            bad += 1
    print(f"{csv_path}: {len(rows)} rows, {len(rows[0]) - 2} columns add up to the totals" if not bad else f"{bad} problem(s)")
    return bad


bad = check_trace(sys.argv[1])
if len(sys.argv) > 3:
    bad += check_series(sys.argv[2], sys.argv[3])
sys.exit(1 if bad else 0)
