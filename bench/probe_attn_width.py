"""Device probe of the attention's key-tile width (VLATTN_ATTN_BN, read once per process): run it once
per setting, alternating, with bench/ab_env.sh:

    bash bench/ab_env.sh VLATTN_ATTN_BN "128 176" 2 python3 bench/probe_attn_width.py --iters 20

Times vlattn.attention alone (cold L2, median of --iters, the bench's CudaTimer) on the 16 attention
shapes of 034 (no mask, not causal: where 176-key tiles are allowed) plus a few key lengths around
the tile widths, and prints µs and full-matrix TFLOP/s per shape and the sum over the 034 shapes.
"""
import argparse
import os
import statistics

import torch

from vlattn import workloads as W
from vlattn.attention import attention
from vlattn.bench import CudaTimer

EXTRA = [(4, 32, 8, 1024, 176), (4, 32, 8, 1024, 352), (4, 32, 8, 1024, 353), (4, 28, 4, 2048, 2048)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    timer = CudaTimer(torch.device("cuda"))
    shapes = sorted({(w.batch, 32, 8, w.q_len, w.kv_len) for w in W.load("034")}, key=lambda s: s[0] * s[3] * s[4])
    print(f"VLATTN_ATTN_BN={os.environ.get('VLATTN_ATTN_BN', '')!r}")
    print(f"{'B':>3s} {'Hq':>3s} {'Hkv':>3s} {'Sq':>5s} {'Sk':>6s} {'us':>9s} {'TFLOP/s':>8s}")
    total = 0.0
    for i, (b, hq, hkv, sq, sk) in enumerate(shapes + EXTRA):
        q = torch.randn(b, hq, sq, 128, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, hkv, sk, 128, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, hkv, sk, 128, dtype=torch.bfloat16, device="cuda")
        us = statistics.median(timer(lambda: attention(q, k, v), args.iters, args.warmup))
        tflops = 4.0 * b * hq * sq * sk * 128 / us / 1e6
        if i < len(shapes):
            total += us
        print(f"{b:3d} {hq:3d} {hkv:3d} {sq:5d} {sk:6d} {us:9.1f} {tflops:8.1f}" + ("" if i < len(shapes) else "  (extra)"),
              flush=True)
    print(f"sum over the {len(shapes)} 034 shapes: {total:.1f} us")


if __name__ == "__main__":
    main()
