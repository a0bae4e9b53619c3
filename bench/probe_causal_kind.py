"""What reading the 007 mask costs the attention, and whether a causal predicate gives the same bits.

    python3 bench/probe_causal_kind.py [--workloads 007:3,007:1] [--iters 20] [--graph]

Per workload (007's benchmark mask: 0 on and below the diagonal, bf16 min above), the attention op alone
on the QKV projection's outputs, cold L2 (vlattn-bench's timer), in three forms:
  mask         the workload's mask (the layer's call: summary pre-pass, MIXED tiles staged)
  causal       no mask, causal=True (the diagonal tiles apply an index predicate instead of mask values)
  mask+causal  both (the causal flag skips the upper tiles by trip count; the diagonal still reads the mask)
and whether `causal` and `mask+causal` are bitwise equal to `mask`. `mask - causal` is the most that
recognizing the causal pattern on the device (a summary tile kind) could save per call, before the
cost of the recognition. --graph times each form replayed from a CUDA graph (still cold L2): the GPU's
time without the host launch, which at ~20 µs scatters the eager readings by ±20% (bench/NOTES.md,
twenty-first session call 2). --skip-off adds `mask/noskip` and `mask+c/noskip` (skip=False: no pre-pass,
every tile MIXED), to tell the pre-pass and the skipping from the rest.
"""
import argparse

import torch

import vlattn
from vlattn import reference
from vlattn import workloads as W
from vlattn.bench import CudaTimer, graph_runner, select_workloads

DEFAULT = "007:10,007:15,007:0,007:14,007:9,007:3,007:7,007:1,007:13,007:2,007:4"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=DEFAULT)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--skip-off", action="store_true", help="also time both mask forms with skip=False")
    ap.add_argument("--graph", action="store_true", help="time CUDA-graph replays (no host launch in the time)")
    args = ap.parse_args()
    timer = CudaTimer(torch.device("cuda"))
    extra = ["mask/noskip", "mask+c/noskip"] if args.skip_off else []
    print(f"{'workload':24s} {'mask':>9s} {'causal':>9s} {'mask+c':>9s} {'saving':>7s}  bitwise(causal, mask+c)"
          + "".join(f" {name:>14s}" for name in extra))
    for w in select_workloads(W.load("007"), args.workloads):
        v = list(W.make_inputs(w, "cuda").values())
        q, k, vv = (t.contiguous() for t in reference.mrope_qkv(*v[:7], *v[8:10]))
        mask = v[10]
        forms = {
            "mask": lambda: vlattn.attention(q, k, vv, mask),
            "causal": lambda: vlattn.attention(q, k, vv, None, causal=True),
            "mask+causal": lambda: vlattn.attention(q, k, vv, mask, causal=True),
        }
        if args.skip_off:
            forms["mask/noskip"] = lambda: vlattn.attention(q, k, vv, mask, skip=False)
            forms["mask+c/noskip"] = lambda: vlattn.attention(q, k, vv, mask, causal=True, skip=False)
        outs = {name: fn().clone() for name, fn in forms.items()}
        same = [torch.equal(outs["mask"], outs[n]) for n in ("causal", "mask+causal")]
        us = {}
        for name, fn in forms.items():
            step = graph_runner(fn, (), q.device).step if args.graph else fn
            t = sorted(timer(step, args.iters, 3))
            us[name] = t[len(t) // 2]
        saving = 1.0 - us["causal"] / us["mask"]
        print(f"{w.name:24s} {us['mask']:9.1f} {us['causal']:9.1f} {us['mask+causal']:9.1f} {saving:7.1%}  {same}"
              + "".join(f" {us[name]:14.1f}" for name in extra), flush=True)


if __name__ == "__main__":
    main()
