"""Device probe of GQA packing on short query lengths (decode-like and prefill-tail shapes), which the
32 workloads do not cover. VLATTN_ATTN_PACK is read once per process: run this once per setting.

    VLATTN_ATTN_PACK=0 python3 bench/probe_pack.py [--iters 20]
    VLATTN_ATTN_PACK=2 python3 bench/probe_pack.py [--iters 20]

Prints one line per shape: µs (cold L2, median of --iters) of vlattn.attention, and the units each
setting launches (one query head per 128-row tile, or the G heads of a KV head in one tile).
"""
import argparse
import math
import os
import statistics

import torch

from vlattn.attention import attention
from vlattn.bench import CudaTimer

# (B, Hq, Hkv, Sq, Sk, causal): 007-like G = 7 and 034-like G = 4 heads.
SHAPES = [(1, 28, 4, 1, 4096, False), (1, 28, 4, 16, 4096, True), (8, 28, 4, 1, 1024, False),
          (4, 28, 4, 64, 2048, True), (1, 32, 8, 1, 12544, False), (4, 32, 8, 32, 784, False),
          (1, 32, 8, 541, 980, False), (4, 32, 8, 541, 980, False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    timer = CudaTimer(torch.device("cuda"))
    print(f"VLATTN_ATTN_PACK={os.environ.get('VLATTN_ATTN_PACK', '')!r}")
    print(f"{'B':>3s} {'Hq':>3s} {'Hkv':>3s} {'Sq':>5s} {'Sk':>6s} {'causal':>6s} {'units':>7s} {'packed':>7s} {'us':>8s}")
    for b, hq, hkv, sq, sk, causal in SHAPES:
        q = torch.randn(b, hq, sq, 128, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, hkv, sk, 128, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, hkv, sk, 128, dtype=torch.bfloat16, device="cuda")
        g = hq // hkv
        units = b * hq * math.ceil(sq / 128)
        packed = b * hkv * math.ceil(sq / (128 // g))
        us = statistics.median(timer(lambda: attention(q, k, v, causal=causal), args.iters, 3))
        print(f"{b:3d} {hq:3d} {hkv:3d} {sq:5d} {sk:6d} {str(causal):>6s} {units:7d} {packed:7d} {us:8.1f}", flush=True)


if __name__ == "__main__":
    main()
