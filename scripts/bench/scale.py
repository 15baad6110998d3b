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


def ffn_scan(layers=12, t=4096, d=768, h=3072):
    """ffn12's layers as lax.scan over stacked weights: layer i reads
    w1s[i] and w2s[i] by dynamic-slice, as JAX writes a scanned model."""
    s = f"(s32[], bf16[{t},{d}]{{1,0}}, bf16[{layers},{d},{h}]{{2,1,0}}, bf16[{layers},{h},{d}]{{2,1,0}})"
    return f"""HloModule jit_ffn_scan

body {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = bf16[{t},{d}]{{1,0}} get-tuple-element(p), index=1
  w1s = bf16[{layers},{d},{h}]{{2,1,0}} get-tuple-element(p), index=2
  w2s = bf16[{layers},{h},{d}]{{2,1,0}} get-tuple-element(p), index=3
  zero = s32[] constant(0)
  l = s32[] constant({layers})
  neg = pred[] compare(i, zero), direction=LT
  wrap = s32[] add(i, l)
  j = s32[] select(neg, wrap, i)
  w1s_j = bf16[1,{d},{h}]{{2,1,0}} dynamic-slice(w1s, j, zero, zero), dynamic_slice_sizes={{1,{d},{h}}}
  w1 = bf16[{d},{h}]{{1,0}} reshape(w1s_j)
  w2s_j = bf16[1,{h},{d}]{{2,1,0}} dynamic-slice(w2s, j, zero, zero), dynamic_slice_sizes={{1,{h},{d}}}
  w2 = bf16[{h},{d}]{{1,0}} reshape(w2s_j)
  a = f32[{t},{h}]{{1,0}} dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  fz = f32[] constant(0)
  zeros = f32[{t},{h}]{{1,0}} broadcast(fz), dimensions={{}}
  r = f32[{t},{h}]{{1,0}} maximum(a, zeros)
  rb = bf16[{t},{h}]{{1,0}} convert(r)
  o = f32[{t},{d}]{{1,0}} dot(rb, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  xf = f32[{t},{d}]{{1,0}} convert(x)
  sum = f32[{t},{d}]{{1,0}} add(o, xf)
  y = bf16[{t},{d}]{{1,0}} convert(sum)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT next = {s} tuple(i2, y, w1s, w2s)
}}

cond {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({layers})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

ENTRY main {{
  x = bf16[{t},{d}]{{1,0}} parameter(0)
  w1s = bf16[{layers},{d},{h}]{{2,1,0}} parameter(1)
  w2s = bf16[{layers},{h},{d}]{{2,1,0}} parameter(2)
  zero = s32[] constant(0)
  init = {s} tuple(zero, x, w1s, w2s)
  loop = {s} while(init), condition=cond, body=body
  ROOT out = bf16[{t},{d}]{{1,0}} get-tuple-element(loop), index=1
}}
"""


def scan(layers):
    """lax.scan over stacked f32 weights: h = tanh(h @ ws[i]), i < layers."""
    s = f"(s32[], f32[128,128]{{1,0}}, f32[{layers},128,128]{{2,1,0}})"
    return f"""HloModule jit_scan

body {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  h = f32[128,128]{{1,0}} get-tuple-element(p), index=1
  ws = f32[{layers},128,128]{{2,1,0}} get-tuple-element(p), index=2
  zero = s32[] constant(0)
  w3 = f32[1,128,128]{{2,1,0}} dynamic-slice(ws, i, zero, zero), dynamic_slice_sizes={{1,128,128}}
  w = f32[128,128]{{1,0}} reshape(w3)
  d = f32[128,128]{{1,0}} dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[128,128]{{1,0}} tanh(d)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT r = {s} tuple(i2, t, ws)
}}

cond {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({layers})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

ENTRY main {{
  h = f32[128,128]{{1,0}} parameter(0)
  ws = f32[{layers},128,128]{{2,1,0}} parameter(1)
  zero = s32[] constant(0)
  init = {s} tuple(zero, h, ws)
  loop = {s} while(init), condition=cond, body=body
  ROOT out = f32[128,128]{{1,0}} get-tuple-element(loop), index=1
}}
"""


def fori(n):
    s = "(s32[], f32[128,128]{1,0}, f32[128,128]{1,0})"
    return f"""HloModule jit_fori

body {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[128,128]{{1,0}} get-tuple-element(p), index=1
  w = f32[128,128]{{1,0}} get-tuple-element(p), index=2
  d = f32[128,128]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[128,128]{{1,0}} tanh(d)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT r = {s} tuple(i2, t, w)
}}

cond {{
  p = {s} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({n})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

ENTRY main {{
  x = f32[128,128]{{1,0}} parameter(0)
  w = f32[128,128]{{1,0}} parameter(1)
  zero = s32[] constant(0)
  init = {s} tuple(zero, x, w)
  loop = {s} while(init), condition=cond, body=body
  ROOT out = f32[128,128]{{1,0}} get-tuple-element(loop), index=1
}}
"""


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
    "scan12": lambda: scan(12),
    "fori1000": lambda: fori(1000),
    "fori5000": lambda: fori(5000),
    "fori20000": lambda: fori(20000),
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
