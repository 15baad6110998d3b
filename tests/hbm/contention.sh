#!/usr/bin/env bash
# Two cores sharing the HBM channels (docs/memory.md): on v4 with the
# detailed model, each core streams 8 MiB of its own into VMEM
# (tests/hbm/stream.s). With both cores streaming, the run takes at least
# 1.5x as long as one core alone (the channels, not the cores' ports, are
# the limit), the memory runs at 85% of its peak or more, and the DRAM
# checker saw no violation.
#   tests/hbm/contention.sh BIN_DIR SRC_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
"$bin/tpu-as" "$src/tests/hbm/stream.s" --config v4 -o two.tpu
"$bin/tpu-as" "$src/tests/hbm/stream.s" --config v4 --set target.cores=1 -o one.tpu
"$bin/tpusim" one.tpu --config v4 --set target.cores=1 --stats one.json -q
"$bin/tpusim" two.tpu --config v4 --stats two.json -q
python3 - <<'PY'
import json
one, two = json.load(open("one.json")), json.load(open("two.json"))
assert one["hbm"]["model"] == two["hbm"]["model"] == "detailed"
ratio = two["cycles"] / one["cycles"]
util = two["hbm"]["bandwidth_utilization"]
print(f"one core: {one['cycles']} cycles ({one['hbm']['bandwidth_utilization']:.1%} of the HBM peak); "
      f"two cores: {two['cycles']} cycles ({util:.1%}); {ratio:.2f}x; crossbar stalls "
      f"{[l['stall_cycles'] for l in two['noc']['links']]}")
assert two["hbm"]["bytes_read"] == 2 * one["hbm"]["bytes_read"] == 2 * 16 * 524288
assert ratio >= 1.5, f"two cores streaming slowed each other by only {ratio:.2f}x"
assert util >= 0.85, f"two cores reached only {util:.1%} of the peak"
assert two["hbm"]["checker"] == "passed"
PY
