#!/usr/bin/env python3
"""Writes the programs of tpuc's scale benchmark (scripts/bench-scale.sh) as
XLA HLO text, the way JAX prints them, using only the standard library:

  scale.py NAME DIR [--inputs]

writes DIR/module.hlo and, with --inputs, the while loops' inputs as
DIR/in0.npy, in1.npy, ... (f32 values in [-1, 1) from a fixed seed; the
fori_loop's w and the scan's ws scaled by 1/16 so that tanh does not
saturate)

  dot_f32_1024      f32[1024,1024] @ f32[1024,1024]
  chain24           24 chained f32[1024,1024] dots, each followed by tanh
                    (one weight; 96 MiB of intermediates)
  ffn12             12 bf16 FFN layers, 4096 tokens, d = 768 -> 3072 -> 768
                    (gelu-free: dot, relu, dot, residual add)
  ffn12_scan        the same layers as lax.scan over stacked weights
  gpt2_scan         12 GPT-2 transformer layers (1024 tokens, d = 768, 12
                    heads, 4d FFN with GELU) as lax.scan over stacked weights
  scan12            lax.scan of 12 layers over stacked f32[128,128]
                    weights: h = tanh(h @ ws[i])
  fori1000, fori5000, fori20000
                    a fori_loop of N trips over a 128x128 f32 dot with tanh
  while_data        lax.while_loop whose predicate is a tensor: doubles
                    x until its sum exceeds a bound
  attn12, attn48    attention of 12 or 48 heads, 1024 tokens, 64 a head
                    (bf16 q, k, v: batched QK^T, softmax in f32, PV)
"""
import os
import random
import struct
import sys


def dot_f32_1024():
    return """HloModule jit_dot

ENTRY main {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  ROOT d = f32[1024,1024]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def chain24():
    body = ["  x0 = f32[1024,1024]{1,0} parameter(0)", "  w = f32[1024,1024]{1,0} parameter(1)"]
    for i in range(24):
        body.append(f"  d{i} = f32[1024,1024]{{1,0}} dot(x{i}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
        body.append(f"  {'ROOT ' if i == 23 else ''}x{i + 1} = f32[1024,1024]{{1,0}} tanh(d{i})")
    return "HloModule jit_chain\n\nENTRY main {\n" + "\n".join(body) + "\n}\n"


def ffn12(layers=12, t=4096, d=768, h=3072):
    body = [f"  x0 = bf16[{t},{d}]{{1,0}} parameter(0)"]
    for i in range(layers):
        body.append(f"  w1_{i} = bf16[{d},{h}]{{1,0}} parameter({2 * i + 1})")
        body.append(f"  w2_{i} = bf16[{h},{d}]{{1,0}} parameter({2 * i + 2})")
    body.append("  zero = f32[] constant(0)")
    body.append(f"  zeros = f32[{t},{h}]{{1,0}} broadcast(zero), dimensions={{}}")
    for i in range(layers):
        body += [
            f"  a{i} = f32[{t},{h}]{{1,0}} dot(x{i}, w1_{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
            f"  r{i} = f32[{t},{h}]{{1,0}} maximum(a{i}, zeros)",
            f"  rb{i} = bf16[{t},{h}]{{1,0}} convert(r{i})",
            f"  o{i} = f32[{t},{d}]{{1,0}} dot(rb{i}, w2_{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
            f"  xf{i} = f32[{t},{d}]{{1,0}} convert(x{i})",
            f"  s{i} = f32[{t},{d}]{{1,0}} add(o{i}, xf{i})",
            f"  {'ROOT ' if i == layers - 1 else ''}x{i + 1} = bf16[{t},{d}]{{1,0}} convert(s{i})",
        ]
    return "HloModule jit_ffn\n\nENTRY main {\n" + "\n".join(body) + "\n}\n"


def counted_loop(module, trips, carried, body, out, extra=""):
    """A while loop of `trips` trips as JAX prints a fori_loop or a scan:
    its state is an s32 counter and `carried` [(name, type)], which are
    also the ENTRY's parameters in order; `body` the lines computing the
    next state [names in the order of carried]; the result is carried
    element `out`. `extra`: computations the body calls (reductions)."""
    lines, nexts = body
    s = "(s32[], " + ", ".join(t for _, t in carried) + ")"
    state = "".join(f"  {n} = {t} get-tuple-element(p), index={k + 1}\n" for k, (n, t) in enumerate(carried))
    steps = "".join(f"  {line}\n" for line in lines)
    params = "".join(f"  {n} = {t} parameter({k})\n" for k, (n, t) in enumerate(carried))
    return f"""HloModule {module}

{extra}body {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
{state}{steps}  one_trip = s32[] constant(1)
  i_next = s32[] add(i, one_trip)
  ROOT next = {s} tuple(i_next, {", ".join(nexts)})
}}

cond {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({trips})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

ENTRY main {{
{params}  zero = s32[] constant(0)
  init = {s} tuple(zero, {", ".join(n for n, _ in carried)})
  loop = {s} while(init), condition=cond, body=body
  ROOT out = {carried[out][1]} get-tuple-element(loop), index={out + 1}
}}
"""


def ffn_scan(layers=12, t=4096, d=768, h=3072):
    """ffn12's layers as lax.scan over stacked weights: layer i reads
    w1s[i] and w2s[i] by dynamic-slice (the index normalised as JAX does)."""
    carried = [("x", f"bf16[{t},{d}]{{1,0}}"), ("w1s", f"bf16[{layers},{d},{h}]{{2,1,0}}"), ("w2s", f"bf16[{layers},{h},{d}]{{2,1,0}}")]
    lines = [
        "zero = s32[] constant(0)", f"l = s32[] constant({layers})", "neg = pred[] compare(i, zero), direction=LT",
        "wrap = s32[] add(i, l)", "j = s32[] select(neg, wrap, i)",
        f"w1s_j = bf16[1,{d},{h}]{{2,1,0}} dynamic-slice(w1s, j, zero, zero), dynamic_slice_sizes={{1,{d},{h}}}",
        f"w1 = bf16[{d},{h}]{{1,0}} reshape(w1s_j)",
        f"w2s_j = bf16[1,{h},{d}]{{2,1,0}} dynamic-slice(w2s, j, zero, zero), dynamic_slice_sizes={{1,{h},{d}}}",
        f"w2 = bf16[{h},{d}]{{1,0}} reshape(w2s_j)",
        f"a = f32[{t},{h}]{{1,0}} dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
        "fz = f32[] constant(0)", f"zeros = f32[{t},{h}]{{1,0}} broadcast(fz), dimensions={{}}",
        f"r = f32[{t},{h}]{{1,0}} maximum(a, zeros)", f"rb = bf16[{t},{h}]{{1,0}} convert(r)",
        f"o = f32[{t},{d}]{{1,0}} dot(rb, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
        f"xf = f32[{t},{d}]{{1,0}} convert(x)", f"sum = f32[{t},{d}]{{1,0}} add(o, xf)", f"y = bf16[{t},{d}]{{1,0}} convert(sum)",
    ]
    return counted_loop("jit_ffn_scan", layers, carried, (lines, ["y", "w1s", "w2s"]), 0)


def gpt2_scan(layers=12, t=1024, d=768, heads=12):
    """GPT-2-sized transformer layers as lax.scan over stacked weights:
    layernorm, fused QKV projection, multi-head softmax attention (no mask),
    output projection, residual, layernorm, a 4d FFN with the tanh GELU,
    residual. bf16 matmuls with f32 results, f32 elsewhere."""
    dh, f = d // heads, 4 * d
    stacked = [("wqkv", d, 3 * d), ("wo", d, d), ("w1", d, f), ("w2", f, d)]
    carried = [("x", f"f32[{t},{d}]{{1,0}}")] + [(f"{n}s", f"bf16[{layers},{r},{c}]{{2,1,0}}") for n, r, c in stacked]
    lines = []
    lines += ["zero = s32[] constant(0)", "fzero = f32[] constant(0)", "ninf = f32[] constant(-inf)"]
    for name, rows, cols in stacked:
        lines += [f"{name}_3 = bf16[1,{rows},{cols}]{{2,1,0}} dynamic-slice({name}s, i, zero, zero), dynamic_slice_sizes={{1,{rows},{cols}}}",
                  f"{name} = bf16[{rows},{cols}]{{1,0}} reshape({name}_3)"]

    def splat(name, v, dims):
        shape = ",".join(str(x) for x in dims)
        layout = ",".join(str(k) for k in reversed(range(len(dims))))
        lines.extend([f"{name}_0 = f32[] constant({v})", f"{name} = f32[{shape}]{{{layout}}} broadcast({name}_0), dimensions={{}}"])

    def layernorm(x, out):
        splat(f"{out}_invd", 1 / d, [t])
        splat(f"{out}_eps", 1e-5, [t])
        lines.extend([
            f"{out}_sum = f32[{t}]{{0}} reduce({x}, fzero), dimensions={{1}}, to_apply=add",
            f"{out}_mean = f32[{t}]{{0}} multiply({out}_sum, {out}_invd)",
            f"{out}_meanb = f32[{t},{d}]{{1,0}} broadcast({out}_mean), dimensions={{0}}",
            f"{out}_c = f32[{t},{d}]{{1,0}} subtract({x}, {out}_meanb)",
            f"{out}_sq = f32[{t},{d}]{{1,0}} multiply({out}_c, {out}_c)",
            f"{out}_ssum = f32[{t}]{{0}} reduce({out}_sq, fzero), dimensions={{1}}, to_apply=add",
            f"{out}_var = f32[{t}]{{0}} multiply({out}_ssum, {out}_invd)",
            f"{out}_vare = f32[{t}]{{0}} add({out}_var, {out}_eps)",
            f"{out}_r = f32[{t}]{{0}} rsqrt({out}_vare)",
            f"{out}_rb = f32[{t},{d}]{{1,0}} broadcast({out}_r), dimensions={{0}}",
            f"{out}_n = f32[{t},{d}]{{1,0}} multiply({out}_c, {out}_rb)",
            f"{out} = bf16[{t},{d}]{{1,0}} convert({out}_n)"])

    layernorm("x", "h1")
    lines += [f"qkv = f32[{t},{3 * d}]{{1,0}} dot(h1, wqkv), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
              f"qkvb = bf16[{t},{3 * d}]{{1,0}} convert(qkv)"]
    for n, name in enumerate("qkv"):
        lines += [f"{name}_s = bf16[{t},{d}]{{1,0}} slice(qkvb), slice={{[0:{t}], [{n * d}:{(n + 1) * d}]}}",
                  f"{name}_r = bf16[{t},{heads},{dh}]{{2,1,0}} reshape({name}_s)",
                  f"{name}h = bf16[{heads},{t},{dh}]{{2,1,0}} transpose({name}_r), dimensions={{1,0,2}}"]
    hs = f"{heads},{t},{t}]{{2,1,0}}"
    splat("scale", dh ** -0.5, [heads, t, t])
    lines += [f"sc = f32[{hs} dot(qh, kh), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}",
              f"ss = f32[{hs} multiply(sc, scale)",
              f"m = f32[{heads},{t}]{{1,0}} reduce(ss, ninf), dimensions={{2}}, to_apply=max",
              f"mb = f32[{hs} broadcast(m), dimensions={{0,1}}",
              f"sd = f32[{hs} subtract(ss, mb)", f"e = f32[{hs} exponential(sd)",
              f"z = f32[{heads},{t}]{{1,0}} reduce(e, fzero), dimensions={{2}}, to_apply=add",
              f"zb = f32[{hs} broadcast(z), dimensions={{0,1}}",
              f"pr = f32[{hs} divide(e, zb)", f"pb = bf16[{hs} convert(pr)",
              f"o = f32[{heads},{t},{dh}]{{2,1,0}} dot(pb, vh), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}",
              f"ot = f32[{t},{heads},{dh}]{{2,1,0}} transpose(o), dimensions={{1,0,2}}",
              f"or = f32[{t},{d}]{{1,0}} reshape(ot)", f"ob = bf16[{t},{d}]{{1,0}} convert(or)",
              f"a = f32[{t},{d}]{{1,0}} dot(ob, wo), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
              f"x1 = f32[{t},{d}]{{1,0}} add(x, a)"]
    layernorm("x1", "h2")
    for name, v in (("c0", 0.044715), ("c1", 0.7978845608), ("half", 0.5), ("one", 1.0)):
        splat(name, v, [t, f])
    ff = f"f32[{t},{f}]{{1,0}}"
    lines += [f"u = {ff} dot(h2, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
              f"u2 = {ff} multiply(u, u)", f"u3 = {ff} multiply(u2, u)", f"u3c = {ff} multiply(u3, c0)",
              f"inner = {ff} add(u, u3c)", f"innerc = {ff} multiply(inner, c1)", f"th = {ff} tanh(innerc)",
              f"th1 = {ff} add(th, one)", f"uh = {ff} multiply(u, half)", f"gl = {ff} multiply(uh, th1)",
              f"glb = bf16[{t},{f}]{{1,0}} convert(gl)",
              f"y = f32[{t},{d}]{{1,0}} dot(glb, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
              f"x2 = f32[{t},{d}]{{1,0}} add(x1, y)"]
    return counted_loop("jit_gpt2_scan", layers, carried, (lines, ["x2"] + [n for n, _ in carried[1:]]), 0,
                        combiner("add", "add") + "\n" + combiner("max", "maximum") + "\n")


def tanh_loop(trips, stacked):
    """h = tanh(h @ w) for `trips` trips: a fori_loop over one weight, or
    (stacked) a scan over stacked weights that reads ws[i] in trip i."""
    if not stacked:
        carried = [("x", "f32[128,128]{1,0}"), ("w", "f32[128,128]{1,0}")]
        return counted_loop("jit_fori", trips, carried, ([
            "d = f32[128,128]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
            "t = f32[128,128]{1,0} tanh(d)"], ["t", "w"]), 0)
    carried = [("h", "f32[128,128]{1,0}"), ("ws", f"f32[{trips},128,128]{{2,1,0}}")]
    return counted_loop("jit_scan", trips, carried, ([
        "zero = s32[] constant(0)",
        "w3 = f32[1,128,128]{2,1,0} dynamic-slice(ws, i, zero, zero), dynamic_slice_sizes={1,128,128}",
        "w = f32[128,128]{1,0} reshape(w3)",
        "d = f32[128,128]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "t = f32[128,128]{1,0} tanh(d)"], ["t", "ws"]), 0)


def combiner(name, op):
    """An f32 reduction's computation, as JAX prints it."""
    return f"""{name} {{
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] {op}(x, y)
}}
"""


def while_data():
    s = "(f32[128,128]{1,0})"
    return f"""HloModule jit_while

{combiner("add", "add")}
body {{
  p = {s} parameter(0)
  x = f32[128,128]{{1,0}} get-tuple-element(p), index=0
  two = f32[] constant(2)
  twos = f32[128,128]{{1,0}} broadcast(two), dimensions={{}}
  y = f32[128,128]{{1,0}} multiply(x, twos)
  ROOT r = {s} tuple(y)
}}

cond {{
  p = {s} parameter(0)
  x = f32[128,128]{{1,0}} get-tuple-element(p), index=0
  zero = f32[] constant(0)
  total = f32[] reduce(x, zero), dimensions={{0,1}}, to_apply=add
  bound = f32[] constant(1e6)
  ROOT lt = pred[] compare(total, bound), direction=LT
}}

ENTRY main {{
  x = f32[128,128]{{1,0}} parameter(0)
  init = {s} tuple(x)
  loop = {s} while(init), condition=cond, body=body
  ROOT out = f32[128,128]{{1,0}} get-tuple-element(loop), index=0
}}
"""


def attention(heads, t=1024, dh=64):
    return f"""HloModule jit_attention

{combiner("max", "maximum")}
{combiner("add", "add")}
ENTRY main {{
  q = bf16[{heads},{t},{dh}]{{2,1,0}} parameter(0)
  k = bf16[{heads},{t},{dh}]{{2,1,0}} parameter(1)
  v = bf16[{heads},{t},{dh}]{{2,1,0}} parameter(2)
  s = f32[{heads},{t},{t}]{{2,1,0}} dot(q, k), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
  ninf = f32[] constant(-inf)
  m = f32[{heads},{t}]{{1,0}} reduce(s, ninf), dimensions={{2}}, to_apply=max
  mb = f32[{heads},{t},{t}]{{2,1,0}} broadcast(m), dimensions={{0,1}}
  d = f32[{heads},{t},{t}]{{2,1,0}} subtract(s, mb)
  e = f32[{heads},{t},{t}]{{2,1,0}} exponential(d)
  zero = f32[] constant(0)
  z = f32[{heads},{t}]{{1,0}} reduce(e, zero), dimensions={{2}}, to_apply=add
  zb = f32[{heads},{t},{t}]{{2,1,0}} broadcast(z), dimensions={{0,1}}
  pf = f32[{heads},{t},{t}]{{2,1,0}} divide(e, zb)
  p = bf16[{heads},{t},{t}]{{2,1,0}} convert(pf)
  ROOT o = f32[{heads},{t},{dh}]{{2,1,0}} dot(p, v), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}
}}
"""


def write_npy(path, shape, values):
    h = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}," for d in shape)
    h = h.ljust(64 * ((len(h) + 11) // 64 + 1) - 11) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack(f"<{len(values)}f", *values))


# The while loops' inputs: (shape, scale) per parameter.
INPUTS = {
    "fori": [((128, 128), 1.0), ((128, 128), 1 / 16)],
    "scan": [((128, 128), 1.0), ((12, 128, 128), 1 / 16)],
    "while_data": [((128, 128), 1.0)],
}


def write_inputs(name, d):
    rng = random.Random(2026)
    key = name.rstrip("0123456789")
    if key not in INPUTS:
        sys.exit(f"scale.py: no inputs for {name}")
    for i, (shape, scale) in enumerate(INPUTS[key]):
        n = 1
        for x in shape:
            n *= x
        write_npy(os.path.join(d, f"in{i}.npy"), shape, [rng.uniform(-1, 1) * scale for _ in range(n)])


PROGRAMS = {
    "dot_f32_1024": dot_f32_1024,
    "chain24": chain24,
    "ffn12": ffn12,
    "ffn12_scan": ffn_scan,
    "scan12": lambda: tanh_loop(12, True),
    "gpt2_scan": gpt2_scan,
    "fori1000": lambda: tanh_loop(1000, False),
    "fori5000": lambda: tanh_loop(5000, False),
    "fori20000": lambda: tanh_loop(20000, False),
    "while_data": while_data,
    "attn12": lambda: attention(12),
    "attn48": lambda: attention(48),
}

if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in PROGRAMS or sys.argv[3:] not in ([], ["--inputs"]):
        sys.exit(f"usage: scale.py {{{'|'.join(PROGRAMS)}}} DIR [--inputs]")
    os.makedirs(sys.argv[2], exist_ok=True)
    with open(os.path.join(sys.argv[2], "module.hlo"), "w") as f:
        f.write(PROGRAMS[sys.argv[1]]())
    if sys.argv[3:]:
        write_inputs(sys.argv[1], sys.argv[2])
