#!/usr/bin/env python3
"""Writes a shard_map psum over N devices as XLA HLO (what JAX 0.11 prints
through Shardy for jax.shard_map(lambda x: jax.lax.psum(x * x, 'i'), mesh,
P('i'), P('i'))) and a random f32 input as .npy, using only the standard
library: psum.py N ROWS COLS DIR. Each device squares its ROWS x COLS tile and
the devices add theirs."""
import os, struct, sys

n, rows, cols, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.makedirs(d, exist_ok=True)
g, l = f"f32[{n * rows},{cols}]{{1,0}}", f"f32[{rows},{cols}]{{1,0}}"
shard = '#sdy.sharding_per_value<[<@mesh, [{\\"i\\"}, {}]>]>'
with open(f"{d}/module.hlo", "w") as f:
    f.write(f"""HloModule jit_psum, frontend_attributes={{xla.sdy.meshes={{mesh = #sdy.mesh<["i"={n}]>}}}}

add.1 {{
  a.1 = f32[] parameter(0)
  b.1 = f32[] parameter(1)
  ROOT s.1 = f32[] add(a.1, b.1)
}}

xla.sdy.manual_computation_body.2 {{
  x.2 = {l} parameter(0)
  m.2 = {l} multiply(x.2, x.2)
  ROOT r.2 = {l} all-reduce(m.2), channel_id=1, replica_groups=mesh['i'={n}] {{'i'}}, use_global_device_ids=true, to_apply=add.1
}}

ENTRY main.3 {{
  x.3 = {g} parameter(0), sharding={{devices=[{n},1]<=[{n}]}}
  l.3 = ({l}) custom-call(x.3), custom_call_target="xla.sdy.GlobalToLocalShape", frontend_attributes={{xla.sdy.in_shardings="{shard}"}}
  e.3 = {l} get-tuple-element(l.3), index=0
  c.3 = {l} call(e.3), to_apply=xla.sdy.manual_computation_body.2
  ROOT o.3 = {g} custom-call(c.3), custom_call_target="xla.sdy.LocalToGlobalShape", frontend_attributes={{xla.sdy.out_shardings="{shard}"}}
}}
""")
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n * rows, cols)
h = h.ljust(64 * ((len(h) + 11) // 64 + 1) - 11) + "\n"
data = struct.pack(f"<{n * rows * cols}f", *[((i * 2654435761) % 2001 - 1000) / 256 for i in range(n * rows * cols)])
with open(f"{d}/arg0.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
