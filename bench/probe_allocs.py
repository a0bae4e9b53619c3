"""Does the native eager call make device allocations (cudaMalloc) call after call?

    python3 bench/probe_allocs.py [--workloads 007:1,007:7,034:12,034:10] [--calls 48]

The two-stream QKV path takes its side stream from c10's pool (round-robin over 32 streams per device)
and allocates the side GEMM's workspace with that stream current, so each of the first 32 calls may
find no cached block of its stream and cudaMalloc a new segment (host time before or between the
launches). The bench runs 5 warm-up calls per round, one checked call and 30 timed ones, so most of its
timed eager calls would pay it, and its graph replay never does. In the twenty-fourth session's README
run the GPU-bound large layers read 50-110 us slower eager than graph at the median (007 B64 S256,
034 B32 Lq373, Lq 8192). Per workload this prints, for each eager call (the bench's cold timer), the
caching allocator's device-allocation count delta (memory_stats "num_device_alloc"), the cold µs and the
host µs the call took (a host path slower than the GPU's first kernels shows there), then the graph
replay's median for comparison.
"""
import argparse
import statistics

import torch

from vlattn import workloads as W
from vlattn.bench import (Case, CudaTimer, OP_NAMES, select_workloads, vlattn_backend_impl, vlattn_graph_impl,
                          warm_up_process)


def device_allocs() -> int:
    return int(torch.cuda.memory_stats().get("num_device_alloc", -1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="007:1,007:7,034:12,034:10")
    ap.add_argument("--calls", type=int, default=48)
    args = ap.parse_args()
    device = torch.device("cuda")
    timer = CudaTimer(device)
    warm_up_process(device, 1.0)
    for w in select_workloads(W.load(), args.workloads):
        case = Case(workload=w, op_name=OP_NAMES[w.problem], inputs=W.make_inputs(w, device), device=device)
        eager = vlattn_backend_impl("native").build(case).step  # the bench's vlattn:native column
        rows = []
        for i in range(args.calls):
            before = device_allocs()
            host = []
            (us,) = timer(eager, 1, 0, host_us=host)
            rows.append((i, device_allocs() - before, us, host[0]))
        graph = vlattn_graph_impl("native").build(case).step
        g = statistics.median(timer(graph, 15, 2))
        with_alloc = [us for _, d, us, _ in rows if d > 0]
        without = [us for _, d, us, _ in rows[1:] if d == 0]
        nan = float("nan")
        print(f"{w.name}: graph median {g:.1f} us; eager calls with a device allocation {len(with_alloc)} of "
              f"{len(rows)} (median {statistics.median(with_alloc) if with_alloc else nan:.1f} us), "
              f"without {len(without)} (median {statistics.median(without) if without else nan:.1f} us); "
              f"host time per call median {statistics.median(h for *_, h in rows):.1f} us, "
              f"max {max(h for *_, h in rows):.1f}; alloc retries {torch.cuda.memory_stats().get('num_alloc_retries')}")
        print("  call:allocs events-us/host-us  " + "  ".join(f"{i}:{d} {us:.0f}/{h:.0f}" for i, d, us, h in rows),
              flush=True)
        del graph
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
