#!/usr/bin/env bash
# Hostile and extreme input, one class per group (docs/robustness.md): every
# tool must answer with the documented exit status and, for bad input, one
# line on stderr; never a signal, a hang or runaway memory.
#
#   tests/robustness/hostile.sh BIN_DIR WORK_DIR [GROUP...]
#
# Groups: files config empty size hlo stablehlo asm writes runs compare hbmtrace (default: all).
set -uo pipefail
BIN="$(cd "$1" && pwd)" WORK=$2
shift 2
GROUPS_TO_RUN=("$@")
[ ${#GROUPS_TO_RUN[@]} -gt 0 ] || GROUPS_TO_RUN=(files config empty size hlo stablehlo asm writes runs compare hbmtrace)
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "$HERE/../.." && pwd)"
PY=${PYTHON:-python3}
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
# Address space per command: far above what these cases legitimately need,
# far below the machine. Sanitizer builds reserve terabytes of shadow memory.
# Sanitizer builds (Debug) run several times slower: time limits stretch.
MEM_KB=${HOSTILE_MEM_KB:-6000000}
SLOW=1
if [ -n "${TPUSIM_SANITIZE:-}" ]; then
  MEM_KB=unlimited SLOW=8
fi
# A busy machine (ctest --parallel, other jobs) runs every case slower: time
# limits also stretch by the load per core when the group starts, rounded up
# (HOSTILE_SLOW sets the factor instead).
LOAD=$(awk -v n="$(nproc)" '{ l = $1 / n; print (l > 1 ? int(l + 0.999) : 1) }' /proc/loadavg 2>/dev/null || echo 1)
SLOW=$((SLOW * ${HOSTILE_SLOW:-$LOAD}))
# mem_kb KB: a tighter address-space limit for one case (none under sanitizers).
mem_kb() { [ "$MEM_KB" = unlimited ] && echo unlimited || echo "$1"; }

failures=0 cases=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect STATUS REGEX SECONDS CMD...: CMD exits with STATUS within SECONDS;
# for a non-zero STATUS, stderr's first line matches REGEX and, unless
# ONE_LINE=0, stderr is that one line.
expect() {
  local want=$1 regex=$2 secs=$3
  shift 3
  cases=$((cases + 1))
  (ulimit -v "$MEM_KB"; timeout -s KILL "$((secs * SLOW))" "$@") >out.txt 2>err.txt
  local rc=$?
  local first
  first=$(head -n 1 err.txt)
  if [ "$rc" -ne "$want" ]; then
    fail "exit $rc (want $want): $* :: $(head -c 300 err.txt)"
    return
  fi
  [ "$want" -eq 0 ] && return
  if ! [[ "$first" =~ $regex ]]; then
    fail "stderr '$first' does not match '$regex': $*"
    return
  fi
  if [ "${ONE_LINE:-1}" = 1 ] && [ "$(wc -l <err.txt)" -ne 1 ]; then
    fail "stderr is not one line: $* :: $(head -c 300 err.txt)"
  fi
}

# npy NAME DESCR SHAPE [VALUES]: a .npy ("(4, 0)", "<f4", "1, float('-inf')"),
# of zeros unless VALUES are given.
npy() {
  "$PY" - "$@" <<'PY'
import sys, struct, ast
name, descr, shape = sys.argv[1], sys.argv[2], ast.literal_eval(sys.argv[3])
n = 1
for d in shape: n *= d
values = eval("[" + sys.argv[4] + "]") if len(sys.argv) > 4 else [0] * n
code = {"<f4": "f", "<i4": "i", "|i1": "b", "|b1": "?"}[descr]
header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(name, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<%d%s" % (n, code), *values))
PY
}

hlo() {  # hlo NAME BODY: a module with one ENTRY
  printf 'HloModule m\n\n%s\n' "$2" >"$1"
}

group_files() {
  for t in tpuc tpu-as tpu-objdump tpusim tpu-compare; do
    expect 0 "" 10 "$BIN/$t" --version
    grep -q "^$t (tpusim [0-9]" out.txt || fail "$t --version printed '$(cat out.txt)'"
  done
  mkdir -p dir
  printf '.target tiny\nhalt\n' >good.s
  "$BIN/tpu-as" good.s -o good.tpu
  # A program for a target that is not a preset needs its config file, and says so.
  config_with mine.json 's/"name": "tiny"/"name": "mine"/'
  "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" -o mine.tpu --config mine.json || fail "tpuc --config mine.json"
  expect 2 "^tpusim: error: mine.tpu was compiled for target 'mine', which is not a preset: give the config tpuc had with --config FILE" 10 \
    "$BIN/tpusim" mine.tpu
  # Logging: one logger for every tool; bad levels and units are usage errors.
  expect 2 "^tpusim: error: --log-units: 'bogus' is not a unit" 10 "$BIN/tpusim" good.tpu --log-units bogus
  expect 2 "^tpu-as: error: --log-level: loud not in" 10 "$BIN/tpu-as" good.s -o x.tpu --log-level loud
  "$BIN/tpusim" good.tpu -v -q 2>verbose.txt || fail "tpusim -v failed"
  grep -q "^tpusim: info: good.tpu: 1 instructions" verbose.txt || fail "tpusim -v: $(cat verbose.txt)"
  "$BIN/tpusim" good.tpu --log-units all --log-level debug -q 2>units.txt || fail "tpusim --log-units failed"
  grep -q "^tpusim: debug: cycles 0..1 core0.scalar pc 0: halt" units.txt || fail "tpusim --log-units: $(cat units.txt)"
  ONE_LINE=1 expect 1 "^tpu-as: error: missing.s" 10 "$BIN/tpu-as" missing.s -o x.tpu --log-level error
  for f in dir /dev/zero /dev/null; do
    expect 1 "^tpu-as: error: $f: (is a directory|is not a regular file)" 10 "$BIN/tpu-as" "$f" -o x.tpu
    expect 1 "^tpu-objdump: error: $f: " 10 "$BIN/tpu-objdump" "$f"
    expect 1 "^tpuc: error: $f" 10 "$BIN/tpuc" "$f" -o x.tpu
    expect 1 "^tpusim: error: $f: " 10 "$BIN/tpusim" "$f"
    expect 1 "^tpuc: error: .*$f" 10 "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" -o x.tpu --config "$f"
    expect 1 "^tpusim: error: .*$f" 10 "$BIN/tpusim" good.tpu --config "$f"
    expect 2 "^tpu-compare: error: $f" 10 "$BIN/tpu-compare" "$f" "$f"
  done
  expect 1 "^tpuc: error: .*dir" 10 "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" --interpret --inputs dir dir --outputs o
  "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" --config tiny -o mm.tpu
  expect 1 "^tpusim: error: /dev/zero: is not a regular file" 10 "$BIN/tpusim" mm.tpu --inputs /dev/zero /dev/zero
  expect 1 "^tpu-as: error: missing.s: cannot open file" 10 "$BIN/tpu-as" missing.s -o x.tpu
}

config_with() {  # config_with NAME SED-EXPRESSION: the tiny preset, edited
  sed "$2" "$SRC/configs/tiny.json" >"$1"  # keeps the name "tiny"
}

group_config() {
  config_with clk_huge.json 's/"clock_hz": [0-9.e]*/"clock_hz": 1e400/'
  config_with clk_zero.json 's/"clock_hz": [0-9.e]*/"clock_hz": 0/'
  config_with clk_frac.json 's/"clock_hz": [0-9.e]*/"clock_hz": 1.5e30/'
  config_with no_hbm.json '/"hbm": {/,/}/d; s/"bursts_per_cycle": 1$/"bursts_per_cycle": 1/'
  config_with acc1.json 's/"acc_rows": [0-9]*/"acc_rows": 1/'
  config_with vmem64.json 's/"vmem_bytes": [0-9]*/"vmem_bytes": 64/'
  config_with huge_acc.json 's/"acc_rows": [0-9]*/"acc_rows": 16777216/; s/"mxu_dim": 8/"mxu_dim": 1024/; s/"vpu_lanes": 8/"vpu_lanes": 1024/'
  printf '.target tiny\nhalt\n' >good.s
  "$BIN/tpu-as" good.s -o good.tpu
  # A program for a target that is not a preset needs its config file, and says so.
  config_with mine.json 's/"name": "tiny"/"name": "mine"/'
  "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" -o mine.tpu --config mine.json || fail "tpuc --config mine.json"
  expect 2 "^tpusim: error: mine.tpu was compiled for target 'mine', which is not a preset: give the config tpuc had with --config FILE" 10 \
    "$BIN/tpusim" mine.tpu
  # Logging: one logger for every tool; bad levels and units are usage errors.
  expect 2 "^tpusim: error: --log-units: 'bogus' is not a unit" 10 "$BIN/tpusim" good.tpu --log-units bogus
  expect 2 "^tpu-as: error: --log-level: loud not in" 10 "$BIN/tpu-as" good.s -o x.tpu --log-level loud
  "$BIN/tpusim" good.tpu -v -q 2>verbose.txt || fail "tpusim -v failed"
  grep -q "^tpusim: info: good.tpu: 1 instructions" verbose.txt || fail "tpusim -v: $(cat verbose.txt)"
  "$BIN/tpusim" good.tpu --log-units all --log-level debug -q 2>units.txt || fail "tpusim --log-units failed"
  grep -q "^tpusim: debug: cycles 0..1 core0.scalar pc 0: halt" units.txt || fail "tpusim --log-units: $(cat units.txt)"
  ONE_LINE=1 expect 1 "^tpu-as: error: missing.s" 10 "$BIN/tpu-as" missing.s -o x.tpu --log-level error
  local mm="$SRC/tests/corpus/mlp_f32/module.hlo"
  for c in clk_huge clk_zero clk_frac no_hbm; do
    expect 1 "^tpuc: error: $c.json: " 20 "$BIN/tpuc" "$mm" -o x.tpu --config $c.json
    expect 1 "^tpu-as: error: $c.json: " 10 "$BIN/tpu-as" good.s -o x.tpu --config $c.json
    expect 1 "^tpusim: error: $c.json: " 10 "$BIN/tpusim" good.tpu --config $c.json
  done
  # --set changes one parameter and goes through the same validation.
  expect 1 "^tpuc: error: --set hbm.nope=1: the config has no parameter 'hbm.nope'" 10 "$BIN/tpuc" "$mm" -o x.tpu --set hbm.nope=1
  expect 1 "^tpusim: error: --set hbm=1: 'hbm' is a section" 10 "$BIN/tpusim" good.tpu --set hbm=1
  expect 1 "^tpusim: error: --set clock_hz: is not KEY=VALUE|^tpusim: error: --set 'clock_hz' is not KEY=VALUE" 10 "$BIN/tpusim" good.tpu --set clock_hz
  expect 1 "^tpu-as: error: preset 'tiny' with --set clock_hz=0: clock_hz = 0 is outside" 10 "$BIN/tpu-as" good.s -o x.tpu --config tiny --set clock_hz=0
  expect 1 "^tpusim: error: the program was compiled for another variant of target 'tiny' \\(mxu_dim 8 vs 4" 10 \
    "$BIN/tpusim" good.tpu --set target.mxu_dim=4 --set target.vpu_lanes=4
  expect 0 "" 10 "$BIN/tpusim" --print-config tiny --set hbm.simple.latency_ns=7
  grep -q '"latency_ns": 7' out.txt || fail "--print-config with --set: $(cat out.txt)"
  expect 1 "^tpuc: error: .*target.acc_rows = 1" 20 "$BIN/tpuc" "$mm" -o x.tpu --config acc1.json
  expect 1 "^tpuc: error: .*does not fit in target.vmem_bytes = 64" 20 "$BIN/tpuc" "$mm" -o x.tpu --config vmem64.json
  printf '.target "tiny", chips=1, cores=1, mxus_per_core=1, mxu_dim=1024, vpu_lanes=1024, vmem_bytes=262144, acc_rows=16777216, smem_bytes=16384, hbm_bytes=67108864\nhalt\n' >huge.s
  "$BIN/tpu-as" huge.s -o huge.tpu --config huge_acc.json
  expect 1 "^tpusim: error: the accumulators of this machine take" 20 "$BIN/tpusim" huge.tpu --config huge_acc.json
}

group_empty() {
  hlo dot0.hlo 'ENTRY main {
  a = f32[4,0]{1,0} parameter(0)
  b = f32[0,4]{1,0} parameter(1)
  ROOT d = f32[4,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}'
  hlo dots8.hlo 'ENTRY main {
  a = s8[4,0]{1,0} parameter(0)
  b = s8[0,4]{1,0} parameter(1)
  ROOT d = s32[4,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}'
  hlo conv0.hlo 'ENTRY main {
  a = f32[1,4,4,0]{3,2,1,0} parameter(0)
  k = f32[3,3,0,2]{3,2,1,0} parameter(1)
  ROOT c = f32[1,2,2,2]{3,2,1,0} convolution(a, k), window={size=3x3}, dim_labels=b01f_01io->b01f
}'
  for comb in add:0 maximum:-inf minimum:inf; do
    hlo "red_${comb%%:*}.hlo" "r {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] ${comb%%:*}(x, y)
}

ENTRY main {
  a = f32[0,4]{1,0} parameter(0)
  z = f32[] constant(${comb#*:})
  ROOT r = f32[4]{0} reduce(a, z), dimensions={0}, to_apply=r
}"
  done
  hlo empty_out.hlo 'ENTRY main {
  a = f32[0,4]{1,0} parameter(0)
  ROOT e = f32[0,4]{1,0} exponential(a)
}'
  npy f40.npy '<f4' '(4, 0)'
  npy f04.npy '<f4' '(0, 4)'
  npy s40.npy '|i1' '(4, 0)'
  npy s04.npy '|i1' '(0, 4)'
  npy f1440.npy '<f4' '(1, 4, 4, 0)'
  npy k3302.npy '<f4' '(3, 3, 0, 2)'
  check_run() {  # check_run NAME INPUTS...: tpusim's outputs are the interpreter's, exactly
    local name=$1
    shift
    for cfg in tiny v5e; do
      expect 0 "" 30 "$BIN/tpuc" "$name.hlo" -o "$name.tpu" --config $cfg || continue
      expect 0 "" 30 "$BIN/tpusim" -q "$name.tpu" --inputs "$@" --outputs "sim_$name"
      expect 0 "" 30 "$BIN/tpuc" "$name.hlo" --interpret --inputs "$@" --outputs "ref_$name"
      expect 0 "" 10 "$BIN/tpu-compare" "ref_$name/out0.npy" "sim_$name/out0.npy" --tol 0
    done
  }
  check_run dot0 f40.npy f04.npy
  check_run dots8 s40.npy s04.npy
  check_run conv0 f1440.npy k3302.npy
  check_run red_add f04.npy
  check_run red_maximum f04.npy
  check_run red_minimum f04.npy
  check_run empty_out f04.npy
}

group_size() {
  "$PY" - <<'PY'
n = 50000
lines = ["HloModule m", "", "ENTRY main {", "  p0 = f32[8]{0} parameter(0)", "  p1 = f32[8]{0} parameter(1)",
         "  v0 = f32[8]{0} add(p0, p1)"]
lines += [f"  v{i} = f32[8]{{0}} multiply(v{i-1}, p1)" if i % 2 else f"  v{i} = f32[8]{{0}} add(v{i-1}, p0)" for i in range(1, n)]
lines += [f"  ROOT r = f32[8]{{0}} add(v{n-1}, p0)", "}"]
open("chain.hlo", "w").write("\n".join(lines) + "\n")
d = 50000
open("deep_tuple.hlo", "w").write("HloModule m\n\nENTRY main {\n  a = " + "(" * d + "f32[]" + ")" * d +
                                  " parameter(0)\n  ROOT b = f32[] constant(1)\n}\n")
open("deep_parens.s", "w").write(".target tiny\n  li s1, " + "(" * d + "1" + ")" * d + "\n  halt\n")
open("deep_unary.s", "w").write(".target tiny\n  li s1, " + "-" * d + "1\n  halt\n")
dims = [2, 1, 2, 1, 2, 1, 2, 1, 3]
s = ",".join(map(str, dims)); lay = ",".join(map(str, range(8, -1, -1)))
open("rank9.hlo", "w").write(f"HloModule m\n\nENTRY main {{\n  a = f32[{s}]{{{lay}}} parameter(0)\n"
                             f"  ROOT c = f32[{s}]{{{lay}}} negate(a)\n}}\n")
body = """HloModule m

body {
  p = (s32[], f32[72,72]{1,0}, f32[72,72]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[72,72]{1,0} get-tuple-element(p), index=1
  w = f32[72,72]{1,0} get-tuple-element(p), index=2
  y = f32[72,72]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT r = (s32[], f32[72,72]{1,0}, f32[72,72]{1,0}) tuple(i2, y, w)
}

cond {
  p = (s32[], f32[72,72]{1,0}, f32[72,72]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(TRIPS)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[72,72]{1,0} parameter(0)
  w = f32[72,72]{1,0} parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[72,72]{1,0}, f32[72,72]{1,0}) tuple(z, x, w)
  l = (s32[], f32[72,72]{1,0}, f32[72,72]{1,0}) while(init), condition=cond, body=body
  ROOT o = f32[72,72]{1,0} get-tuple-element(l), index=1
}
"""
open("loop.hlo", "w").write(body.replace("TRIPS", "1024"))
PY
  expect 0 "" 60 "$BIN/tpuc" chain.hlo -o chain.tpu --config tiny
  expect 1 "^tpuc: error: deep_tuple.hlo:4: tuple shapes nested more than 64 deep" 20 "$BIN/tpuc" deep_tuple.hlo -o x.tpu
  ONE_LINE=0 expect 1 "^deep_parens.s:2:[0-9]+: error: expression nested more than 256 deep" 20 "$BIN/tpu-as" deep_parens.s -o x.tpu
  ONE_LINE=0 expect 1 "^deep_unary.s:2:[0-9]+: error: expression nested more than 256 deep" 20 "$BIN/tpu-as" deep_unary.s -o x.tpu
  expect 1 "^tpuc: error: rank9.hlo:4 a: unsupported input of rank 9" 20 "$BIN/tpuc" rank9.hlo -o x.tpu
  # Unrolled loops: 3.5 M lines of assembly, compiled and listed within the address-space limit.
  MEM_KB=$(mem_kb 3000000) expect 0 "" 300 "$BIN/tpuc" loop.hlo -o loop.tpu --config tiny
  printf '.target v5e\n.data 0x100000\n.zero 0x4000000\n.text\nhalt\n' >zero.s
  expect 0 "" 30 "$BIN/tpu-as" zero.s -o zero.tpu
  expect 0 "" 30 "$BIN/tpu-objdump" zero.tpu -o zero_list.s
  MEM_KB=$(mem_kb 1000000) expect 0 "" 30 "$BIN/tpu-as" zero_list.s -o zero2.tpu
  cmp -s zero.tpu zero2.tpu || fail "the listing of a 64 MiB .zero does not reassemble to the same program"
}

group_hlo() {
  local p='  p = f32[4]{0} parameter(0)'
  hlo dup_name.hlo "ENTRY main {
$p
  p = f32[4]{0} negate(p)
  ROOT r = f32[4]{0} negate(p)
}"
  hlo two_roots.hlo "ENTRY main {
$p
  ROOT a = f32[4]{0} negate(p)
  ROOT b = f32[4]{0} abs(p)
}"
  hlo two_entries.hlo "ENTRY main {
$p
  ROOT a = f32[4]{0} negate(p)
}

ENTRY other {
$p
  ROOT a = f32[4]{0} negate(p)
}"
  hlo gte_type.hlo "ENTRY main {
$p
  q = s32[4]{0} parameter(1)
  t = (f32[4]{0}, s32[4]{0}) tuple(p, q)
  ROOT g = f32[4]{0} get-tuple-element(t), index=1
}"
  hlo region_type.hlo "r {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}

ENTRY main {
$p
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=r
}"
  hlo s8_range.hlo 'ENTRY main {
  ROOT c = s8[] constant(300)
}'
  hlo result_shape.hlo "ENTRY main {
$p
  ROOT r = f32[5]{0} negate(p)
}"
  expect 1 "^tpuc: error: dup_name.hlo:5: 'p' is defined twice" 10 "$BIN/tpuc" dup_name.hlo -o x.tpu
  expect 1 "^tpuc: error: two_roots.hlo:6: a second ROOT" 10 "$BIN/tpuc" two_roots.hlo -o x.tpu
  expect 1 "^tpuc: error: two_entries.hlo:[0-9]+: a second ENTRY" 10 "$BIN/tpuc" two_entries.hlo -o x.tpu
  expect 1 "^tpuc: error: gte_type.hlo:7: g: its shape f32\[4\] does not match the s32\[4\]" 10 "$BIN/tpuc" gte_type.hlo -o x.tpu
  expect 1 "^tpuc: error: region_type.hlo:" 10 "$BIN/tpuc" region_type.hlo -o x.tpu
  expect 1 "^tpuc: error: s8_range.hlo:4: c: constant value 300 does not fit s8" 10 "$BIN/tpuc" s8_range.hlo -o x.tpu
  expect 1 "^tpuc: error: result_shape.hlo:5" 10 "$BIN/tpuc" result_shape.hlo -o x.tpu
}

group_stablehlo() {
  local main='func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {'
  printf '%s\n  %%0 = stablehlo.negate %%a : tensor<4xf32>\n  return %%0 : tensor<4xf32>\n}\n' "$main" >ok.mlir
  "$PY" - <<'PY'
deep = 100000
open("deep_list.mlir", "w").write("func.func @main() -> tensor<f32> {\n  %c = stablehlo.constant dense<" + "[" * deep + "1" + "]" * deep + "> : tensor<f32>\n  return %c : tensor<f32>\n}\n")
open("deep_tuple.mlir", "w").write("func.func @main(%a: " + "tuple<" * deep + "tensor<f32>" + ">" * deep + ") -> tensor<f32> {\n}\n")
open("deep_attr.mlir", "w").write("func.func @main(%a: tensor<4xf32> {x = " + "{y = " * deep + "1" + "}" * deep + "}) -> tensor<4xf32> {\n}\n")
regions = "".join('%%r%d = "stablehlo.case"(%%i) ({\n' % k for k in range(2000))
open("deep_regions.mlir", "w").write("func.func @main(%i: tensor<i32>) -> tensor<f32> {\n" + regions + "\n")
open("wide.mlir", "w").write("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n" + "".join(
    "  %%v%d = stablehlo.negate %s : tensor<4xf32>\n" % (k, "%a" if k == 0 else "%%v%d" % (k - 1)) for k in range(20000)) +
    "  return %v19999 : tensor<4xf32>\n}\n")
PY
  printf '%s\n  %%0 = stablehlo.constant dense<"0xZZ00803F"> : tensor<f32>\n  return %%a : tensor<4xf32>\n}\n' "$main" >bad_hex.mlir
  printf '%s\n  %%0 = stablehlo.negate %%a : tensor<4xf32>\n  return %%0 : tensor<4xf32>\n' "$main" >unclosed.mlir
  printf '%s\n  %%0 = stablehlo.custom_call @foo(%%a) {backend_config = "unterminated : tensor<4xf32>\n' "$main" >unterminated.mlir
  printf 'func.func @main(%%a: tensor<999999999999999x999999999999999xf32>) -> tensor<4xf32> {\n}\n' >huge_dims.mlir
  printf '%s\n  %%0 = stablehlo.convolution(%%a, %%a) dim_numbers = [b, 9, f]x[9, i, o]->[b, 9, f], window = {} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n  return %%0 : tensor<4xf32>\n}\n' "$main" >bad_conv.mlir
  printf '%s\n  %%0 = stablehlo.iota dim = [] : tensor<4xf32>\n  return %%0 : tensor<4xf32>\n}\n' "$main" >no_dim.mlir
  printf '%s\n  %%0 = stablehlo.negate %%a : tensor<4xf32>\n  stablehlo.custom_call @check.expect_close(%%0, %%a) : (tensor<4xf32>, tensor<4xf32>) -> ()\n  return %%0 : tensor<4xf32>\n}\n' "$main" >check.mlir
  : >empty.mlir
  expect 0 "" 10 "$BIN/tpuc" ok.mlir -o ok.tpu --config tiny
  expect 1 "^tpuc: error: deep_list.mlir:2:[0-9]+: brackets nest too deep" 10 "$BIN/tpuc" deep_list.mlir -o x.tpu
  expect 1 "^tpuc: error: deep_tuple.mlir:1:[0-9]+: types nest deeper than 64" 10 "$BIN/tpuc" deep_tuple.mlir -o x.tpu
  expect 1 "^tpuc: error: deep_attr.mlir:1:[0-9]+: attributes nest deeper than 64" 10 "$BIN/tpuc" deep_attr.mlir -o x.tpu
  expect 1 "^tpuc: error: deep_regions.mlir:[0-9]+:[0-9]+: regions nest deeper than 64" 10 "$BIN/tpuc" deep_regions.mlir -o x.tpu
  expect 0 "" 60 "$BIN/tpuc" wide.mlir -o wide.tpu --config tiny
  expect 1 "^tpuc: error: bad_hex.mlir:2:3: stablehlo.constant: 'Z' in a hex constant" 10 "$BIN/tpuc" bad_hex.mlir -o x.tpu
  expect 1 "^tpuc: error: unclosed.mlir:[0-9]+:[0-9]+: " 10 "$BIN/tpuc" unclosed.mlir -o x.tpu
  expect 1 "^tpuc: error: unterminated.mlir:2:[0-9]+: unterminated string" 10 "$BIN/tpuc" unterminated.mlir -o x.tpu
  expect 1 "^tpuc: error: huge_dims.mlir:1:[0-9]+: dimension above 2\^48" 10 "$BIN/tpuc" huge_dims.mlir -o x.tpu
  expect 1 "^tpuc: error: bad_conv.mlir:2:3: stablehlo.convolution: bad spatial dimension 9" 10 "$BIN/tpuc" bad_conv.mlir -o x.tpu
  expect 1 "^tpuc: error: no_dim.mlir:2:3: stablehlo.iota: an operand, a region or an attribute's value is missing" 10 "$BIN/tpuc" no_dim.mlir -o x.tpu
  expect 1 "^tpuc: error: empty.mlir:1:1: no function @main" 10 "$BIN/tpuc" empty.mlir -o x.tpu
  # A program's failing check: exit 5, the check's line on stdout, one line on stderr.
  expect 0 "" 10 "$BIN/tpuc" check.mlir -o check.tpu --config tiny
  npy a.npy '<f4' '(4,)' '1, 2, 3, 4'
  expect 5 "^tpusim: error: 1 of 1 checks failed$" 20 "$BIN/tpusim" check.tpu --inputs a.npy
  grep -q "^check 0 expect_close out1 vs out2: FAIL (-1 (actual) vs 1 (expected) at index \[0\]" out.txt || fail "no FAIL line for the check: $(cat out.txt)"
}

group_asm() {
  printf '.target tiny\n.data 0x100\n.zero -1\n.text\nhalt\n' >neg_zero.s
  ONE_LINE=0 expect 1 "^neg_zero.s:3:[0-9]+: error: " 10 "$BIN/tpu-as" neg_zero.s -o x.tpu
  printf 'garbage' >garbage.tpu
  expect 1 "^tpu-objdump: error: garbage.tpu: " 10 "$BIN/tpu-objdump" garbage.tpu
  expect 1 "^tpusim: error: garbage.tpu: " 10 "$BIN/tpusim" garbage.tpu
}

group_writes() {
  printf '.target tiny\nhalt\n' >good.s
  "$BIN/tpu-as" good.s -o good.tpu
  # A program for a target that is not a preset needs its config file, and says so.
  config_with mine.json 's/"name": "tiny"/"name": "mine"/'
  "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" -o mine.tpu --config mine.json || fail "tpuc --config mine.json"
  expect 2 "^tpusim: error: mine.tpu was compiled for target 'mine', which is not a preset: give the config tpuc had with --config FILE" 10 \
    "$BIN/tpusim" mine.tpu
  # Logging: one logger for every tool; bad levels and units are usage errors.
  expect 2 "^tpusim: error: --log-units: 'bogus' is not a unit" 10 "$BIN/tpusim" good.tpu --log-units bogus
  expect 2 "^tpu-as: error: --log-level: loud not in" 10 "$BIN/tpu-as" good.s -o x.tpu --log-level loud
  "$BIN/tpusim" good.tpu -v -q 2>verbose.txt || fail "tpusim -v failed"
  grep -q "^tpusim: info: good.tpu: 1 instructions" verbose.txt || fail "tpusim -v: $(cat verbose.txt)"
  "$BIN/tpusim" good.tpu --log-units all --log-level debug -q 2>units.txt || fail "tpusim --log-units failed"
  grep -q "^tpusim: debug: cycles 0..1 core0.scalar pc 0: halt" units.txt || fail "tpusim --log-units: $(cat units.txt)"
  ONE_LINE=1 expect 1 "^tpu-as: error: missing.s" 10 "$BIN/tpu-as" missing.s -o x.tpu --log-level error
  mkdir -p dir
  expect 1 "^tpu-as: error: /dev/full: write error" 10 "$BIN/tpu-as" good.s -o /dev/full
  expect 1 "^tpu-objdump: error: /dev/full: write error" 10 "$BIN/tpu-objdump" good.tpu -o /dev/full
  expect 1 "^tpuc: error: /dev/full: write error" 20 "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" -o /dev/full
  expect 1 "^tpuc: error: /dev/full: write error" 20 "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" --emit asm -o /dev/full
  expect 1 "^tpu-as: error: dir: cannot open for writing" 10 "$BIN/tpu-as" good.s -o dir
  for flag in --vcd --trace --stats --record-mxu; do
    expect 1 "^tpusim: error: /dev/full: write error" 10 "$BIN/tpusim" good.tpu $flag /dev/full
  done
  "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" --config tiny -o mm.tpu
  local args=(--inputs "$SRC/tests/corpus/matmul_f32/arg0.npy" "$SRC/tests/corpus/matmul_f32/arg1.npy")
  expect 1 "^tpusim: error: .*full" 30 "$BIN/tpusim" mm.tpu "${args[@]}" --outputs /dev/full
  expect 1 "^tpu-objdump: error: cannot write to standard output" 10 sh -c "'$BIN/tpu-objdump' good.tpu >/dev/full"
}

group_runs() {
  printf '.target tiny\nspin:\n  beq s0, s0, spin\n' >spin.s
  "$BIN/tpu-as" spin.s -o spin.tpu
  printf '.target tiny\nhalt\n' >good.s
  "$BIN/tpu-as" good.s -o good.tpu
  # A program for a target that is not a preset needs its config file, and says so.
  config_with mine.json 's/"name": "tiny"/"name": "mine"/'
  "$BIN/tpuc" "$SRC/tests/corpus/matmul_f32/module.hlo" -o mine.tpu --config mine.json || fail "tpuc --config mine.json"
  expect 2 "^tpusim: error: mine.tpu was compiled for target 'mine', which is not a preset: give the config tpuc had with --config FILE" 10 \
    "$BIN/tpusim" mine.tpu
  # Logging: one logger for every tool; bad levels and units are usage errors.
  expect 2 "^tpusim: error: --log-units: 'bogus' is not a unit" 10 "$BIN/tpusim" good.tpu --log-units bogus
  expect 2 "^tpu-as: error: --log-level: loud not in" 10 "$BIN/tpu-as" good.s -o x.tpu --log-level loud
  "$BIN/tpusim" good.tpu -v -q 2>verbose.txt || fail "tpusim -v failed"
  grep -q "^tpusim: info: good.tpu: 1 instructions" verbose.txt || fail "tpusim -v: $(cat verbose.txt)"
  "$BIN/tpusim" good.tpu --log-units all --log-level debug -q 2>units.txt || fail "tpusim --log-units failed"
  grep -q "^tpusim: debug: cycles 0..1 core0.scalar pc 0: halt" units.txt || fail "tpusim --log-units: $(cat units.txt)"
  ONE_LINE=1 expect 1 "^tpu-as: error: missing.s" 10 "$BIN/tpu-as" missing.s -o x.tpu --log-level error
  expect 2 "^tpusim: error: --max-cycles '-1' is not a cycle count" 10 "$BIN/tpusim" good.tpu --max-cycles -1
  expect 2 "^tpusim: error: --max-cycles 'x' is not a cycle count" 10 "$BIN/tpusim" good.tpu --max-cycles x
  expect 2 "^tpusim: error: --vcd-window needs --vcd" 10 "$BIN/tpusim" good.tpu --vcd-window 1:2
  expect 2 "^tpusim: error: --memory-budget '12Q' is not a size" 10 "$BIN/tpusim" good.tpu --memory-budget 12Q
  expect 2 "^tpusim: error: .* takes 0 input" 10 "$BIN/tpusim" good.tpu --inputs good.tpu
  # A program that never halts stops at the default cycle limit, its trace bounded.
  expect 3 "^tpusim: error: cycle limit of 50000000 reached" 300 "$BIN/tpusim" spin.tpu --stats spin.json
  "$PY" -c "import json,sys; s=json.load(open('spin.json')); sys.exit(s['status'] != 'cycle_limit')" || fail "stats of a cycle-limited run"
  expect 3 "^tpusim: error: cycle limit of 2000000 reached" 120 "$BIN/tpusim" spin.tpu --max-cycles 2000000 --trace spin_trace.json
  "$PY" -c "import json; json.load(open('spin_trace.json'))" || fail "the trace of a cycle-limited run is not valid JSON"
  # A program filling HBM stops at the memory budget.
  printf '.target v5e\n  li s2, 4194304\n  li s3, 1\n  slli s3, s3, 32\nagain:\n  dma.st s1, s0, s2, sem1\n  add s1, s1, s2\n  bltu s1, s3, again\n  halt\n' >fill.s
  "$BIN/tpu-as" fill.s -o fill.tpu
  expect 3 "^tpusim: error: cycle [0-9]+: the program touched more simulated memory than the host memory budget of 512 MiB" 120 \
    "$BIN/tpusim" fill.tpu --memory-budget 512M
  # SIGINT mid-run: status interrupted, exit 130, stats/trace/VCD valid.
  (
    ulimit -v "$MEM_KB"
    "$BIN/tpusim" spin.tpu --max-cycles 0 --stats int.json --trace int_trace.json --vcd int.vcd >/dev/null 2>int_err.txt &
    pid=$!
    sleep $((2 * SLOW))
    kill -INT $pid
    wait $pid
    echo $? >int_rc.txt
  )
  [ "$(cat int_rc.txt)" = 130 ] || fail "SIGINT: exit $(cat int_rc.txt), want 130"
  grep -q "^tpusim: error: interrupted at cycle" int_err.txt || fail "SIGINT: stderr $(cat int_err.txt)"
  "$PY" -c "import json,sys; json.load(open('int_trace.json')); s=json.load(open('int.json')); sys.exit(s['status'] != 'interrupted')" ||
    fail "SIGINT: the stats or trace are not valid"
  tail -n 1 int.vcd | grep -q '^#[0-9]*$' || fail "SIGINT: the VCD does not end with a time stamp"
}

group_compare() {
  npy i32.npy '<i4' '(2,)' '1, 2'
  npy f32.npy '<f4' '(2,)' '1, 2'
  npy ninf.npy '<f4' '(2,)' "float('-inf'), 1"
  npy zero.npy '<f4' '(2,)' '0, 1'
  expect 2 "^tpu-compare: error: dtypes differ: s32\[2\] and f32\[2\]" 10 "$BIN/tpu-compare" i32.npy f32.npy
  "$BIN/tpu-compare" ninf.npy zero.npy >cmp.txt
  grep -q "max_abs inf" cmp.txt || fail "tpu-compare -inf vs 0: $(cat cmp.txt)"
  ONE_LINE=0 expect 1 "" 10 "$BIN/tpu-compare" ninf.npy zero.npy --tol 1e-3
}

# Memory traces for tpusim --hbm-trace: malformed lines name the line; an
# empty trace drains at once; absurd cycles hit the cycle limit (exit 3).
group_hbmtrace() {
  : >empty.trace
  expect 0 "" 10 "$BIN/tpusim" --hbm-trace empty.trace --stats empty.json
  "$PY" -c "import json; h = json.load(open('empty.json'))['hbm']; assert h['requests'] == 0 and h['drain_cycles'] == 0, h" ||
    fail "empty trace: $(cat empty.json)"
  # bad_trace NAME CONTENT REGEX: the trace is refused with one line, exit 1.
  bad_trace() {
    printf "$2" >"$1.trace"
    expect 1 "^tpusim: error: $1.trace:$3" 10 "$BIN/tpusim" --hbm-trace "$1.trace"
  }
  bad_trace bad_addr '# a comment\n\n0x40 READ 0\n0xZZ READ 1\n' "4: bad address 'ZZ'"
  bad_trace bad_kind '0x40 FETCH 0\n' "1: bad request kind 'FETCH'"
  bad_trace short '0x40 READ\n' "1: expected '0xADDRESS READ\\|WRITE CYCLE'"
  bad_trace no_0x '40 READ 0\n' "1: bad address '40'"
  bad_trace big_cycle '0x40 READ 99999999999999999999\n' "1: bad cycle"
  bad_trace big_addr '0xFFFFFFFFFFFFFFFFF READ 1\n' "1: bad address"
  printf '0x40 READ 9999999999999999999\n' >far.trace
  expect 3 "^tpusim: error: far.trace: request 1 is at cycle 9999999999999999999, beyond the cycle limit" 10 \
    "$BIN/tpusim" --hbm-trace far.trace
  printf '0x40 READ 2000000\n0xFFFFFFFFFFFFFFC0 WRITE 2000001\n' >late.trace
  expect 0 "" 20 "$BIN/tpusim" --hbm-trace late.trace --max-cycles 0 --stats late.json
  "$PY" -c "import json; h = json.load(open('late.json'))['hbm']; assert h['requests'] == 2 and h['drain_cycles'] > 2000000, h" ||
    fail "a late trace: $(cat late.json)"
  expect 1 "^tpusim: error: --hbm-trace replays through the detailed HBM model; this config has hbm.model = 'simple'" 10 \
    "$BIN/tpusim" --hbm-trace late.trace --config tiny
  expect 2 "^tpusim: error: give a program or --hbm-trace, not both" 10 "$BIN/tpusim" x.tpu --hbm-trace late.trace
  expect 1 "^tpusim: error: .*missing.trace" 10 "$BIN/tpusim" --hbm-trace missing.trace
  expect 1 "^tpusim: error: " 10 "$BIN/tpusim" --hbm-trace /dev/zero
}

for g in "${GROUPS_TO_RUN[@]}"; do
  echo "== $g"
  "group_$g"
done
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s) in $cases cases"
  exit 1
fi
echo "all $cases hostile cases behaved"
