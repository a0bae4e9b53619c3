"""Device probe: how much of a small native layer's time is its code coming from DRAM.

The bench makes L2 cold before every call (vlattn.bench.CudaTimer), which evicts the kernels'
instructions as well as the data. bench/micro/launch_probe.cu measured what that costs a kernel that
runs ~150 KB of straight-line code once per CTA (the size of the attention variant 007 B1 S128 runs):
+14 µs against the same kernel with its code in L2. This probe asks the same of the real layers, all
in CUDA-graph replay (no host path), median of --iters per mode, modes interleaved per round:

  flush     the bench's rule: write 2x L2 of scratch, then replay the layer;
  clean     write the scratch, then read another 2x L2 buffer (L2 holds clean, unrelated lines);
  decoy     write the scratch, then replay the same layer on a second set of inputs and weights of the
            same shapes (the same kernels run, so their code is in L2; their data is not);
  warm      replay the layer twice, time the second (data and code in L2).

decoy minus clean is the part of the cold time that is instruction fetch (both leave the layer's own
data out of L2 and L2 without dirty lines); clean minus flush the cost of the dirty lines.

    python bench/probe_code_cold.py [--workloads 007:10,007:15,034:15] [--iters 15] [--rounds 3]
"""
import argparse
import statistics

import torch

import vlattn
from vlattn import bench as B
from vlattn import workloads as W


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="007:10,007:15,007:0,034:15,034:0")
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    dev = torch.device("cuda")
    timer = B.CudaTimer(dev)
    other = torch.empty_like(timer.scratch)
    other.fill_(1)
    everything = [w for p in ("007", "034") for w in W.load(p)]
    chosen = B.select_workloads(everything, args.workloads)
    modes = ["flush", "clean", "decoy", "warm"]
    print(f"{'workload':28s} " + " ".join(f"{m:>8s}" for m in modes) + "   decoy-clean  clean-flush   (µs, graph replay)")
    for w in chosen:
        op = getattr(vlattn, B.OP_NAMES[w.problem])
        main_in = W.make_inputs(w, dev, seed=args.seed)
        decoy_in = W.make_inputs(w, dev, seed=args.seed + 1)
        run = B.graph_runner(lambda *a: op(*a, backend="native"), tuple(main_in.values()), dev)
        decoy = B.graph_runner(lambda *a: op(*a, backend="native"), tuple(decoy_in.values()), dev)
        before = {
            "flush": lambda: timer.scratch.zero_(),
            "clean": lambda: (timer.scratch.zero_(), other.sum()),
            "decoy": lambda: (timer.scratch.zero_(), decoy.step()),
            "warm": lambda: run.step(),
        }
        times = {m: [] for m in modes}
        for r in range(args.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for m in order:
                for _ in range(args.iters):
                    torch.cuda.synchronize()
                    before[m]()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    run.step()
                    e.record()
                    e.synchronize()
                    times[m].append(s.elapsed_time(e) * 1e3)
        med = {m: statistics.median(v) for m, v in times.items()}
        assert torch.isfinite(run.result().float()).all(), w.name
        print(f"{w.name:28.28s} " + " ".join(f"{med[m]:8.1f}" for m in modes) +
              f"   {med['decoy'] - med['clean']:11.1f}  {med['clean'] - med['flush']:11.1f}", flush=True)
        del run, decoy, main_in, decoy_in
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
