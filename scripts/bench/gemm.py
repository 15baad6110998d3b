#!/usr/bin/env python3
"""Writes a bf16 GEMM as XLA HLO (what jax.jit(jnp.dot).lower() gives, with
preferred_element_type f32) and random inputs in [-2, 2) as .npy, using only
the standard library: gemm.py M K N DIR."""
import os, struct, sys

def npy(path, shape, data):
    h = "{'descr': '<u2', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}," for d in shape)
    h = h.ljust(64 * ((len(h) + 11) // 64 + 1) - 11) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)

def random_bf16(n):
    # high byte: sign and exponent 120..127 (magnitudes 2^-7 .. 2); low byte: anything
    table = bytes((b & 0x80) | (60 + (b & 3)) for b in range(256))
    out = bytearray(2 * n)
    out[0::2] = os.urandom(n)
    out[1::2] = os.urandom(n).translate(table)
    return bytes(out)

m, k, n, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.makedirs(d, exist_ok=True)
with open(f"{d}/module.hlo", "w") as f:
    f.write(f"""HloModule jit_gemm

ENTRY main {{
  a = bf16[{m},{k}]{{1,0}} parameter(0)
  b = bf16[{k},{n}]{{1,0}} parameter(1)
  ROOT dot = f32[{m},{n}]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
""")
npy(f"{d}/a.npy", (m, k), random_bf16(m * k))
npy(f"{d}/b.npy", (k, n), random_bf16(k * n))
