#!/usr/bin/env bash
# One program over a list of values of one parameter: every point is its own
# tpuc/tpusim process (a line of DIR/points.txt, so a cluster's job array can
# run the same list: sed -n "${TASK}p" DIR/points.txt | bash), run here N at a
# time; then DIR/sweep.csv and, with python3-matplotlib, DIR/sweep.png.
#
#   scripts/sweep.sh --sweep KEY=V1,V2,... [--config CFG] [--set KEY=VALUE]... [-j N] [-o DIR]
#                    PROGRAM [--inputs A.npy ...]
#
# PROGRAM is a module (*.mlir, *.hlo, *.ir), compiled for every point with the
# same --config/--set (so target parameters such as target.mxu_dim can vary),
# or a .tpu, run at every point (only parameters that leave the target alone).
# sweep.csv: KEY's value, exit status, run status, cycles, seconds, MXU MAC
# utilization and HBM bandwidth utilization per point. Exits 1 when a point
# failed (its log.txt says why).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(realpath "${TPU_BIN:-$root/build/bin}")"
config=v5e jobs=$(nproc) out=out/sweep sweep="" program=""
sets=() inputs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -j) jobs="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --inputs) shift; while [ $# -gt 0 ] && [[ "$1" != --* ]]; do inputs+=("$(realpath "$1")"); shift; done ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "sweep.sh: unknown flag $1" >&2; exit 2 ;;
    *) [ -z "$program" ] || { echo "sweep.sh: one PROGRAM, not '$program' and '$1'" >&2; exit 2; }; program="$(realpath "$1")"; shift ;;
  esac
done
[[ -n "$sweep" && "$sweep" == *=* && -n "$program" ]] || { echo "usage: scripts/sweep.sh --sweep KEY=V1,V2,... [--config CFG] PROGRAM [--inputs ...]" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "sweep.sh: -j '$jobs' is not a positive number" >&2; exit 2; }
key="${sweep%%=*}"
IFS=',' read -r -a values <<<"${sweep#*=}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
q() { printf '%q ' "$@"; }
: >"$out/points.txt"
for i in "${!values[@]}"; do
  v="${values[$i]}" d="$out/p$i"
  mkdir -p "$d"
  set_v=(--set "$key=$v")
  if [[ "$program" == *.tpu ]]; then
    cmd="cd $(q "$d") && $(q "$bin/tpusim" "$program" --config "$config" "${sets[@]}" "${set_v[@]}") --inputs $(q "${inputs[@]}") --stats stats.json -q >log.txt 2>&1; echo \$? >status"
  else
    cmd="cd $(q "$d") && { $(q "$bin/tpuc" "$program" --config "$config" "${sets[@]}" "${set_v[@]}" -o prog.tpu) && $(q "$bin/tpusim" prog.tpu --config "$config" "${sets[@]}" "${set_v[@]}") --inputs $(q "${inputs[@]}") --stats stats.json -q; } >log.txt 2>&1; echo \$? >status"
  fi
  echo "$cmd" >>"$out/points.txt"
done
echo "sweep.sh: ${#values[@]} points of $key in $out/points.txt, $jobs at a time" >&2
tr '\n' '\0' <"$out/points.txt" | xargs -0 -P "$jobs" -I{} bash -c '{}'
python3 - "$out" "$key" "${values[@]}" <<'PY'
import csv, json, os, sys
out, key, values = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for i, v in enumerate(values):
    d = os.path.join(out, f"p{i}")
    status = open(os.path.join(d, "status")).read().strip()
    row = {key: v, "exit": status, "status": "", "cycles": "", "seconds": "", "mxu_mac_utilization": "", "hbm_bandwidth_utilization": ""}
    if os.path.exists(os.path.join(d, "stats.json")):
        s = json.load(open(os.path.join(d, "stats.json")))
        row.update(status=s["status"], cycles=s["cycles"], seconds=s["seconds"], mxu_mac_utilization=s["mxu"]["mac_utilization"],
                   hbm_bandwidth_utilization=s["hbm"]["bandwidth_utilization"])
    else:
        row["status"] = open(os.path.join(d, "log.txt")).read().strip().splitlines()[-1:][0] if os.path.getsize(os.path.join(d, "log.txt")) else "failed"
    rows.append(row)
with open(os.path.join(out, "sweep.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
print(os.path.join(out, "sweep.csv"))
PY
for py in python3 /usr/bin/python3; do
  if "$py" -c "import matplotlib" 2>/dev/null; then
    "$py" - "$out" "$key" <<'PY'
import csv, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, key = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(open(os.path.join(out, "sweep.csv"))) if r["cycles"]]
if rows:
    try:
        xs = [float(r[key]) for r in rows]
    except ValueError:
        xs = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.plot(xs, [int(r["cycles"]) for r in rows], marker="o")
    ax.set_xlabel(key)
    ax.set_ylabel("cycles")
    ax.set_title(f"cycles against {key}")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sweep.png"), dpi=100)
    print(os.path.join(out, "sweep.png"))
PY
    break
  fi
done
! grep -qv '^0$' "$out"/p*/status
