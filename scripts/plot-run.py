#!/usr/bin/env python3
"""Pictures of one tpusim run, as PNG files (headless: matplotlib's Agg).

    scripts/plot-run.py STATS.json [-o DIR]

STATS.json is tpusim --stats; run it with --stats-interval N so that
STATS.intervals.csv exists beside it for the two time plots. Writes to DIR
(default: beside STATS.json):
  utilization.png  each unit's busy fraction over time, stacked bands
  hbm.png          HBM bytes per cycle over time against the peak
  roofline.png     every kernel with MACs on the MXU roofline
  stalls.png       stall cycles by cause
Needs Debian's python3-matplotlib (scripts/setup.sh installs it)."""
import argparse
import csv
import json
import os
import re
import sys

try:
    import matplotlib
except ImportError:
    sys.exit(f"plot-run.py: needs matplotlib, which {sys.executable} lacks "
             "(apt-get install python3-matplotlib, or run it with /usr/bin/python3)")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stats")
    ap.add_argument("-o", "--out", help="output directory (default: beside STATS.json)")
    a = ap.parse_args()
    s = json.load(open(a.stats))
    out = a.out or os.path.dirname(os.path.abspath(a.stats))
    os.makedirs(out, exist_ok=True)
    base = os.path.splitext(a.stats)[0]
    series = base + ".intervals.csv"
    written = []

    if os.path.exists(series):
        rows = list(csv.DictReader(open(series)))
        x = [(int(r["cycle_start"]) + int(r["cycle_end"])) / 2 for r in rows]
        span = [int(r["cycle_end"]) - int(r["cycle_start"]) for r in rows]
        # On a system of several chips every column is there per chip
        # ("chipK." first): each unit is drawn as the mean over the chips,
        # HBM traffic as all the chips' against their summed peak.
        chips = s.get("chips", 1)

        def total(r, name):
            return sum(int(v) for c, v in r.items() if re.sub(r"^chip[0-9]+\.", "", c) == name)

        units = list(dict.fromkeys(re.sub(r"^chip[0-9]+\.", "", c)[: -len(".busy_cycles")] for c in rows[0] if c.endswith(".busy_cycles")))
        fig, axes = plt.subplots(len(units), 1, figsize=(10, 0.55 * len(units) + 1), sharex=True, squeeze=False)
        for ax, u in zip(axes[:, 0], units):
            y = [total(r, u + ".busy_cycles") / d / chips for r, d in zip(rows, span)]
            ax.fill_between(x, y, step="mid", alpha=0.8)
            ax.set_ylim(0, 1)
            ax.set_yticks([])
            ax.set_ylabel(u, rotation=0, ha="right", va="center", fontsize=8)
        axes[-1, 0].set_xlabel("cycle")
        over = f", the mean over {chips} chips" if chips > 1 else ""
        fig.suptitle(f"Unit busy fraction over time ({s['cycles']} cycles on {s['config']}{over})")
        fig.tight_layout()
        written.append(save(fig, out, "utilization.png"))

        fig, ax = plt.subplots(figsize=(10, 3))
        y = [(total(r, "hbm.bytes_read") + total(r, "hbm.bytes_written")) / d for r, d in zip(rows, span)]
        ax.fill_between(x, y, step="mid", alpha=0.8, label="HBM traffic")
        if s["hbm"].get("peak_bandwidth_bytes_per_s"):
            peak = s["hbm"]["peak_bandwidth_bytes_per_s"] / s["frequency_hz"] * chips
            ax.axhline(peak, color="tab:red", linestyle="--", label=f"peak {peak:.0f} B/cycle")
        ax.set_xlabel("cycle")
        ax.set_ylabel("bytes per cycle")
        ax.legend(loc="upper right")
        fig.tight_layout()
        written.append(save(fig, out, "hbm.png"))
    else:
        print(f"plot-run: no {series} (run tpusim with --stats-interval N): no time plots", file=sys.stderr)

    ks = [k for k in s.get("kernels", []) if k["macs"] > 0]
    if ks:
        r0 = ks[0]["roofline"]
        peak, bw, ridge = r0["peak_macs_per_cycle"], r0["peak_hbm_bytes_per_cycle"], r0["ridge_macs_per_hbm_byte"]
        xs = [k["roofline"]["macs_per_hbm_byte"] for k in ks if k["roofline"]["macs_per_hbm_byte"] > 0]
        lo, hi = min(xs + [ridge]) / 4, max(xs + [ridge]) * 4
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        ax.loglog([lo, ridge, hi], [lo * bw, peak, peak], color="tab:red", label="roofline")
        for k in ks:
            i = k["roofline"]["macs_per_hbm_byte"] or hi
            ax.scatter([i], [k["roofline"]["achieved_macs_per_cycle"]], color="tab:blue")
            ax.annotate(str(k["index"]), (i, k["roofline"]["achieved_macs_per_cycle"]), textcoords="offset points", xytext=(4, 4))
        ax.set_xlabel("MACs per HBM byte")
        ax.set_ylabel("MACs per cycle")
        ax.set_title("Kernels on the MXU roofline")
        ax.legend()
        fig.tight_layout()
        written.append(save(fig, out, "roofline.png"))

    stalls = sorted(s.get("stall_cycles_by_cause", {}).items(), key=lambda kv: -kv[1])[:12]
    if stalls:
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(stalls) + 1))
        ax.barh([k for k, _ in stalls][::-1], [v for _, v in stalls][::-1], color="tab:orange")
        ax.set_xlabel("stall cycles")
        ax.set_title("Stalls by cause")
        fig.tight_layout()
        written.append(save(fig, out, "stalls.png"))
    for w in written:
        print(w)


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


main()
