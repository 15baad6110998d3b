#!/usr/bin/env python3
"""Writes the traces of reference_mixed.json: 40,000 requests each that mix
reads and writes, in DRAMsim3's trace format (`0xADDRESS READ|WRITE CYCLE`,
64-byte requests). Random addresses come from a fixed 64-bit LCG, so every
Python writes the same bytes.

  copy          a DMA copy: a read of a source stream, a write of a
                destination stream, one request a cycle
  write_heavy   three writes of one stream to every read of another, one
                request a cycle
  rw_random     random 64-byte blocks of 1 GiB, a third of them written, one
                request every two cycles
  rmw           read-modify-write of random blocks of 64 MiB: each block is
                written back 12 reads after it was read (some reads then
                hit the write buffer), one request a cycle

usage: mixed_traces.py OUTDIR"""
import os
import sys

N = 40000


class Lcg:
    """Knuth's MMIX LCG; below(n) takes the high bits."""

    def __init__(self, seed):
        self.x = seed

    def below(self, n):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.x >> 32) % n


def copy():
    return [(i // 2 * 64 + (0x20000000 if i % 2 else 0), i % 2 == 1, i) for i in range(N)]


def write_heavy():
    out = []
    for i in range(N):
        w = i % 4 != 0
        out.append(((0x10000000 + i * 3 // 4 * 64) if w else i // 4 * 64, w, i))
    return out


def rw_random():
    g = Lcg(7)
    return [(g.below(1 << 24) * 64, g.below(3) == 0, 2 * i) for i in range(N)]


def rmw():
    g = Lcg(11)
    blocks = [g.below(1 << 20) * 64 for _ in range(N // 2)]
    seq = []
    for i, b in enumerate(blocks):
        seq.append((b, False))
        if i >= 12:
            seq.append((blocks[i - 12], True))
    seq += [(b, True) for b in blocks[-12:]]
    return [(a, w, c) for c, (a, w) in enumerate(seq)]


TRACES = {"copy": copy, "write_heavy": write_heavy, "rw_random": rw_random, "rmw": rmw}


def write(outdir):
    """Writes every trace as OUTDIR/NAME.trace."""
    os.makedirs(outdir, exist_ok=True)
    for name, make in TRACES.items():
        with open(os.path.join(outdir, name + ".trace"), "w") as f:
            for a, w, c in make():
                f.write(f"0x{a:x} {'WRITE' if w else 'READ'} {c}\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write(sys.argv[1])
