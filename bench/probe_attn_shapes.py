"""Device probe: vlattn's attention alone (the op the layer calls, mask and skip as the layer passes them) on
workload shapes, cold L2, median of --iters with the bench's CudaTimer.

    python3 bench/probe_attn_shapes.py --workloads 007:1,007:7 --switch VLATTN_ATTN_PERSISTENT=1,2

With --switch (a development switch, vlattn.dev) every value is timed in the same process, in rounds that
alternate the values call by call (the order reversed every other round), so both arms see the same
clocks; without it the switches stay as the environment set them (bench/ab_env.sh for separate processes).
Prints µs per workload and value, and the sums. Inputs are the reference's Q/K/V stage on fresh random
inputs.
"""
import argparse
import statistics

import torch

from vlattn import bench as B
from vlattn import dev
from vlattn import workloads as W


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", required=True, help="problem:index,... (bench's --workloads form)")
    ap.add_argument("--switch", default=None, metavar="NAME=v1,v2", help="in-process A/B of a development switch")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per value (split over --rounds)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    name, values = B.parse_switch(args.switch) if args.switch else (None, [None])
    device = torch.device("cuda")
    timer = B.CudaTimer(device)
    print(f"switches {({k: v['value'] for k, v in dev.switches().items() if v['value'] != v['default']})}; "
          f"A/B of {name}: {values}" if name else "", flush=True)
    per_round = max(1, args.iters // args.rounds)
    totals = {v: 0.0 for v in values}
    for spec in args.workloads.split(","):
        problem, index = spec.split(":")
        w = W.load(problem)[int(index)]
        q, k, v, mask = B.attention_inputs(w, device, seed=1234 + int(index))

        def run() -> None:
            torch.ops.vlattn.attention(q, k, v, mask, causal=False, scale=B.ATTN_SCALE, skip=True)

        times = {val: [] for val in values}
        for r in range(args.rounds):
            for val in (values if r % 2 == 0 else values[::-1]):
                if name is not None:
                    dev.set_switch(name, val)
                times[val] += timer(run, per_round, args.warmup)
        cells = []
        for val in values:
            us = statistics.median(times[val])
            totals[val] += us
            cells.append(f"{'' if name is None else f'{val}: '}{us:9.1f} us")
        print(f"{spec:8s} {str(w.axes):50s} {'   '.join(cells)}", flush=True)
    print("sum " + "   ".join(f"{'' if name is None else f'{v}: '}{t:.1f} us" for v, t in totals.items()), flush=True)


if __name__ == "__main__":
    main()
