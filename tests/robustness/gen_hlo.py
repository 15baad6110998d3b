#!/usr/bin/env python3
"""Random *valid* HLO programs for differential testing (docs/robustness.md).

    gen_hlo.py SEED OUTDIR [--ops N]

writes OUTDIR/module.hlo, OUTDIR/argK.npy (one per parameter) and
OUTDIR/config.json (a legal machine, sometimes at the edges of its ranges).
Shapes include 0 and 1; ops cover what tpuc supports: element-wise math,
compare/select, convert, layout ops, reductions, dots, iota, constants,
gather and scatter (one or two indexed dimensions, indices partly out of
range).
Values stay bounded (inputs on a 1/8 grid in [-2, 2], squashing ops before
anything that could overflow) so the interpreter and the simulator can be
compared with a tight tolerance. Python's standard library only.
"""
import json
import os
import random
import struct
import sys

DTYPES = ["f32", "s32"]
UNARY_F = ["negate", "abs", "tanh", "logistic", "floor", "ceil", "sign", "exponential", "log", "sqrt", "rsqrt"]
BINARY_F = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
BINARY_S = ["add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor"]
NPY = {"f32": "<f4", "s32": "<i4", "s8": "|i1", "pred": "|b1"}


def shape_str(dt, dims):
    return "%s[%s]" % (dt, ",".join(map(str, dims)))


class Gen:
    def __init__(self, rng, max_ops):
        self.rng = rng
        self.max_ops = max_ops
        self.lines = []
        self.values = []  # (name, dtype, dims, bounded: |v| <= 4 for floats)
        self.params = []  # (name, dtype, dims)
        self.regions = set()
        self.n = 0

    def name(self):
        self.n += 1
        return "v%d" % self.n

    def dim(self):
        return self.rng.choice([0, 1, 1, 2, 3, 4, 5, 8, 9, 16, 17])

    def dims(self, rank=None):
        if rank is None:
            rank = self.rng.choice([0, 1, 1, 2, 2, 2, 3, 4])
        return [self.dim() for _ in range(rank)]

    def emit(self, dt, dims, text, bounded=True):
        n = self.name()
        self.lines.append("  %s = %s %s" % (n, shape_str(dt, dims), text))
        self.values.append((n, dt, list(dims), bounded))
        return n

    def param(self, dt, dims):
        n = "p%d" % len(self.params)
        self.lines.append("  %s = %s parameter(%d)" % (n, shape_str(dt, dims), len(self.params)))
        self.params.append((n, dt, list(dims)))
        self.values.append((n, dt, list(dims), True))
        return n

    def scalar_const(self, dt, v):
        return self.emit(dt, [], "constant(%s)" % (repr(float(v)) if dt == "f32" else str(int(v))))

    def pick(self, dt=None, dims=None, bounded=False):
        c = [v for v in self.values if (dt is None or v[1] == dt) and (dims is None or v[2] == dims) and (not bounded or v[3])]
        return self.rng.choice(c) if c else None

    def operand(self, dt, dims):
        """A value of exactly this type: an existing one, a new parameter or a broadcast constant."""
        v = self.pick(dt, dims, bounded=True)
        r = self.rng.random()
        if v and r < 0.6:
            return v[0]
        if r < 0.8:
            return self.param(dt, dims)
        c = self.scalar_const(dt, self.rng.choice([-1.5, -0.5, 0.25, 1, 2]) if dt == "f32" else self.rng.randint(-3, 3))
        return self.emit(dt, dims, "broadcast(%s), dimensions={}" % c)

    def region(self, op, dt):
        name = "%s_%s" % (op, dt)
        if name not in self.regions:
            self.regions.add(name)
            self.region_text = getattr(self, "region_text", [])
            self.region_text.append("%s {\n  x = %s[] parameter(0)\n  y = %s[] parameter(1)\n  ROOT r = %s[] %s(x, y)\n}\n" %
                                    (name, dt, dt, dt, op))
        return name

    def step(self):
        rng = self.rng
        kind = rng.choice(["unary", "unary", "binary", "binary", "compare", "convert", "broadcast", "reshape",
                           "transpose", "slice", "concat", "pad", "reverse", "reduce", "dot", "dot", "iota", "clamp",
                           "reduce_window", "conv", "bf16", "gather", "scatter"])
        getattr(self, "op_" + kind)()

    def base(self, dt=None):
        v = self.pick(dt) if dt else self.rng.choice([v for v in self.values if v[1] in DTYPES] or [None])
        if v is None:
            d = dt or self.rng.choice(DTYPES)
            return (self.param(d, self.dims()), d, self.params[-1][2], True)
        return v

    def op_unary(self):
        n, dt, dims, bounded = self.base()
        if dt == "s32":
            self.emit(dt, dims, "%s(%s)" % (self.rng.choice(["negate", "abs", "not"]), n), bounded)
            return
        op = self.rng.choice(UNARY_F)
        x = n if bounded else self.emit(dt, dims, "tanh(%s)" % n)
        if op in ("log", "sqrt", "rsqrt"):  # a positive argument away from 0
            a = self.emit(dt, dims, "abs(%s)" % x)
            one = self.emit(dt, dims, "broadcast(%s), dimensions={}" % self.scalar_const(dt, 1))
            x = self.emit(dt, dims, "add(%s, %s)" % (a, one))
        self.emit(dt, dims, "%s(%s)" % (op, x), op != "exponential")

    def op_binary(self):
        n, dt, dims, bounded = self.base()
        m = self.operand(dt, dims)
        if dt == "s32":
            self.emit(dt, dims, "%s(%s, %s)" % (self.rng.choice(BINARY_S), n, m), True)
            return
        op = self.rng.choice(BINARY_F)
        if op == "divide":  # a divisor of at least 1 in magnitude
            a = self.emit(dt, dims, "abs(%s)" % m)
            one = self.emit(dt, dims, "broadcast(%s), dimensions={}" % self.scalar_const(dt, 1))
            m = self.emit(dt, dims, "add(%s, %s)" % (a, one))
        self.emit(dt, dims, "%s(%s, %s)" % (op, n, m), op in ("maximum", "minimum") and bounded)

    def op_compare(self):
        n, dt, dims, _ = self.base()
        m = self.operand(dt, dims)
        p = self.emit("pred", dims, "compare(%s, %s), direction=%s" % (n, m, self.rng.choice(["EQ", "NE", "LT", "LE", "GT", "GE"])))
        a = self.operand(dt, dims)
        self.emit(dt, dims, "select(%s, %s, %s)" % (p, n, a))

    def op_convert(self):
        n, dt, dims, bounded = self.base()
        to = "s32" if dt == "f32" else "f32"
        if dt == "f32" and not bounded:
            n = self.emit(dt, dims, "tanh(%s)" % n)
        self.emit(to, dims, "convert(%s)" % n)

    def op_broadcast(self):
        n, dt, dims, bounded = self.base()
        if len(dims) >= 4:
            return
        extra = self.dim()
        at = self.rng.randint(0, len(dims))
        out = dims[:at] + [extra] + dims[at:]
        mapping = [i if i < at else i + 1 for i in range(len(dims))]
        self.emit(dt, out, "broadcast(%s), dimensions={%s}" % (n, ",".join(map(str, mapping))), bounded)

    def op_reshape(self):
        n, dt, dims, bounded = self.base()
        total = 1
        for d in dims:
            total *= d
        if total == 0:
            out = [0] if self.rng.random() < 0.5 else [2, 0]
        else:
            out = [total] if self.rng.random() < 0.5 else ([1, total] if total > 1 else [])
            for f in (2, 3, 4):
                if total % f == 0 and total > f and self.rng.random() < 0.5:
                    out = [f, total // f]
        self.emit(dt, out, "reshape(%s)" % n, bounded)

    def op_transpose(self):
        n, dt, dims, bounded = self.base()
        perm = list(range(len(dims)))
        self.rng.shuffle(perm)
        self.emit(dt, [dims[p] for p in perm], "transpose(%s), dimensions={%s}" % (n, ",".join(map(str, perm))), bounded)

    def op_slice(self):
        n, dt, dims, bounded = self.base()
        parts, out = [], []
        for d in dims:
            lo = self.rng.randint(0, d)
            hi = self.rng.randint(lo, d)
            st = self.rng.choice([1, 1, 2, 3])
            parts.append("[%d:%d:%d]" % (lo, hi, st))
            out.append((hi - lo + st - 1) // st)
        self.emit(dt, out, "slice(%s), slice={%s}" % (n, ", ".join(parts)), bounded)

    def op_concat(self):
        n, dt, dims, bounded = self.base()
        if not dims:
            return
        ax = self.rng.randrange(len(dims))
        other = list(dims)
        other[ax] = self.dim()
        m = self.operand(dt, other)
        out = list(dims)
        out[ax] += other[ax]
        self.emit(dt, out, "concatenate(%s, %s), dimensions={%d}" % (n, m, ax), bounded)

    def op_pad(self):
        n, dt, dims, bounded = self.base()
        v = self.scalar_const(dt, 0.5 if dt == "f32" else 7)
        cfg, out = [], []
        for d in dims:
            lo, hi, it = self.rng.randint(-1, 2), self.rng.randint(-1, 2), self.rng.choice([0, 0, 1])
            size = d + max(d - 1, 0) * it
            lo, hi = max(lo, -size // 2), max(hi, -size // 2)
            out.append(size + lo + hi)
            cfg.append("%d_%d_%d" % (lo, hi, it))
        if not dims or any(o < 0 for o in out):
            return
        self.emit(dt, out, "pad(%s, %s), padding=%s" % (n, v, "x".join(cfg)), bounded)

    def op_reverse(self):
        n, dt, dims, bounded = self.base()
        if not dims:
            return
        ax = sorted(self.rng.sample(range(len(dims)), self.rng.randint(1, len(dims))))
        self.emit(dt, dims, "reverse(%s), dimensions={%s}" % (n, ",".join(map(str, ax))), bounded)

    def op_reduce(self):
        n, dt, dims, bounded = self.base()
        if not dims:
            return
        if dt == "f32" and not bounded:
            n = self.emit(dt, dims, "tanh(%s)" % n)
        op = self.rng.choice(["add", "maximum", "minimum"] + (["multiply"] if dt == "s32" else []))
        init = {"add": 0, "multiply": 1, "maximum": "-inf" if dt == "f32" else -(2**31), "minimum": "inf" if dt == "f32" else 2**31 - 1}[op]
        c = self.emit(dt, [], "constant(%s)" % init)
        ax = sorted(self.rng.sample(range(len(dims)), self.rng.randint(1, len(dims))))
        out = [d for i, d in enumerate(dims) if i not in ax]
        self.emit(dt, out, "reduce(%s, %s), dimensions={%s}, to_apply=%s" % (n, c, ",".join(map(str, ax)), self.region(op, dt)),
                  op != "add" and op != "multiply")

    def op_dot(self):
        rng = self.rng
        dt = rng.choice(["f32", "f32", "s8"])
        b, m, k, nn = [rng.choice([0, 1, 2, 5, 8, 9, 16, 33]) for _ in range(4)]
        batched = rng.random() < 0.3
        if dt == "s8":
            x, y = self.param("s8", ([b] if batched else []) + [m, k]), self.param("s8", ([b] if batched else []) + [k, nn])
            out_dt = "s32"
        else:
            x, y = self.operand("f32", ([b] if batched else []) + [m, k]), self.operand("f32", ([b] if batched else []) + [k, nn])
            out_dt = "f32"
        bd = "lhs_batch_dims={0}, rhs_batch_dims={0}, " if batched else ""
        c = 2 if batched else 1
        self.emit(out_dt, ([b] if batched else []) + [m, nn],
                  "dot(%s, %s), %slhs_contracting_dims={%d}, rhs_contracting_dims={%d}" % (x, y, bd, c, c - 1), False)

    def op_reduce_window(self):
        n, dt, dims, bounded = self.base("f32")
        if len(dims) != 2 and len(dims) != 4:
            return
        if not bounded:
            n = self.emit(dt, dims, "tanh(%s)" % n)
        rng = self.rng
        size = [rng.choice([1, 2, 3]) for _ in dims]
        stride = [rng.choice([1, 2]) for _ in dims]
        pad = [(rng.randint(0, 1), rng.randint(0, 1)) for _ in dims]
        out = []
        for d, w, st, (lo, hi) in zip(dims, size, stride, pad):
            span = d + lo + hi
            out.append(0 if span < w else (span - w) // st + 1)
        op = rng.choice(["add", "maximum"])
        c = self.emit(dt, [], "constant(%s)" % ("0" if op == "add" else "-inf"))
        win = "size=%s stride=%s pad=%s" % ("x".join(map(str, size)), "x".join(map(str, stride)),
                                            "x".join("%d_%d" % p for p in pad))
        self.emit(dt, out, "reduce-window(%s, %s), window={%s}, to_apply=%s" % (n, c, win, self.region(op, dt)), op == "maximum")

    def op_conv(self):
        rng = self.rng
        b, h, w, ci, co = rng.choice([0, 1, 2]), rng.choice([1, 3, 5, 8]), rng.choice([1, 4, 6]), rng.choice([0, 1, 3, 8]), rng.choice([1, 2, 9])
        kh, kw = rng.choice([1, 2, 3]), rng.choice([1, 3])
        x = self.operand("f32", [b, h, w, ci])
        k = self.operand("f32", [kh, kw, ci, co])
        ph, pw = rng.randint(0, kh - 1), rng.randint(0, kw - 1)
        oh, ow = h + 2 * ph - kh + 1, w + 2 * pw - kw + 1
        if oh < 0 or ow < 0:
            return
        self.emit("f32", [b, oh, ow, co], "convolution(%s, %s), window={size=%dx%d pad=%d_%dx%d_%d}, dim_labels=b01f_01io->b01f" %
                  (x, k, kh, kw, ph, ph, pw, pw), False)

    def op_bf16(self):
        n, dt, dims, bounded = self.base("f32")
        if not bounded:
            n = self.emit(dt, dims, "tanh(%s)" % n)
        h = self.emit("bf16", dims, "convert(%s)" % n)
        op = self.rng.choice(["add", "multiply", "maximum", "negate", "abs"])
        h = self.emit("bf16", dims, "%s(%s)" % (op, h) if op in ("negate", "abs") else "%s(%s, %s)" % (op, h, h))
        self.emit("f32", dims, "convert(%s)" % h, True)

    def indexed_operand(self):
        """An f32 operand of rank >= 1, the dimensions D to index (one, or
        two: x[i, j]; of at least one element) and the index batch G: what
        gather and scatter share."""
        n, _, dims, bounded = self.base("f32")
        if not dims or not any(dims):
            dims = [self.rng.choice([1, 2, 5, 9])] + self.dims(self.rng.randint(0, 2))
            n, bounded = self.operand("f32", dims), True
        nonzero = [k for k, x in enumerate(dims) if x > 0]
        dd = self.rng.sample(nonzero, 2 if len(nonzero) > 1 and self.rng.random() < 0.3 else 1)
        return n, dims, bounded, dd, self.dims(self.rng.randint(0, 2))

    def indices(self, g, dims, dd):
        """s32[G..., len(dd)] indices into dims[dd], some of them out of range."""
        lo, hi = self.scalar_const("s32", -1), self.scalar_const("s32", max(dims[d] for d in dd))
        shape = g + [len(dd)]
        return self.emit("s32", shape, "clamp(%s, %s, %s)" % (lo, self.param("s32", shape), hi))

    @staticmethod
    def ints(v):
        return "{%s}" % ",".join(map(str, v))

    def op_gather(self):
        n, dims, bounded, dd, g = self.indexed_operand()
        idx = self.indices(g, dims, dd)
        rest = [x for k, x in enumerate(dims) if k not in dd]
        sizes = [1 if k in dd else x for k, x in enumerate(dims)]
        self.emit("f32", g + rest, "gather(%s, %s), offset_dims=%s, collapsed_slice_dims=%s, start_index_map=%s, "
                  "index_vector_dim=%d, slice_sizes=%s" % (n, idx, self.ints(range(len(g), len(g) + len(rest))), self.ints(sorted(dd)),
                                                           self.ints(dd), len(g), self.ints(sizes)), bounded)

    def op_scatter(self):
        n, dims, bounded, dd, g = self.indexed_operand()
        idx = self.indices(g, dims, dd)
        rest = [x for k, x in enumerate(dims) if k not in dd]
        upd = self.operand("f32", g + rest)
        if self.rng.random() < 0.5:
            region = self.region("add", "f32")
        else:  # assignment: the region returns the update
            region = "set_f32"
            if region not in self.regions:
                self.regions.add(region)
                self.region_text = getattr(self, "region_text", [])
                self.region_text.append("set_f32 {\n  x = f32[] parameter(0)\n  ROOT y = f32[] parameter(1)\n}\n")
        self.emit("f32", dims, "scatter(%s, %s, %s), update_window_dims=%s, inserted_window_dims=%s, "
                  "scatter_dims_to_operand_dims=%s, index_vector_dim=%d, to_apply=%s" %
                  (n, idx, upd, self.ints(range(len(g), len(g) + len(rest))), self.ints(sorted(dd)), self.ints(dd), len(g), region),
                  False)

    def op_iota(self):
        dims = self.dims(self.rng.randint(1, 3))
        dt = self.rng.choice(DTYPES)
        self.emit(dt, dims, "iota(), iota_dimension=%d" % self.rng.randrange(len(dims)), dt == "s32" or max(dims) <= 4)

    def op_clamp(self):
        n, dt, dims, bounded = self.base()
        lo = self.scalar_const(dt, -1 if dt == "f32" else -2)
        hi = self.scalar_const(dt, 1 if dt == "f32" else 2)
        self.emit(dt, dims, "clamp(%s, %s, %s)" % (lo, n, hi), True)

    def program(self):
        while len(self.lines) < self.max_ops:
            self.step()
        # Results: the last value and up to three more (so little is dead
        # code); unbounded floats squashed.
        outs = [self.values[-1]]
        if len(self.values) > 3:
            outs += self.rng.sample(self.values[:-1], self.rng.randint(0, 3))
        names = []
        for n, dt, dims, bounded in outs:
            if dt == "pred" or dt == "s8":
                n = self.emit("s32", dims, "convert(%s)" % n)
                dt = "s32"
            elif dt == "f32" and not bounded:
                n = self.emit(dt, dims, "tanh(%s)" % n)
            names.append((n, dt, dims))
        if len(names) == 1:
            root = "  ROOT out = %s copy(%s)" % (shape_str(names[0][1], names[0][2]), names[0][0])
        else:
            root = "  ROOT out = (%s) tuple(%s)" % (", ".join(shape_str(d, s) for _, d, s in names), ", ".join(n for n, _, _ in names))
        regions = "\n".join(getattr(self, "region_text", []))
        return "HloModule random\n\n%s\nENTRY main {\n%s\n%s\n}\n" % (regions, "\n".join(self.lines), root)


def write_npy(path, dt, dims, rng):
    n = 1
    for d in dims:
        n *= d
    if dt == "f32":
        data = struct.pack("<%df" % n, *[rng.randint(-16, 16) / 8 for _ in range(n)])
    elif dt == "s32":
        data = struct.pack("<%di" % n, *[rng.randint(-20, 20) for _ in range(n)])
    else:
        data = struct.pack("<%db" % n, *[rng.randint(-128, 127) for _ in range(n)])
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (NPY[dt], repr(tuple(dims)))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def config(rng, presets_dir):
    """tiny, v5e or v4, with timing and memory parameters moved to legal
    extremes, or tiny with another array: 1x1 to 16x16, 1 to 4 MXUs, 1 or 2
    cores."""
    base = rng.choice(["tiny", "tiny", "v5e", "v4"])
    c = json.load(open(os.path.join(presets_dir, base + ".json")))
    if base == "tiny" and rng.random() < 0.3:
        n = rng.choice([1, 2, 3, 4, 5, 16])
        c["target"].update(mxu_dim=n, vpu_lanes=n, mxus_per_core=rng.randint(1, 4), cores=rng.choice([1, 2]))
    if rng.random() < 0.5:
        c["core"]["queue_depth"] = rng.choice([1, 2, 64])
        c["core"]["issue_width"] = rng.choice([1, 2, 8])
        c["core"]["branch_penalty"] = rng.choice([0, 7])
        c["dma"]["max_outstanding"] = rng.choice([1, 2, 64])
        c["dma"]["burst_bytes"] = rng.choice([1, 32, 4096])
        c["hbm"]["simple"]["latency_ns"] = rng.choice([0, 1, 2000])
        c["hbm"]["simple"]["bandwidth_bytes_per_s"] = rng.choice([1000000000, 10**13])
        for k in c["vpu"]["latency"]:
            c["vpu"]["latency"][k] = rng.choice([1, 2, 31])
        c["target"]["acc_rows"] = rng.choice([2, 3, 64, c["target"]["acc_rows"]])
    return base, c


def main():
    seed = int(sys.argv[1])
    out = sys.argv[2]
    ops = int(sys.argv[sys.argv.index("--ops") + 1]) if "--ops" in sys.argv else None
    rng = random.Random(seed)
    g = Gen(rng, ops or rng.choice([3, 6, 10, 20, 40]))
    text = g.program()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "module.hlo"), "w") as f:
        f.write(text)
    for i, (_, dt, dims) in enumerate(g.params):
        write_npy(os.path.join(out, "arg%d.npy" % i), dt, dims, rng)
    base, c = config(rng, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=1)


if __name__ == "__main__":
    main()
