#!/usr/bin/env python3
"""Holds a preset against GEMM kernel times measured on a real TPU
(tests/realtpu: TPU v4, f16 operands; its README says how they were
measured). Every shape of the tables is written as the HLO JAX prints for
jnp.matmul(a, b) on f16[M,K] x f16[K,N], compiled by tpuc, run by tpusim
(zero inputs: the timing does not depend on the values), and its time
compared with the measured mean. docs/fidelity.md has the figures.

  scripts/correlate.py [--config v4] [--set KEY=VALUE]... [--sample N] [-j N] [--dtype bf16]
                       [--csv FILE] [--plot FILE.png] [--max-mape PCT]
                       [--min-r R] [CSV...]

CSV: measured tables (default: tests/realtpu/*.csv). --sample N: every
k-th shape of each table so that about N are run (the same shapes every
time). Prints per table and overall: the mean absolute percentage error
(MAPE), the median error, the mean signed error (bias), Pearson's r of the
times and of their logarithms, and the worst shapes. Exit 1 when --max-mape
or --min-r is not met (over all shapes run), 2 on trouble.

Needs python3; --plot needs matplotlib."""
import argparse
import concurrent.futures as cf
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hlo(m, n, k, t="f16"):
    """jax.jit(lambda a, b: jnp.matmul(a, b)) on t[m,k] x t[k,n], as JAX prints it."""
    return f"""HloModule jit_matmul, entry_computation_layout={{({t}[{m},{k}]{{1,0}}, {t}[{k},{n}]{{1,0}})->{t}[{m},{n}]{{1,0}}}}

ENTRY main.3 {{
  Arg_0.1 = {t}[{m},{k}]{{1,0}} parameter(0)
  Arg_1.2 = {t}[{k},{n}]{{1,0}} parameter(1)
  ROOT dot.3 = {t}[{m},{n}]{{1,0}} dot(Arg_0.1, Arg_1.2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def read_table(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows.append({"m": int(r["dim_m"]), "n": int(r["dim_n"]), "k": int(r["dim_k"]),
                         "measured_us": float(r["fusion_avg"]), "stddev_us": float(r["fusion_stddev"])})
    if not rows:
        raise SystemExit(f"correlate.py: {path}: no shapes")
    return rows


def zeros_npy(path, shape, t):
    """A .npy of 2-byte zeros (format 1.0; bf16 as uint16), without numpy."""
    if os.path.exists(path):
        return
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % ("<f2" if t == "f16" else "<u2", "".join(f"{d}, " for d in shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        f.write(bytes(2 * math.prod(shape)))


def simulate(shape, args, work):
    m, n, k = shape
    d = os.path.join(work, f"{m}x{n}x{k}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "m.hlo"), "w") as f:
        f.write(hlo(m, n, k, args.dtype))
    a, b = os.path.join(work, f"z{m}x{k}.npy"), os.path.join(work, f"z{k}x{n}.npy")
    sets = [x for s in args.set for x in ("--set", s)]
    env = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")
    for cmd in ([os.path.join(args.bin, "tpuc"), os.path.join(d, "m.hlo"), "--config", args.config, *sets, "-o", os.path.join(d, "m.tpu")],
                [os.path.join(args.bin, "tpusim"), os.path.join(d, "m.tpu"), "--config", args.config, *sets, "-q",
                 "--inputs", a, b, "--stats", os.path.join(d, "stats.json")]):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"{m}x{n}x{k}: {os.path.basename(cmd[0])} exit {p.returncode}: {p.stderr.strip()}")
    with open(os.path.join(d, "stats.json")) as f:
        s = json.load(f)
    return s["cycles"], s["cycles"] / s["frequency_hz"] * 1e6


def pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def summary(rows):
    err = [100 * (r["predicted_us"] - r["measured_us"]) / r["measured_us"] for r in rows]
    ae = sorted(abs(e) for e in err)
    mid = len(ae) // 2
    return {"shapes": len(rows), "mape": sum(ae) / len(ae), "median": ae[mid] if len(ae) % 2 else (ae[mid - 1] + ae[mid]) / 2,
            "bias": sum(err) / len(err),
            "r": pearson([r["predicted_us"] for r in rows], [r["measured_us"] for r in rows]),
            "r_log": pearson([math.log(r["predicted_us"]) for r in rows], [math.log(r["measured_us"]) for r in rows])}


def plot(path, tables):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 5.5))
    lo, hi = float("inf"), 0.0
    for (name, rows), mark in zip(tables, "os^v"):
        x = [r["measured_us"] for r in rows]
        y = [r["predicted_us"] for r in rows]
        s = summary(rows)
        ax.loglog(x, y, mark, ms=3, alpha=0.6, label=f"{name} ({s['shapes']} shapes, MAPE {s['mape']:.1f}%)")
        lo, hi = min(lo, *x, *y), max(hi, *x, *y)
    ax.loglog([lo, hi], [lo, hi], "k-", lw=0.8, label="predicted = measured")
    ax.set_xlabel("measured on a TPU v4 (µs)")
    ax.set_ylabel("tpusim (µs)")
    ax.set_title("f16 GEMM kernel time: tpusim vs a real TPU v4")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="*", metavar="CSV")
    ap.add_argument("--bin", default=os.environ.get("TPU_BIN", os.path.join(ROOT, "build", "bin")))
    ap.add_argument("--config", default="v4")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--sample", type=int, default=0, metavar="N")
    ap.add_argument("--dtype", choices=("f16", "bf16"), default="f16",
                    help="the operands' type (bf16: the same GEMMs without the conversion the MXU needs)")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--csv", metavar="FILE")
    ap.add_argument("--plot", metavar="FILE.png")
    ap.add_argument("--worst", type=int, default=5)
    ap.add_argument("--max-mape", type=float)
    ap.add_argument("--min-r", type=float)
    args = ap.parse_args()
    if args.j < 1 or args.sample < 0:
        ap.error("-j must be positive and --sample not negative")
    paths = args.tables or sorted(os.path.join(ROOT, "tests", "realtpu", f)
                                  for f in os.listdir(os.path.join(ROOT, "tests", "realtpu")) if f.endswith(".csv"))
    tables = []
    for p in paths:
        rows = read_table(p)
        if args.sample:
            step = max(1, len(rows) // max(1, args.sample // len(paths)))
            rows = rows[::step]
        tables.append((os.path.splitext(os.path.basename(p))[0], rows))
    with tempfile.TemporaryDirectory(prefix="correlate.") as work:
        for _, rows in tables:
            for r in rows:
                zeros_npy(os.path.join(work, f"z{r['m']}x{r['k']}.npy"), (r["m"], r["k"]), args.dtype)
                zeros_npy(os.path.join(work, f"z{r['k']}x{r['n']}.npy"), (r["k"], r["n"]), args.dtype)
        everything = [r for _, rows in tables for r in rows]
        with cf.ThreadPoolExecutor(args.j) as pool:
            futures = {pool.submit(simulate, (r["m"], r["n"], r["k"]), args, work): r for r in everything}
            for fut in cf.as_completed(futures):
                try:
                    futures[fut]["cycles"], futures[fut]["predicted_us"] = fut.result()
                except RuntimeError as e:
                    print(f"correlate.py: {e}", file=sys.stderr)
                    return 2
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["table", "m", "n", "k", "measured_us", "predicted_us", "cycles", "error_pct"])
            for name, rows in tables:
                for r in rows:
                    w.writerow([name, r["m"], r["n"], r["k"], r["measured_us"], f"{r['predicted_us']:.4f}", r["cycles"],
                                f"{100 * (r['predicted_us'] - r['measured_us']) / r['measured_us']:.2f}"])
    print(f"{args.config}{''.join(' --set ' + s for s in args.set)}, {args.dtype} operands, against {', '.join(n for n, _ in tables)}")
    print(f"{'table':<28} {'shapes':>6} {'MAPE':>7} {'median':>7} {'bias':>7} {'r':>7} {'r(log)':>7}")
    for name, rows in tables + [("all", everything)]:
        s = summary(rows)
        print(f"{name:<28} {s['shapes']:>6} {s['mape']:>6.1f}% {s['median']:>6.1f}% {s['bias']:>+6.1f}% {s['r']:>7.4f} {s['r_log']:>7.4f}")
    worst = sorted(everything, key=lambda r: -abs(r["predicted_us"] - r["measured_us"]) / r["measured_us"])[:args.worst]
    for r in worst:
        print(f"  worst: {r['m']}x{r['n']}x{r['k']} (MxNxK) measured {r['measured_us']:.2f} us, predicted {r['predicted_us']:.2f} us "
              f"({100 * (r['predicted_us'] - r['measured_us']) / r['measured_us']:+.0f}%)")
    if args.plot:
        plot(args.plot, tables)
    s = summary(everything)
    failed = []
    if args.max_mape is not None and not s["mape"] <= args.max_mape:
        failed.append(f"MAPE {s['mape']:.1f}% > {args.max_mape}%")
    if args.min_r is not None and not s["r"] >= args.min_r:
        failed.append(f"r {s['r']:.4f} < {args.min_r}")
    if failed:
        print("correlate.py: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
