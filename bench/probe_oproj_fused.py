"""Would the fused QKV kernels' split-K grids run the small layers' O projection faster than its GEMM?

The O projection at 128-1024 rows runs on CUTLASS tiles that each stream the whole K (007 B1 S128: 64 x 64
ping-pong tiles, 112 CTAs pulling (64 + 64) x 3584 x 2 B = 917 KB each). The fused QKV kernel's split-K configs
cut K over a cluster and reduce the partials through distributed shared memory: at 128 rows `splitk4` pulls
(128 + 128) x 896 x 2 B = 458 KB per CTA (bench/NOTES.md, fifty-third session: the per-SM fill model). This probe
asks the question before any code is written: it runs the O projection's GEMM through `vlattn.mrope_qkv`, with
the O weight as q_weight (N / 128 "heads"), one-head K and V weights beside it, no biases, and cos = 1 / sin = 0
tables, so that the q output is exactly bf16(x . W_o^T), head-major. Against F.linear (cuBLAS) and
vlattn.linear (the O projection's own dispatch) on the same operands, each call's GPU span after an L2 flush
(`CudaTimer(host_ahead=True)`), median of --iters.

    python bench/probe_oproj_fused.py [--iters 30] [--configs splitk2d,splitk3,splitk4,m256k2,m256k3,m256k4,]

The fused column carries two extra one-head groups (K, V: 2 x 128 x K weights, +7% of the bytes at N = 3584).
A fused config that errors prints ERR; one whose q output misses F.linear's (relative Frobenius error > 1e-2 or a
non-finite value) prints FAIL. Where the extension has the layers' O projection step (`_C.output_projection`,
bench/pending/0003), the column `oproj` times it too with VLATTN_OPROJ_SPLITK=2 (its split-K grid wherever the fused
choice splits, token-major rows, no extra groups; "-" where it would take the GEMM).
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

import vlattn
from vlattn.bench import CudaTimer

# (label, rows, hidden = K = N): the O projections of the small workloads (007: hidden 3584; 034: 4096).
SHAPES = [
    ("007 B1 S128", 128, 3584), ("007 B1 S256", 256, 3584), ("007 B4 S128 / B1 S512", 512, 3584),
    ("007 B1 S613", 613, 3584), ("034 B2 Lq128", 256, 4096), ("034 B2 Lq256 / B1 Lq512", 512, 4096),
    ("034 B1 Lq1024", 1024, 4096),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--configs", default="splitk2d,splitk3,splitk4,m256k2,m256k3,m256k4,")
    args = ap.parse_args()
    configs = args.configs.split(",")
    dev = torch.device("cuda")
    timer = CudaTimer(dev, host_ahead=True)
    med = lambda step: statistics.median(timer(step, args.iters, 3))  # noqa: E731
    torch.manual_seed(0)
    head = f"{'O projection':24s} {'M':>5s} {'K=N':>5s} {'cuBLAS':>8s} {'linear':>8s} "
    print(head + " ".join(f"{('fused:' + (c or 'auto')):>14.14s}" for c in configs) + f" {'oproj':>8s}"
          + "  best fused - linear (us)")
    for label, m, hidden in SHAPES:
        x = torch.randn(1, m, hidden, dtype=torch.bfloat16, device=dev)
        w_o = torch.randn(hidden, hidden, dtype=torch.bfloat16, device=dev) * hidden ** -0.5
        w_kv = torch.randn(128, hidden, dtype=torch.bfloat16, device=dev) * hidden ** -0.5
        cos = torch.ones(3, 1, m, 128, dtype=torch.bfloat16, device=dev)
        sin = torch.zeros(3, 1, m, 128, dtype=torch.bfloat16, device=dev)
        ref = F.linear(x[0], w_o).float()  # [m, hidden]
        t_cublas = med(lambda: F.linear(x[0], w_o))
        t_linear = med(lambda: vlattn.linear(x[0], w_o))

        def matches(got):  # the projection within 1e-2 relative Frobenius error of F.linear's, and finite
            return bool(torch.isfinite(got).all()) and ((got - ref).norm() / ref.norm()).item() <= 1e-2

        def fused(cfg):
            return vlattn.mrope_qkv(x, w_o, None, w_kv, None, w_kv, None, cos, sin, config=cfg)

        cols, best = [], None
        for cfg in configs:
            try:
                q = fused(cfg)[0]  # [1, N / 128, m, 128]
                got = q[0].transpose(0, 1).reshape(m, hidden).float()
                if not matches(got):
                    cols.append("FAIL")
                    continue
                t = med(lambda cfg=cfg: fused(cfg))
                best = t if best is None else min(best, t)
                cols.append(f"{t:.1f}")
            except RuntimeError:
                cols.append("ERR")
        oproj = "-"
        c_ext = vlattn._ext._C if vlattn._ext.available() else None
        if c_ext is not None and hasattr(c_ext, "output_projection"):
            sm_count = torch.cuda.get_device_properties(dev).multi_processor_count
            if c_ext.oproj_splitk_config(m, hidden, hidden, sm_count, any_rows=True):
                from vlattn import dev as vdev
                with vdev.switch("VLATTN_OPROJ_SPLITK", 2):
                    got = c_ext.output_projection(x, w_o)[0].float()
                    ok = matches(got)
                    t = med(lambda: c_ext.output_projection(x, w_o)) if ok else None
                oproj = f"{t:.1f}" if ok else "FAIL"
                if ok:
                    best = t if best is None else min(best, t)
        gap = f"{best - t_linear:+.1f}" if best is not None else "-"
        print(f"{label:24.24s} {m:5d} {hidden:5d} {t_cublas:8.1f} {t_linear:8.1f} " +
              " ".join(f"{c:>14s}" for c in cols) + f" {oproj:>8s}  {gap}", flush=True)
        del x, w_o, w_kv, cos, sin, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
