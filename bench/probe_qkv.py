"""Quick device probe of the fused QKV projection (until `vlattn-bench --mode qkv` lands).

For a few workloads: fused op (auto and each named config, m128mc included) vs the unfused
reference stage (cuBLAS F.linear + PyTorch bias/RoPE + .contiguous()), and a plain cuBLAS GEMM over
pre-concatenated weights (a floor for the projection alone, not a fair baseline: callers do not hand
us concatenated weights).
Cold L2, median of --iters. Prints one line per workload.

    python bench/probe_qkv.py [--iters 20] [--workloads 007,034]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import vlattn
from vlattn import reference
from vlattn import workloads as W
from vlattn.bench import CudaTimer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--problems", default="007,034")
    args = ap.parse_args()
    dev = torch.device("cuda")
    timer = CudaTimer(dev)
    med = lambda step: statistics.median(timer(step, args.iters, 3))  # noqa: E731
    print(f"{'workload':28s} {'M':>6s} {'fused':>8s} {'m128':>8s} {'m64':>8s} {'sk2':>6s} {'sk3':>6s} {'sk4':>6s} {'c256':>7s} {'m128mc':>7s} "
          f"{'unfused':>8s} {'cat-GEMM':>8s} "
          f"{'x unfused':>9s} {'TF/s':>6s} {'W TB/s':>6s} {'graph':>7s} {'host/call':>9s}")
    for w in W.sorted_by_sol([x for p in args.problems.split(",") for x in W.load(p)]):
        inp = W.make_inputs(w, dev)
        vals = list(inp.values())
        if w.problem == "007":
            a = vals[:7] + vals[8:10]
            fused = lambda cfg="": vlattn.mrope_qkv(*a, config=cfg)  # noqa: E731
            unfused = lambda: [t.contiguous() for t in reference.mrope_qkv(*a)]  # noqa: E731
            x, ws = vals[0], [vals[1], vals[3], vals[5]]
            bs = [vals[2], vals[4], vals[6]]
            xs = [x, x]
        else:
            a = vals[:10]
            fused = lambda cfg="": vlattn.vision_qkv(*a, config=cfg)  # noqa: E731
            unfused = lambda: [t.contiguous() for t in reference.vision_qkv(*a)]  # noqa: E731
            ws, bs = [vals[4], vals[6], vals[8]], [vals[5], vals[7], vals[9]]
            xs = [vals[0], vals[1]]
        wcat = torch.cat(ws[1:] if w.problem == "034" else ws)
        bcat = torch.cat(bs[1:] if w.problem == "034" else bs)
        if w.problem == "007":
            cat = lambda: F.linear(xs[0], wcat, bcat)  # noqa: E731
        else:
            cat = lambda: (F.linear(xs[0], ws[0], bs[0]), F.linear(xs[1], wcat, bcat))  # noqa: E731
        got, ref = fused(), unfused()
        # The kernel alone: the fused call replayed from a CUDA graph (no host work inside the timing).
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fused()
            with torch.cuda.graph(graph, stream=side):
                fused()
        torch.cuda.current_stream().wait_stream(side)
        t_graph = med(graph.replay)
        # Host cost per call: back-to-back calls, wall clock (GPU-bound shapes show the GPU time).
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            fused()
        t_host = (time.perf_counter() - t0) / 50 * 1e6
        torch.cuda.synchronize()
        worst = max(((g.float() - r.float()).abs() - (1e-2 + 1e-2 * r.float().abs())).max().item()
                    for g, r in zip(got, ref))
        t = {k: med(f) for k, f in (("fused", fused), ("m128", lambda: fused("m128")), ("m64", lambda: fused("m64")),
                                    ("sk2", lambda: fused("splitk2")), ("sk3", lambda: fused("splitk3")),
                                    ("sk4", lambda: fused("splitk4")), ("c256", lambda: fused("c256")),
                                    ("mc", lambda: fused("m128mc")),
                                    ("unfused", unfused), ("cat", cat))}
        m_rows = sum(x.shape[0] * x.shape[1] for x in xs) if w.problem == "034" else xs[0].shape[0] * xs[0].shape[1]
        flop = sum(2 * (x.shape[0] * x.shape[1]) * wt.shape[0] * wt.shape[1]
                   for x, wt in (zip([xs[0]] * 3, ws) if w.problem == "007" else zip([xs[0], xs[1], xs[1]], ws)))
        wbytes = sum(wt.numel() * 2 for wt in ws)
        print(f"{w.problem}{str(w.axes):25.25s} {m_rows:6d} {t['fused']:8.1f} {t['m128']:8.1f} {t['m64']:8.1f} "
              f"{t['sk2']:6.1f} {t['sk3']:6.1f} {t['sk4']:6.1f} {t['c256']:7.1f} {t['mc']:7.1f} "
              f"{t['unfused']:8.1f} {t['cat']:8.1f} {t['unfused'] / t['fused']:8.2f}x "
              f"{flop / t['fused'] / 1e6:6.0f} {wbytes / t['fused'] / 1e6:6.2f} {t_graph:7.1f} {t_host:9.1f} "
              f"{'PASS' if worst <= 0 else 'FAIL'}")
        del inp, vals, got, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
