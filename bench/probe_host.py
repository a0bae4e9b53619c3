"""Where the time of a small native layer call goes: host path vs GPU, on the device.

    python3 bench/probe_host.py [--iters 30] [--workloads '007[B=1,S=128],034:15']

Per workload and per callable (the layer; the layer as the bench's eager column calls it, "layer_out":
backend="native" into a preallocated out=; and its three stages alone), prints median µs of:
  host     CPU time of one call while the GPU is held busy (launches never wait on the queue);
  gpu      CUDA events around the call with the host far ahead (a sleep kernel first): kernel
           time plus the gaps between kernels, no host stall;
  cold     the bench's timer (L2 flushed, queue drained, events around the call): what the
           bench reports, max(host path, GPU) roughly;
  graph    the call captured in a CUDA graph and replayed with the cold timer.
`gpu` vs `cold` says whether the host path is exposed; `graph` is the no-host-overhead floor.
--profile N: also run each workload's layer call N times under cProfile (GPU held busy) and print
the 12 functions with the most own time: the Python wrapper's share against the C++ op's.
--ranges N: run the layer call N times under torch.profiler (CPU events, GPU held busy) and print the
C++ op's host ranges (csrc/ops: vlattn.layer.*, vlattn.qkv.*, vlattn.gemm.run, vlattn.attention.launch)
and the ATen ops it calls, per layer call. The profiler adds ~1 µs per recorded event: read shares.

--workloads takes vlattn-bench's grammar: PPP:i (i = the line in workload.jsonl), or a substring of a
workload's name. (Until 2026-12-01 PPP:i here meant the i-th by SOL: older bench/NOTES.md entries.)
"""
import argparse
import os
import statistics
import time

import torch

import vlattn
from vlattn import reference
from vlattn import workloads as W
from vlattn.bench import select_workloads

SLEEP_CYCLES = 4_000_000  # ~2 ms at 1.98 GHz: longer than any call's host path below


def host_us(fn, iters):
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES * 4)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t = (time.perf_counter() - t0) / iters * 1e6
    torch.cuda.synchronize()
    return t


def events_us(fn, iters, scratch, ahead):
    # The events are created (first recorded) before the timed calls, as the bench's timer does: torch creates a
    # CUDA event at its first record(), and an end event created inside the interval added its creation to every
    # call whose GPU work ended before the host's (until the fifty-seventh session).
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in events:
        s.record()
        e.record()
    times = []
    for s, e in events:
        torch.cuda.synchronize()
        scratch.zero_()
        if ahead:
            torch.cuda._sleep(SLEEP_CYCLES)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def graphed(fn):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def callables(w):
    v = list(W.make_inputs(w, "cuda").values())
    if w.problem == "007":
        layer = lambda: vlattn.mrope_self_attention(*v)  # noqa: E731
        qkv = lambda: vlattn.mrope_qkv(*v[:7], *v[8:10])  # noqa: E731
        q, k, vv = (t.contiguous() for t in reference.mrope_qkv(*v[:7], *v[8:10]))
        mask = v[10]
        o_w = v[7]
    else:
        layer = lambda: vlattn.vision_cross_attention(*v)  # noqa: E731
        qkv = lambda: vlattn.vision_qkv(*v[:10])  # noqa: E731
        q, k, vv = (t.contiguous() for t in reference.vision_qkv(*v[:10]))
        mask = None
        o_w = v[10]
    attn = lambda: vlattn.attention(q, k, vv, mask)  # noqa: E731
    o_in = attn()
    o_proj = lambda: vlattn.linear(o_in, o_w)  # noqa: E731
    # The bench's eager column calls the layer with the backend named and a preallocated out= (vlattn_backend_impl).
    op = vlattn.mrope_self_attention if w.problem == "007" else vlattn.vision_cross_attention
    out = torch.empty_like(v[0])
    layer_out = lambda: op(*v, backend="native", out=out)  # noqa: E731
    return {"layer": layer, "layer_out": layer_out, "qkv": qkv, "attention": attn, "o_proj": o_proj}


def profile_layer(fn, iters):
    import cProfile
    import io
    import pstats
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES * 4)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(iters):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    print(out.getvalue())


def profile_ranges(fn, iters):
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES * 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            fn()
    torch.cuda.synchronize()
    rows = sorted(prof.key_averages(), key=lambda e: -e.cpu_time_total)
    print(f"    {'range / op':40s} {'calls/layer':>11s} {'total us/layer':>15s} {'self us/layer':>14s}")
    for e in rows[:25]:
        print(f"    {e.key[:40]:40s} {e.count / iters:11.1f} {e.cpu_time_total / iters:15.1f} "
              f"{e.self_cpu_time_total / iters:14.1f}")


def trace_layer(fn, iters, scratch):
    """Median offset (µs from the Python call's start) of every host mark, by position in the call."""
    take = vlattn._ext._C.host_trace
    for busy in (True, False):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        take()
        calls = []
        if busy:
            torch.cuda._sleep(SLEEP_CYCLES * 4)
        for _ in range(iters):
            if not busy:
                torch.cuda.synchronize()
                scratch.zero_()
            t0 = time.monotonic_ns()
            fn()
            t1 = time.monotonic_ns()
            calls.append((t0, t1, take()))
        torch.cuda.synchronize()
        shapes = {tuple(n for n, _ in marks) for _, _, marks in calls}
        if len(shapes) != 1:
            print(f"    (marks differ between calls: {len(shapes)} sequences; showing the first call's)")
        names = [n for n, _ in calls[0][2]]
        print(f"    {'GPU busy' if busy else 'bench-like (drained, L2 flushed)'}: "
              f"call {statistics.median((t1 - t0) / 1e3 for t0, t1, _ in calls):.1f} us")
        prev = 0.0
        for i, name in enumerate(names):
            offs = [(m[i][1] - t0) / 1e3 for t0, _, m in calls if len(m) == len(names)]
            med = statistics.median(offs)
            print(f"      {i:2d} {name:24s} {med:8.1f} us  (+{med - prev:6.1f})")
            prev = med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--workloads", default="007[B=1,S=128],007[B=1,S=256],007[B=1,S=512],007[B=4,S=256],034[B=2,Lq=128,Lv=196],034[B=1,Lq=512,Lv=784]")
    ap.add_argument("--profile", type=int, default=0, help="cProfile this many layer calls per workload")
    ap.add_argument("--ranges", type=int, default=0, help="torch.profiler host ranges over this many layer calls")
    ap.add_argument("--trace", type=int, default=0, help="host marks (VLATTN_HOST_TRACE) over this many layer calls")
    args = ap.parse_args()
    if args.trace:
        os.environ["VLATTN_HOST_TRACE"] = "1"  # read by the extension at its first mark, after this
    props = torch.cuda.get_device_properties(0)
    scratch = torch.empty(2 * props.L2_cache_size // 4, dtype=torch.int32, device="cuda")
    print(f"{'workload':28s} {'call':10s} {'host':>8s} {'gpu':>8s} {'cold':>8s} {'graph':>8s}")
    for w in select_workloads(W.load(), args.workloads):
        for name, fn in callables(w).items():
            for _ in range(3):
                fn()
            h = host_us(fn, args.iters)
            g = events_us(fn, args.iters, scratch, ahead=True)
            c = events_us(fn, args.iters, scratch, ahead=False)
            gr = events_us(graphed(fn), args.iters, scratch, ahead=False)
            print(f"{w.name:28s} {name:10s} "
                  f"{h:8.1f} {g:8.1f} {c:8.1f} {gr:8.1f}", flush=True)
            if name == "layer" and args.profile:
                profile_layer(fn, args.profile)
            if name == "layer" and args.ranges:
                profile_ranges(fn, args.ranges)
            if name in ("layer", "layer_out") and args.trace:
                trace_layer(fn, args.trace, scratch)


if __name__ == "__main__":
    main()
