"""Does what ran before a timed impl move its cold-L2 time? The bench times each workload's native
eager call first, after the inputs, the exact reference and one checked call, and the previous
workload's torch.compile left the GPU idle for seconds; the graph replay is timed next, warmed by the
eager calls. The large layers read 30-50 us slower eager than graph replay in the bench (call 3 of the
twenty-second session) but only 4-12 us in probe_host.

    python3 bench/probe_settle.py [--rounds 2] [--settle-s 1.0] [--workloads 007:3,034:14,034:6]

Before each measurement one condition, then the bench's own timer (CudaTimer: queue drained, L2
flushed, events around the call; --warmup calls, then --iters timed) on either the eager layer or its
graph replay:
  idle      time.sleep(settle): host and GPU idle (the GPU may lower its clocks);
  host      settle seconds of a Python busy loop: host hot, GPU idle;
  gpu       settle seconds of back-to-back GEMMs with host syncs (the bench's warm_up_process);
  reference the exact bf16 reference call, then its output compared (what the bench runs first).
Prints per workload, condition and impl: min / median / p80 µs over the timed calls, best round.

--compile: first torch.compile the composite of each workload and call it once, as the bench's compile
baseline does (bench.compiled_runner), keeping it alive; --no-grad: everything under torch.no_grad(), as
in the bench. In the bench's process (twenty-third session, call 4) the eager call read 15-60 us above its
graph replay at the minimum on 12 workloads; in this probe's process 2-16 us: these switch on the bench's
process state one piece at a time.
"""
import contextlib
import argparse
import time

import torch

from vlattn import reference
from vlattn import workloads as W
from vlattn.bench import (Case, CudaTimer, OP_NAMES, _composite_fn, compiled_runner, select_workloads, time_stats,
                          vlattn_backend_impl, vlattn_graph_impl, warm_up_process)


def host_busy(seconds):
    t0 = time.perf_counter()
    x = 0
    while time.perf_counter() - t0 < seconds:
        x += 1
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="007:3,034:14,034:6,007:5")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settle-s", type=float, default=1.0)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--conditions", default="idle,host,gpu,reference", help="comma list of the conditions to run")
    ap.add_argument("--compile", action="store_true", help="torch.compile the composite first (kept alive)")
    ap.add_argument("--no-grad", action="store_true", help="run under torch.no_grad(), as the bench does")
    args = ap.parse_args()
    with torch.no_grad() if args.no_grad else contextlib.nullcontext():
        run(args)


def run(args):
    device = torch.device("cuda")
    timer = CudaTimer(device)
    warm_up_process(device, 2.0)
    print(f"{'workload':28s} {'condition':10s} {'impl':6s} {'min':>8s} {'median':>8s} {'p80':>8s}   (best round)")
    for w in select_workloads(W.load(), args.workloads):
        case = Case(workload=w, op_name=OP_NAMES[w.problem], inputs=W.make_inputs(w, device), device=device)
        inputs, a = case.inputs, case.args
        ref_fn = getattr(reference, case.op_name)
        native = vlattn_backend_impl("native").build(case)  # the bench's vlattn:native column
        eager, out = native.step, native.result()
        graph = vlattn_graph_impl("native").build(case).step
        compiled = compiled_runner(_composite_fn(case.op_name), a, device) if args.compile else None

        conditions = {
            "idle": lambda: time.sleep(args.settle_s),
            "host": lambda: host_busy(args.settle_s),
            "gpu": lambda: warm_up_process(device, args.settle_s),
            "reference": lambda: (ref_fn(**inputs) - out).abs().max().item(),
        }
        conditions = {k: conditions[k] for k in args.conditions.split(",")}
        best = {}
        for r in range(args.rounds):
            order = list(conditions) if r % 2 == 0 else list(reversed(conditions))
            for cname in order:
                for iname, fn in (("eager", eager), ("graph", graph)):
                    conditions[cname]()
                    st = time_stats(timer(fn, args.iters, args.warmup))
                    stats = (st["us_min"], st["us_median"], st["us_p80"])
                    key = (cname, iname)
                    if key not in best or stats[1] < best[key][1]:
                        best[key] = stats
                    print(f"  round {r} {w.name:28s} {cname:10s} {iname:6s} "
                          f"{stats[0]:8.1f} {stats[1]:8.1f} {stats[2]:8.1f}", flush=True)
        for (cname, iname), s in best.items():
            print(f"{w.name:28s} {cname:10s} {iname:6s} {s[0]:8.1f} {s[1]:8.1f} {s[2]:8.1f}", flush=True)
        del case, inputs, a, native, eager, out, graph, compiled
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
