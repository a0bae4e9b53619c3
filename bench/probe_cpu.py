"""Is the host path's speed a property of the CPU the process runs on?

    python3 bench/probe_cpu.py [--workload 007:9] [--iters 10] [--cpus all|0,3,5]

In the twenty-fourth session's call 1, four bench processes run back to back on the same three
workloads read two "fast" and two "slow": in the slow ones every host-paced column was slower
(007 B4 S256: our eager call 158 vs 140 µs, torch.compile 397 vs 217 µs) while the graph replays
matched to 0.3 µs. So the eager lead is a state of the process, not of our code. This probe prints
the machine's CPU / NUMA layout and the GPU's local CPUs (sysfs), then pins the main thread to one
CPU at a time and measures, per CPU:
  py     ns per iteration of a pure-Python loop (the host's single-thread speed);
  launch µs of host time per tiny torch op while the GPU is held busy (the launch path);
  eager  the bench's cold timer on the native layer call (median of --iters), and
  graph  the same on its graph replay (the GPU's own time: should not move with the CPU).
"""
import argparse
import os
import statistics
import subprocess
import time

import torch

from vlattn import workloads as W
from vlattn.bench import (Case, CudaTimer, OP_NAMES, select_workloads, vlattn_backend_impl, vlattn_graph_impl,
                          warm_up_process)


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as exc:
        return f"({type(exc).__name__})"


def topology(device_index):
    print("affinity:", sorted(os.sched_getaffinity(0)), "of", os.cpu_count(), "CPUs")
    nodes = sorted(p for p in os.listdir("/sys/devices/system/node") if p.startswith("node")) \
        if os.path.isdir("/sys/devices/system/node") else []
    for n in nodes:
        print(f"  {n}: cpus {read(f'/sys/devices/system/node/{n}/cpulist')}")
    props = torch.cuda.get_device_properties(device_index)
    bus = getattr(props, "pci_bus_id", None)
    dom = getattr(props, "pci_domain_id", 0)
    dev = getattr(props, "pci_device_id", 0)
    if bus is not None:
        addr = f"{dom:04x}:{bus:02x}:{dev:02x}.0"
        base = f"/sys/bus/pci/devices/{addr}"
        print(f"GPU {addr}: numa_node {read(base + '/numa_node')}, local_cpulist {read(base + '/local_cpulist')}")
    for cmd in (["nvidia-smi", "topo", "-m"], ["lscpu"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
            print(f"$ {' '.join(cmd)}\n{out.rstrip()}")
        except Exception as exc:  # the probe still measures without them
            print(f"$ {' '.join(cmd)}: {type(exc).__name__}")
    freq = [read(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq") for c in sorted(os.sched_getaffinity(0))]
    print("scaling_cur_freq (kHz):", " ".join(freq))


def py_ns(n=200_000):
    t0 = time.perf_counter_ns()
    x = 0
    for i in range(n):
        x += i
    return (time.perf_counter_ns() - t0) / n


def launch_us(t, n=200):
    torch.cuda.synchronize()
    torch.cuda._sleep(40_000_000)  # hold the GPU: launches never wait on a full queue's slot
    t0 = time.perf_counter()
    for _ in range(n):
        t.add_(1)
    dt = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="007:9")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--cpus", default="all", help="all (the affinity set) or a comma list")
    args = ap.parse_args()
    device = torch.device("cuda")
    topology(device.index or 0)
    allowed = sorted(os.sched_getaffinity(0))
    cpus = allowed if args.cpus == "all" else [int(c) for c in args.cpus.split(",")]
    timer = CudaTimer(device)
    warm_up_process(device, 1.0)
    (w,) = select_workloads(W.load(), args.workload)
    case = Case(workload=w, op_name=OP_NAMES[w.problem], inputs=W.make_inputs(w, device), device=device)
    eager = vlattn_backend_impl("native").build(case).step  # the bench's vlattn:native column
    graph = vlattn_graph_impl("native").build(case).step
    small = torch.zeros(16, device=device)
    print(f"\n{w.name}: per CPU (main thread pinned), medians")
    print(f"{'cpu':>5s} {'py ns':>7s} {'launch us':>10s} {'eager us':>9s} {'graph us':>9s} {'eager-graph':>12s}")
    rows = [("all", allowed)] + [(str(c), [c]) for c in cpus] + [("all", allowed)]
    for name, mask in rows:
        os.sched_setaffinity(0, mask)
        time.sleep(0.05)
        py = statistics.median(py_ns() for _ in range(3))
        lu = statistics.median(launch_us(small) for _ in range(3))
        e = statistics.median(timer(eager, args.iters, 2))
        g = statistics.median(timer(graph, args.iters, 2))
        print(f"{name:>5s} {py:7.1f} {lu:10.2f} {e:9.1f} {g:9.1f} {e - g:12.1f}", flush=True)
    os.sched_setaffinity(0, allowed)


if __name__ == "__main__":
    main()
