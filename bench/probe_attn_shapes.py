"""Device probe: vlattn's attention alone (the op the layer calls, mask and skip as the layer passes them) on
workload shapes, cold L2, median of --iters with the bench's CudaTimer.

    python3 bench/probe_attn_shapes.py --workloads 007:1,007:7 --switch VLATTN_ATTN_PERSISTENT=1,2

With --switch (a development switch, vlattn.dev) every value is timed in the same process, in the bench's
interleaved rounds (measure_runners_in_rounds: a block of calls per value, a seeded order per round that
never runs a value twice in a row), so both arms see the same clocks; without it the switches stay as the environment set them (bench/ab_env.sh for separate processes).
With --v-layouts head,token the columns are v's layouts instead (same values): head-major [B, Hkv, S, 128]
contiguous, or the token-major view the layers hand the attention (VLATTN_QKV_V_TOKEN_MAJOR), to see
what the strided v costs the attention alone.
Prints µs per workload and value, and the sums. Inputs are the reference's Q/K/V stage on fresh random
inputs.
"""
import argparse
import contextlib

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
    ap.add_argument("--v-layouts", default=None, metavar="head,token",
                    help="columns by v's layout (head-major contiguous / token-major view) instead of a switch")
    args = ap.parse_args()
    if args.switch and args.v_layouts:
        ap.error("--switch and --v-layouts: one A/B at a time")
    layouts = args.v_layouts.split(",") if args.v_layouts else None
    if layouts and not set(layouts) <= {"head", "token"}:
        ap.error(f"--v-layouts: expected a list of head / token; got {args.v_layouts!r}")
    name, values = B.parse_switch(args.switch) if args.switch else ("v layout", layouts) if layouts else (None, [None])
    device = torch.device("cuda")
    timer = B.CudaTimer(device)
    print(f"switches {({k: v['value'] for k, v in dev.switches().items() if v['value'] != v['default']})}; "
          f"A/B of {name}: {values}" if name else "", flush=True)
    opts = B.Options(iters=args.iters, warmup=args.warmup, check=False, seed=0, rounds=args.rounds)
    totals = {v: 0.0 for v in values}
    for spec in args.workloads.split(","):
        problem, index = spec.split(":")
        w = W.load(problem)[int(index)]
        q, k, v, mask = B.attention_inputs(w, device, seed=1234 + int(index))

        def runner(v):
            def run(q=q, k=k, v=v, mask=mask):
                return torch.ops.vlattn.attention(q, k, v, mask, causal=False, scale=B.ATTN_SCALE, skip=True)
            return B.Impl("vlattn:attention", pytorch=False, needs_cuda=True,
                          build=lambda case: B._returning_runner(run, ()))

        if layouts:  # the same values, v head-major or as the token-major view of [B, S, Hkv, 128] rows
            token = v.transpose(1, 2).contiguous().transpose(1, 2)
            impls = [runner(v if layout == "head" else token) for layout in layouts]
        else:
            inner = runner(v)
            impls = [inner] if name is None else [B.switched_impl(inner, name, val) for val in values]
        # The bench's interleaved rounds (measure_runners_in_rounds), one column per value.
        entries = [((lambda impl=impl: impl.build(None)), None, contextlib.nullcontext) for impl in impls]
        recs = B.measure_runners_in_rounds(entries, timer, opts)
        cells = []
        for val, rec in zip(values, recs):
            if rec["us_median"] is None:
                raise SystemExit(f"{spec} {name}={val}: {rec.get('error')}")
            totals[val] += rec["us_median"]
            cells.append(f"{'' if name is None else f'{val}: '}{rec['us_median']:9.1f} us")
        print(f"{spec:8s} {str(w.axes):50s} {'   '.join(cells)}", flush=True)
        B.release_memory(device)
    print("sum " + "   ".join(f"{'' if name is None else f'{v}: '}{t:.1f} us" for v, t in totals.items()), flush=True)


if __name__ == "__main__":
    main()
