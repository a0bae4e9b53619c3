"""Device probe: vlattn's attention alone (the op the layer calls, mask and skip as the layer passes them) on
workload shapes, cold L2, median of --iters with the bench's CudaTimer. Meant to run once per setting of
a knob read once per process, alternating, with bench/ab_env.sh:

    bash bench/ab_env.sh VLATTN_ATTN_PERSISTENT "1 2" 2 python3 bench/probe_attn_shapes.py --workloads 007:1,007:7

Prints µs per workload and the sum. Inputs are the reference's Q/K/V stage on fresh random inputs.
"""
import argparse
import os
import statistics

import torch

from vlattn import bench as B
from vlattn import workloads as W


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", required=True, help="problem:index,... (bench's --workloads form)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    device = torch.device("cuda")
    timer = B.CudaTimer(device)
    knobs = {k: v for k, v in os.environ.items() if k.startswith("VLATTN_ATTN")}
    print(f"knobs {knobs}", flush=True)
    total = 0.0
    for spec in args.workloads.split(","):
        problem, index = spec.split(":")
        w = W.load(problem)[int(index)]
        q, k, v, mask = B.attention_inputs(w, device, seed=1234 + int(index))
        run = lambda: torch.ops.vlattn.attention(q, k, v, mask, causal=False, scale=B.ATTN_SCALE,  # noqa: E731
                                                 skip=True)
        us = statistics.median(timer(run, args.iters, args.warmup))
        total += us
        print(f"{spec:8s} {str(w.axes):50s} {us:9.1f} us", flush=True)
    print(f"sum {total:.1f} us", flush=True)


if __name__ == "__main__":
    main()
