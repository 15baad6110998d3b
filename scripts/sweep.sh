#!/usr/bin/env bash
# One program over the values of parameters: every point is its own
# tpuc/tpusim process (a line of DIR/points.txt, so a cluster's job array can
# run the same list: sed -n "${TASK}p" DIR/points.txt | bash), run here N at a
# time; then DIR/sweep.csv and, with python3-matplotlib, DIR/sweep.png.
#
#   scripts/sweep.sh --sweep KEY[,KEY...]=V1,V2,... [--sweep ...] [--config CFG] [--set KEY=VALUE]...
#                    [-j N] [-o DIR] PROGRAM [--inputs A.npy ...]
#
# Keys named together take the same value at every point (co-varied:
# --sweep target.mxu_dim,target.vpu_lanes=8,16,32); several --sweep make a
# grid, every value of one with every value of the others.
#
# PROGRAM is a module (*.mlir, *.hlo, *.ir), compiled for every point with the
# same --config/--set (so target parameters such as target.mxu_dim can vary),
# or a .tpu, run at every point (only parameters that leave the target alone).
# sweep.csv: each --sweep's value (its column named by its keys, joined by
# '+'), exit status, run status, cycles, seconds, MXU MAC utilization and HBM
# bandwidth utilization per point; sweep.png plots cycles against the first
# --sweep, a line per value of the others. Exits 1 when a point failed (its
# log.txt says why).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(realpath "${TPU_BIN:-$root/build/bin}")"
config=v5e jobs=$(nproc) out=out/sweep program=""
sets=() inputs=() sweeps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweeps+=("$2"); shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -j) jobs="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --inputs) shift; while [ $# -gt 0 ] && [[ "$1" != --* ]]; do inputs+=("$(realpath "$1")"); shift; done ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "sweep.sh: unknown flag $1" >&2; exit 2 ;;
    *) [ -z "$program" ] || { echo "sweep.sh: one PROGRAM, not '$program' and '$1'" >&2; exit 2; }; program="$(realpath "$1")"; shift ;;
  esac
done
usage="usage: scripts/sweep.sh --sweep KEY[,KEY...]=V1,V2,... [--sweep ...] [--config CFG] PROGRAM [--inputs ...]"
[[ ${#sweeps[@]} -gt 0 && -n "$program" ]] || { echo "$usage" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "sweep.sh: -j '$jobs' is not a positive number" >&2; exit 2; }
# The points: every --sweep's values in turn, the first varying slowest;
# a point is its values (one per --sweep, tab-separated) and its settings.
names=() points=("") settings=("")
for spec in "${sweeps[@]}"; do
  [[ "$spec" == *=* && "${spec%%=*}" != "" && "${spec#*=}" != "" && "$spec" != *[[:space:]]* ]] ||
    { echo "sweep.sh: --sweep '$spec' is not KEY[,KEY...]=V1,V2,..." >&2; exit 2; }
  IFS=',' read -r -a keys <<<"${spec%%=*}"
  IFS=',' read -r -a vals <<<"${spec#*=}"
  names+=("$(IFS=+; echo "${keys[*]}")")
  next=() next_settings=()
  for i in "${!points[@]}"; do
    for v in "${vals[@]}"; do
      next+=("${points[$i]:+${points[$i]}$'\t'}$v")
      s="${settings[$i]}"
      for k in "${keys[@]}"; do s+=" $k=$v"; done
      next_settings+=("$s")
    done
  done
  points=("${next[@]}") settings=("${next_settings[@]}")
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
q() { printf '%q ' "$@"; }
: >"$out/points.txt"
for i in "${!points[@]}"; do
  d="$out/p$i"
  mkdir -p "$d"
  printf '%s\n' "${points[$i]}" >"$d/values"
  set_v=()
  for kv in ${settings[$i]}; do set_v+=(--set "$kv"); done
  if [[ "$program" == *.tpu ]]; then
    cmd="cd $(q "$d") && $(q "$bin/tpusim" "$program" --config "$config" "${sets[@]}" "${set_v[@]}") --inputs $(q "${inputs[@]}") --stats stats.json -q >log.txt 2>&1; echo \$? >status"
  else
    cmd="cd $(q "$d") && { $(q "$bin/tpuc" "$program" --config "$config" "${sets[@]}" "${set_v[@]}" -o prog.tpu) && $(q "$bin/tpusim" prog.tpu --config "$config" "${sets[@]}" "${set_v[@]}") --inputs $(q "${inputs[@]}") --stats stats.json -q; } >log.txt 2>&1; echo \$? >status"
  fi
  echo "$cmd" >>"$out/points.txt"
done
grid="${names[0]}"; for n in "${names[@]:1}"; do grid+=" x $n"; done
echo "sweep.sh: ${#points[@]} points of $grid in $out/points.txt, $jobs at a time" >&2
tr '\n' '\0' <"$out/points.txt" | xargs -0 -P "$jobs" -I{} bash -c '{}'
python3 - "$out" "${#points[@]}" "${names[@]}" <<'PY'
import csv, json, os, sys
out, count, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = []
for i in range(count):
    d = os.path.join(out, f"p{i}")
    status = open(os.path.join(d, "status")).read().strip()
    row = dict(zip(names, open(os.path.join(d, "values")).read().rstrip("\n").split("\t")))
    row.update({"exit": status, "status": "", "cycles": "", "seconds": "", "mxu_mac_utilization": "", "hbm_bandwidth_utilization": ""})
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
    "$py" - "$out" "${names[@]}" <<'PY'
import csv, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, key, others = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = [r for r in csv.DictReader(open(os.path.join(out, "sweep.csv"))) if r["cycles"]]
if rows:
    fig, ax = plt.subplots(figsize=(6.5, 4))
    lines = {}
    for r in rows:
        lines.setdefault(", ".join(f"{k}={r[k]}" for k in others), []).append(r)
    for label, rs in lines.items():
        try:
            xs = [float(r[key]) for r in rs]
        except ValueError:
            xs = list(range(len(rs)))
        ax.plot(xs, [int(r["cycles"]) for r in rs], marker="o", label=label or None)
    if others:
        ax.legend(fontsize=8)
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
