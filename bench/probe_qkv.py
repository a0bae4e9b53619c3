"""Quick device probe of the fused QKV projection (until `vlattn-bench --mode qkv` lands).

For a few workloads: fused op (auto and each named config, m128mc and the two-pass gemm included) vs the unfused
reference stage (cuBLAS F.linear + PyTorch bias/RoPE + .contiguous()), and a plain cuBLAS GEMM over
pre-concatenated weights (a floor for the projection alone, not a fair baseline: callers do not hand
us concatenated weights).
Cold L2, median of --iters. Prints one line per workload.

    python bench/probe_qkv.py [--iters 20] [--problems 007,034] [--configs m128,m64,...] [--max-m 2048]

Every named config is timed (--configs overrides the list); a config that cannot run a shape (e.g.
c256 with an odd head count) prints ERR, one that misses the bench's check (vlattn.bench.compare_qkv
with RoPE-operand scales) prints FAIL.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import vlattn
from vlattn import reference
from vlattn import workloads as W
from vlattn.bench import CudaTimer, compare_qkv, qkv_operand_scales


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--problems", default="007,034")
    ap.add_argument("--configs", default="m128,m64,splitk2,splitk3,splitk4,splitk2d,splitk3d,splitk4d,"
                                         "m256k1,m256k2,m256k3,m256k4,c256,m128mc,gemm")
    ap.add_argument("--max-m", type=int, default=1 << 30, help="skip workloads with more rows")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    dev = torch.device("cuda")
    timer = CudaTimer(dev)
    med = lambda step: statistics.median(timer(step, args.iters, 3))  # noqa: E731
    print(f"{'workload':28s} {'M':>6s} {'fused':>8s} " + " ".join(f"{c:>8.8s}" for c in configs) +
          f" {'unfused':>8s} {'cat-GEMM':>8s} {'x unfused':>9s} {'TF/s':>6s} {'W TB/s':>6s} {'graph':>7s} "
          f"{'host/call':>9s}")
    for w in W.sorted_by_sol([x for p in args.problems.split(",") for x in W.load(p)]):
        if max(m for _, m, _, _, _ in W.projection_shapes(w)) > args.max_m:
            continue
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
        scales = qkv_operand_scales("mrope_qkv" if w.problem == "007" else "vision_qkv", tuple(a))
        worst_ok = compare_qkv(got, ref, scales)["ok"]

        def timed(cfg, ref=ref, scales=scales):
            try:
                if not compare_qkv(fused(cfg), ref, scales)["ok"]:
                    return "FAIL"
                return f"{med(lambda: fused(cfg)):8.1f}"
            except RuntimeError:
                return "ERR"

        cols = [timed(c) for c in configs]
        t = {k: med(f) for k, f in (("fused", fused), ("unfused", unfused), ("cat", cat))}
        m_rows = sum(x.shape[0] * x.shape[1] for x in xs) if w.problem == "034" else xs[0].shape[0] * xs[0].shape[1]
        flop = sum(2 * (x.shape[0] * x.shape[1]) * wt.shape[0] * wt.shape[1]
                   for x, wt in (zip([xs[0]] * 3, ws) if w.problem == "007" else zip([xs[0], xs[1], xs[1]], ws)))
        wbytes = sum(wt.numel() * 2 for wt in ws)
        print(f"{w.name:28.28s} {m_rows:6d} {t['fused']:8.1f} " + " ".join(f"{c:>8s}" for c in cols) +
              f" {t['unfused']:8.1f} {t['cat']:8.1f} {t['unfused'] / t['fused']:8.2f}x "
              f"{flop / t['fused'] / 1e6:6.0f} {wbytes / t['fused'] / 1e6:6.2f} {t_graph:7.1f} {t_host:9.1f} "
              f"{'PASS' if worst_ok else 'FAIL'}", flush=True)
        del inp, vals, got, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
