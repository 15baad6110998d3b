#!/usr/bin/env python3
"""Checks a stats.json against docs/stats.md both ways: every field the
document's tables name exists in the file, and every field of the file is
named by the document.

    stats_fields.py STATS.json docs/stats.md [--present-only]

--present-only checks one way: every field of the file is documented (for
the stats of tpusim --hbm-trace, which have few of the fields).

Table rows start with the field in backquotes; several fields share a row as
`a`, `.b` (a sibling of a); `{x,y}` lists alternatives; in a path `*`, an
upper-case word (`CAUSE`, `U`) or a word ending in an upper-case letter
(`coreC`, `mxuM`) matches any key, and `[]` any element of a list. Fields
under a heading that says "(only with" may be missing from a file."""
import json
import re
import sys


def patterns(doc):
    pats = []
    optional = False
    for line in open(doc):
        if line.startswith("#"):
            optional = "(only with" in line
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        prev = None
        for name in re.findall(r"`([^`]+)`", cell):
            if name.startswith(".") and prev is not None:
                name = prev.rsplit(".", 1)[0] + name
            prev = name
            alts = re.match(r"(.*)\{([^}]*)\}(.*)", name)
            for n in ([alts.group(1) + a + alts.group(3) for a in alts.group(2).split(",")] if alts else [name]):
                pats.append((n, optional))
    return pats


def key_regex(part):
    if part == "*":
        return r".+?"
    if re.fullmatch(r"[A-Z]+", part):
        return r"[^.]+"
    m = re.fullmatch(r"([a-z]+)([A-Z])", part)
    if m:
        return re.escape(m.group(1)) + r"[0-9]+"
    return re.escape(part)


def to_regex(pattern):
    parts = re.split(r"\.(?![^\[]*\])", pattern)
    out = []
    for p in parts:
        arr = p.endswith("[]")
        out.append(key_regex(p[:-2] if arr else p) + (r"\[\]" if arr else ""))
    return re.compile(r"\.".join(out))


def leaves(x, path=""):
    if isinstance(x, dict):
        if not x:
            yield path
        for k, v in x.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(x, list):
        if not x:
            yield path + "[]"
        for v in x:
            yield from leaves(v, path + "[]")
    else:
        yield path


def main():
    stats = json.load(open(sys.argv[1]))
    regs = [(p, to_regex(p), optional) for p, optional in patterns(sys.argv[2])]
    paths = set(leaves(stats))
    bad = 0
    present_only = "--present-only" in sys.argv[3:]
    for p, r, optional in regs:
        if optional or present_only:
            continue
        if not any(r.fullmatch(q) or any(r.fullmatch(q[:i]) for i in range(len(q)) if q[i] in ".[") for q in paths):
            print(f"documented but missing: {p}")
            bad += 1
    for q in sorted(paths):
        if not any(r.fullmatch(q) or any(r.fullmatch(q[:i]) for i in range(len(q)) if q[i] in ".[") for _, r, _ in regs):
            print(f"in stats.json but not documented: {q}")
            bad += 1
    print(f"{len(regs)} documented fields, {len(paths)} fields in the file: {'OK' if not bad else f'{bad} problem(s)'}")
    sys.exit(1 if bad else 0)


main()
