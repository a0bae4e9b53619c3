"""Each workload against a floor built from what this machine was measured to reach, not from its datasheet peaks.

    python bench/floor_table.py bench/runs/<run>_layers.json [--gemm-tflops 790] [--attn-tflops 700]
                                [--read-tbs 3.0] [--start-us 1.0]

T_SOL (workloads.t_sol_us, the issues' yardstick) divides by the H200's peaks: 989 TFLOP/s and 4.8 TB/s. No kernel
here reaches either, so T_SOL cannot say how far a layer is from what it could be. This floor is a chain of three
stages at measured rates, with one start:

    floor = start + max(QKV FLOPs / gemm, QKV bytes / read) + attention FLOPs / attn + max(O FLOPs / gemm, O bytes / read)

- gemm 790 TFLOP/s: cuBLAS bf16 8192^3 on the H200 (ANCHORS.md, 785-799);
- attn 700 TFLOP/s: cuDNN 9.19's best forward on the H200, GQA, 16k (ANCHORS.md: 702), over the full score matrix
  (a mask's skipped tiles can beat it: 007 B1 S4096);
- read 3.0 TB/s: a cold read of a projection's weight after the bench's L2 flush (bench/NOTES.md seventeenth session:
  33 MB in 14.8 us and 25.7 MB in 12.4 us, launch included, so ~3.0 TB/s at the margin); a stage's bytes are its
  weights, biases, activations in and out;
- start 1 us: the first kernel's start after the flush.

It is a model, not a measurement: every stage at its ceiling, no overlap between stages, the attention's bytes and
the RoPE ignored. What it gives: the fraction of the floor each layer reaches (T_floor / T), which the H200's T_SOL
hides, and how far the issues' targets are from the floor itself (the best PyTorch composition of the same run
against the floor: the most "x best" any kernel at these rates could show; the mean T_SOL / T_floor: the best "mean
%SOL").
"""
import argparse
import json
import math

from vlattn import workloads as W
from vlattn.bench import attention_flops


def stage_floors(w: W.Workload, gemm: float, attn: float, read: float) -> tuple[float, float, float]:
    """(QKV, attention, O) stage floors in seconds."""
    c = w.consts
    shapes = W.projection_shapes(w)
    qkv = [(m, n, k, b) for name, m, n, k, b in shapes if name != "o"]
    (o,) = [(m, n, k) for name, m, n, k, _ in shapes if name == "o"]
    qkv_flops = sum(2 * m * n * k for m, n, k, _ in qkv)
    # Weights and biases; each distinct activation read once (q's tokens, and the k / v tokens once for both);
    # the outputs written once.
    qkv_bytes = 2 * (sum(n * k + (n if b else 0) + m * n for m, n, k, b in qkv) + qkv[0][0] * qkv[0][2]
                     + (qkv[1][0] * qkv[1][2] if w.problem == "034" else 0))
    o_m, o_n, o_k = o
    o_flops, o_bytes = 2 * o_m * o_n * o_k, 2 * (o_n * o_k + o_m * o_k + o_m * o_n)
    attn_flops = attention_flops(w.batch, c["num_heads"], w.q_len, w.kv_len, c["head_dim"])
    return max(qkv_flops / gemm, qkv_bytes / read), attn_flops / attn, max(o_flops / gemm, o_bytes / read)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="a vlattn-bench layers (or all) JSON")
    ap.add_argument("--gemm-tflops", type=float, default=790.0)
    ap.add_argument("--attn-tflops", type=float, default=700.0)
    ap.add_argument("--read-tbs", type=float, default=3.0)
    ap.add_argument("--start-us", type=float, default=1.0)
    args = ap.parse_args()
    d = json.load(open(args.json))
    native = {r["name"]: r for r in d["results"] if r["impl"] == "vlattn:native"}
    graph = {r["name"]: r for r in d["results"] if r["impl"] == "vlattn:native_graph"}
    workloads = {w.name: w for w in W.load()}
    print(f"floor: start {args.start_us} us + QKV + attention + O at {args.gemm_tflops:.0f} TFLOP/s (GEMM), "
          f"{args.attn_tflops:.0f} TFLOP/s (attention), {args.read_tbs} TB/s (cold weight reads)")
    print(f"{'workload':28s} {'T_SOL':>7s} {'floor':>7s} {'QKV':>7s} {'attn':>7s} {'O':>7s} | {'native':>7s} "
          f"{'graph':>7s} {'floor/T':>7s} {'floor/Tg':>8s} | {'best PT':>7s} {'best/floor':>10s}")
    logs, sol = [], {}
    for name, r in native.items():
        w = workloads[name]
        tq, ta, to = stage_floors(w, args.gemm_tflops * 1e12, args.attn_tflops * 1e12, args.read_tbs * 1e12)
        floor = args.start_us + (tq + ta + to) * 1e6
        t, best = r["us_median"], r["best_pytorch_us"]
        g = graph.get(name, {}).get("us_median")
        logs.append(math.log(best / floor))
        sol.setdefault(w.problem, []).append(r["t_sol_us"] / floor)
        # The columns in the header's order: native (eager) µs, graph µs, floor / eager, floor / graph.
        g_us, g_pct = (f"{g:7.1f}", f"{100 * floor / g:7.1f}%") if g else (f"{'—':>7s}", f"{'—':>8s}")
        print(f"{name:28s} {r['t_sol_us']:7.1f} {floor:7.1f} {tq * 1e6:7.1f} {ta * 1e6:7.1f} {to * 1e6:7.1f} | "
              f"{t:7.1f} {g_us} {100 * floor / t:6.1f}% {g_pct} | {best:7.1f} {best / floor:9.2f}x")
    print(f"\nbest PyTorch / floor: geomean {math.exp(sum(logs) / len(logs)):.2f}x over {len(logs)} workloads "
          f"(issue 5's target for native: 2.5x geomean, 1.25x each); "
          f"below 1.25x even at the floor: {sum(1 for v in logs if math.exp(v) < 1.25)}")
    for p, v in sorted(sol.items()):
        print(f"{p}: mean T_SOL / floor {sum(v) / len(v):.3f} (the best mean %SOL at the floor; target 0.70), "
              f"min {min(v):.3f}")


if __name__ == "__main__":
    main()
