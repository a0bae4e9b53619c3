"""A fixed call for Nsight Compute: `ncu ... python bench/ncu_target.py qkv 007 0 splitk3`.

    what:      qkv | attention | linear | cublas (F.linear on the same operands as linear: the q projection)
    problem:   007 | 034;  index: workload index in sorted-by-SOL order;  config: op config ("" = auto)
  or `python bench/ncu_target.py cublas-mnk M N K [bias]`: F.linear on random bf16 operands of that shape
  (any projection, e.g. 034's vision K/V, which the workload form does not reach),
  or `python bench/ncu_target.py linear-mnk M N K [bias] [config]`: vlattn.linear on the same operands
  (config "" or left out: the dispatcher's pick).
Runs the call 3 times (ncu's --launch-skip/--launch-count pick the one to profile).
"""
import sys

import torch

import vlattn
from vlattn import bench, reference
from vlattn import workloads as W


def gemm_mnk(m: int, n: int, k: int, bias: bool, ours: bool = False, config: str = "") -> None:
    shape = bench.GemmShape(m, n, k, bias)
    x, wt, b = bench._gemm_operands(shape, torch.device("cuda"), 0)  # the GEMM mode's operands
    print("vlattn.linear" if ours else "cublas", shape.label, config or ("auto" if ours else ""))
    for _ in range(3):
        if ours:
            vlattn.linear(x, wt, b, config=config or None)
        else:
            torch.nn.functional.linear(x, wt, b)
    torch.cuda.synchronize()


def main():
    if sys.argv[1] in ("cublas-mnk", "linear-mnk"):
        m, n, k = (int(v) for v in sys.argv[2:5])
        bias = len(sys.argv) > 5 and sys.argv[5] == "bias"
        config = sys.argv[6] if len(sys.argv) > 6 else ""
        return gemm_mnk(m, n, k, bias, ours=sys.argv[1] == "linear-mnk", config=config)
    what, problem, index = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = sys.argv[4] if len(sys.argv) > 4 else ""
    w = W.sorted_by_sol(W.load(problem))[index]
    inputs = W.make_inputs(w, "cuda")
    v = list(inputs.values())
    # The q projection's operands, by name (the two problems order their inputs differently).
    x, wt, bias = ((inputs["hidden_states"], inputs["q_weight"], inputs["q_bias"]) if problem == "007" else
                   (inputs["language_hidden_states"], inputs["q_proj_weight"], inputs["q_proj_bias"]))
    if what == "qkv":
        fn = (lambda: vlattn.mrope_qkv(*v[:7], *v[8:10], config=config)) if problem == "007" else (
            lambda: vlattn.vision_qkv(*v[:10], config=config))
    elif what == "attention":
        q, k, vv = reference.mrope_qkv(*v[:7], *v[8:10]) if problem == "007" else reference.vision_qkv(*v[:10])
        q, k, vv = q.contiguous(), k.contiguous(), vv.contiguous()
        mask = v[10] if problem == "007" else None
        fn = lambda: vlattn.attention(q, k, vv, mask)  # noqa: E731
    elif what == "cublas":
        fn = lambda: torch.nn.functional.linear(x, wt, bias)  # noqa: E731
    else:
        fn = lambda: vlattn.linear(x, wt, bias, config=config or None)  # noqa: E731
    print(w.problem, w.axes, what, config or "auto")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
