#!/usr/bin/env python3
"""The suite's inventory: lists every CTest of a build with its label and
whether it can skip, and checks that

- every test has a label (cmake/ProjectOptions.cmake, tpu_test_label);
- every line of OPTIONAL (tests that need a tool the build may lack)
  matches exactly its count of registered tests: a build without the tool
  registers them all the same, as tests that report SKIP, so a machine
  without the tool runs a suite of the same size, not a smaller one that
  passes.

usage: inventory.py BUILD_DIR OPTIONAL [--list]"""
import json
import re
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
build, optional = sys.argv[1], sys.argv[2]
out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, capture_output=True, text=True).stdout
tests = []
for t in json.loads(out)["tests"]:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    labels = props.get("LABELS", [])
    skips = "SKIP_REGULAR_EXPRESSION" in props or "SKIP_RETURN_CODE" in props
    tests.append((t["name"], labels, skips))

bad = []
if "--list" in sys.argv:
    for name, labels, skips in tests:
        print(f"{','.join(labels) or '-':12s} {'may skip' if skips else '        '}  {name}")
for name, labels, _ in tests:
    if not labels or "unlabelled" in labels:
        bad.append(f"{name}: no label (cmake/ProjectOptions.cmake, tpu_test_label)")
with open(optional) as f:
    for line in f:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = re.split(r"\s{2,}", line)
        pattern, count, tool = parts[0], int(parts[1]), parts[2]
        matched = [(n, s) for n, _, s in tests if re.fullmatch(pattern, n)]
        if len(matched) != count:
            bad.append(f"{pattern}: {len(matched)} tests registered, {count} expected (they need {tool})")
labels = {}
for _, ls, _ in tests:
    for l in ls:
        labels[l] = labels.get(l, 0) + 1
print(f"{len(tests)} tests: " + ", ".join(f"{n} {l}" for l, n in sorted(labels.items(), key=lambda x: x[0])) +
      f"; {sum(1 for t in tests if t[2])} may skip", flush=True)
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
