#!/usr/bin/env bash
# Compiles and runs StableHLO programs in the form of StableHLO's testdata
# (@main with check.expect_* custom calls on @inputs()/@expected()) and
# reports one line per program. tpusim evaluates the checks: exit 0 when all
# pass, 5 when one fails. A file named *.fail.mlir must fail its checks.
#
#   tests/stablehlo/conformance.sh BIN_DIR CONFIG DIR|FILE...   [TPUC_FLAGS="--precision highest"]
#
# Prints PASS/FAIL/UNSUPPORTED per program (UNSUPPORTED: tpuc refused it with
# "unsupported ..."), then counts; exits 1 unless every program PASSes (an
# UNSUPPORTED one fails the run: a program goes in these folders once tpuc
# supports it) and there is at least one.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: conformance.sh BIN_DIR CONFIG DIR|FILE..." >&2; exit 2; }
bin="$1" config="$2"; shift 2
files=()
for a in "$@"; do
  if [ -d "$a" ]; then for f in "$a"/*.mlir; do [ -e "$f" ] && files+=("$f"); done; else files+=("$a"); fi
done
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
pass=0 fail=0 unsupported=0
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
for f in "${files[@]}"; do
  name="$(basename "$f" .mlir)"
  # shellcheck disable=SC2086
  if ! err=$("$bin/tpuc" "$f" --config "$config" ${TPUC_FLAGS:-} -o "$work/p.tpu" 2>&1); then
    if [[ "$err" == *"unsupported"* ]]; then
      printf "UNSUPPORTED %-40s %s\n" "$name" "$err"; unsupported=$((unsupported + 1))
    else
      printf "FAIL %-40s tpuc: %s\n" "$name" "$err"; fail=$((fail + 1))
    fi
    continue
  fi
  out=$("$bin/tpusim" "$work/p.tpu" --config "$config" -q 2>&1); rc=$?
  checks=$(grep -c '^check ' <<<"$out")
  if [[ "$name" == *.fail ]]; then
    if [ $rc -eq 5 ]; then printf "PASS %-40s its check failed, as it must (exit 5)\n" "$name"; pass=$((pass + 1))
    else printf "FAIL %-40s expected a failing check (exit 5), got exit %d\n" "$name" $rc; fail=$((fail + 1)); fi
  elif [ $rc -eq 0 ] && [ "$checks" -gt 0 ]; then
    printf "PASS %-40s %s\n" "$name" "$(grep '^check ' <<<"$out" | sed 's/.*PASS (//; s/)$//' | paste -sd';')"; pass=$((pass + 1))
  else
    printf "FAIL %-40s exit %d: %s\n" "$name" $rc "$(tr '\n' ' ' <<<"$out")"; fail=$((fail + 1))
  fi
done
echo "conformance on $config: $pass passed, $fail failed, $unsupported unsupported of ${#files[@]}"
[ $fail -eq 0 ] && [ $unsupported -eq 0 ] && [ $pass -gt 0 ]
