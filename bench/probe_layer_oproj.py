"""Device probe: the native layers with each O-projection GEMM config, A/B in one process.

The layer bench picks the O-projection config by dispatch; layer times vary by ±10% between
processes, so comparing configs across runs says little. This probe calls the C++ layer entry
(vlattn._C.mrope_layer / cross_layer, what the public ops run) with each config in turn, in rounds
(config order rotated every round), cold L2 (vlattn.bench.CudaTimer), and prints the median per
config and the O-projection GEMM alone with the same configs.

    python bench/probe_layer_oproj.py [--rounds 5] [--iters 4] [--min-m 0] [--max-m 2048]
        [--configs t64x128x64_c1x1_pingpong,t128x128x64_c1x1_coop_streamk/splitk2,...]
"""
import argparse
import statistics

import torch

import vlattn
from vlattn import _ext, dispatch
from vlattn import workloads as W
from vlattn.bench import CudaTimer

DEFAULT_CONFIGS = ("t64x128x64_c1x1_pingpong,t128x128x64_c1x1_coop,t128x128x64_c1x1_coop_streamk/splitk2,"
                   "t128x128x64_c1x1_coop_streamk/splitk4")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--min-m", type=int, default=0, help="skip workloads with fewer O-projection rows")
    ap.add_argument("--max-m", type=int, default=2048, help="skip workloads with more O-projection rows")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS)
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    dev = torch.device("cuda")
    timer = CudaTimer(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    short = [c.replace("t128x128x64_c1x1_coop_streamk/", "").replace("_c1x1", "") for c in configs]
    print("columns: " + ", ".join(configs))
    short = [s[-12:] for s in short]
    print(f"{'workload':28s} {'M':>5s} | layer: " + " ".join(f"{s:>12.12s}" for s in short) +
          " | O GEMM: " + " ".join(f"{s:>12.12s}" for s in short) + " | dispatch")
    C = _ext.require("probe")
    for w in W.sorted_by_sol([x for p in ("007", "034") for x in W.load(p)]):
        inp = W.make_inputs(w, dev)
        vals = list(inp.values())
        if w.problem == "007":
            x, o_w = vals[0], vals[7]
            m = x.shape[0] * x.shape[1]

            def layer(cfg, vals=vals):
                return C.mrope_layer(*vals[:8], vals[8], vals[9], vals[10], [32, 48, 48], False, cfg, None)
        else:
            x, o_w = vals[0], vals[10]
            m = x.shape[0] * x.shape[1]

            def layer(cfg, vals=vals):
                return C.cross_layer(*vals[:11], 10000.0, [42, 42, 44], cfg, None)
        if not args.min_m <= m <= args.max_m:
            continue
        o_in = torch.randn(m, o_w.shape[1], dtype=torch.bfloat16, device=dev)
        ref = layer(configs[0])
        times = {c: [] for c in configs}
        gemm = {c: [] for c in configs}
        for r in range(args.rounds):
            for c in configs[r % len(configs):] + configs[:r % len(configs)]:
                out = layer(c)
                assert torch.allclose(out.float(), ref.float(), atol=2e-2, rtol=2e-2), (w.name, c)
                times[c] += timer(lambda c=c: layer(c), args.iters, 1)
                gemm[c] += timer(lambda c=c: vlattn.linear(o_in, o_w, None, config=c), args.iters, 1)
        med = {c: statistics.median(v) for c, v in times.items()}
        gmed = {c: statistics.median(v) for c, v in gemm.items()}
        pick = dispatch.analytic_config(m, o_w.shape[0], o_w.shape[1], sms)
        print(f"{w.name:28.28s} {m:5d} | layer: " + " ".join(f"{med[c]:12.1f}" for c in configs) +
              " | O GEMM: " + " ".join(f"{gmed[c]:12.1f}" for c in configs) + f" | {pick}", flush=True)
        del inp, vals
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
