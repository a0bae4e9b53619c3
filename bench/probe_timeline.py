"""GPU timeline of one native layer call: each kernel's start, duration and the gap before it.

    python3 bench/probe_timeline.py [--reps 5] [--workloads '007[B=1,S=128],034:15']
    python3 bench/probe_timeline.py --gemms 128x512x3584+b,128x3584x3584 [--configs auto,t64x64x64_c1x1_pingpong]

nsys is not on the device machine; torch.profiler's CUDA activity records (CUPTI) give the kernels'
GPU timestamps. Modes per workload (--modes, default ahead,cold):
  ahead  a sleep kernel first, so the host has queued the whole call before the GPU reaches it: the
         gaps are GPU-side only (launch latency, programmatic dependent launch, stream joins);
  cold   the bench's timer conditions (queue drained, L2 flushed): gaps include exposed host time;
  graph  the call replayed from a CUDA graph under the cold conditions (the bench's native_graph column).
The layer call is the bench's: backend="native" into a fixed out= (until 2026-12-02 it was the automatic
backend returning a fresh tensor).
Per kernel, the median over --reps calls of: start relative to the call's first kernel, duration, and
the idle gap since the previous kernel ended (negative = overlap). CUPTI adds host time per launch, so
the cold mode's gaps are an upper bound; the durations and the ahead mode's gaps are the GPU's.

--gemms times single projection GEMMs instead of layers (MxNxK, "+b" with a bias): cuBLAS's F.linear
and vlattn.linear with each of --configs ("auto" = the dispatcher's pick; default: auto and every
built config), so that a small GEMM's GPU duration and its launch gap can be told apart.

--switch NAME=v1,v2 (with --rounds N) runs each workload's calls under each value of a development switch,
interleaved in one process, and prints a kernel table per value: per-kernel durations of two plans at the same
GPU state (one process per arm drifted by 3-6% on the large layers: bench/NOTES.md, sixty-seventh session).

--workloads takes vlattn-bench's grammar: PPP:i (i = the line in workload.jsonl), or a substring of a
workload's name. (Until 2026-12-01 PPP:i here meant the i-th by SOL: older bench/NOTES.md entries.)
"""
import argparse
import contextlib
import json
import os
import statistics
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import vlattn
from vlattn import dev
from vlattn import workloads as W
from vlattn.bench import Case, OP_NAMES, graph_runner, parse_switch, select_workloads, vlattn_backend_impl

SLEEP_CYCLES = 4_000_000  # ~2 ms: longer than any call's host path here


def short(name: str) -> str:
    for key in ("qkv_rope_rows", "qkv_rope_splitk", "qkv_rope_c256", "qkv_rope", "mask_summary", "attention",
                "nvjet", "device_kernel"):
        if key in name:
            return key
    return name[:40]


def layer_fn(w):
    """The bench's vlattn:native column: the public op with backend="native", writing into a fixed out=."""
    device = torch.device("cuda")
    case = Case(workload=w, op_name=OP_NAMES[w.problem], inputs=W.make_inputs(w, device), device=device)
    return vlattn_backend_impl("native").build(case).step


def graph_fn(fn):
    """``fn`` captured once into a CUDA graph (the bench's vlattn:native_graph column): its replay."""
    return graph_runner(lambda: fn(), (), torch.device("cuda")).step


def gemm_fns(spec, configs):
    """(label, fn) pairs for one GEMM spec "MxNxK[+b]": F.linear, then vlattn.linear per config."""
    bias = spec.endswith("+b")
    m, n, k = (int(v) for v in spec.removesuffix("+b").split("x"))
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    wt = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
    b = torch.randn(n, dtype=torch.bfloat16, device="cuda") if bias else None
    fns = [("cublas", lambda: torch.nn.functional.linear(x, wt, b))]
    for c in configs:
        fns.append((c, lambda c=c: vlattn.linear(x, wt, b, config=None if c == "auto" else c)))
    return fns


def kernels_of_calls(trace_path, reps):
    """The kernels of each call: those between one marker fill (the flush before each call) and the
    next, without the sleep kernel; each kernel gets "launched", the end of the host API call that
    launched it (CUPTI correlation), on the same clock. Returns [(flush kernel, [kernels])]."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    api_end = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            api_end[e["args"]["correlation"]] = e["ts"] + e.get("dur", 0.0)
    ks = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    calls, cur, flush = [], None, None
    for k in ks:
        n = k["name"]
        k["launched"] = api_end.get(k.get("args", {}).get("correlation"))
        if "FillFunctor" in n and k["dur"] > 5.0:
            if cur:
                calls.append((flush, cur))
            cur, flush = [], k
        elif "sleep" in n or "spin" in n:
            continue
        elif cur is not None:
            cur.append(k)
    if cur:
        calls.append((flush, cur))
    return calls[-reps:]


def run(fn, reps, ahead, scratch):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for i in range(reps):
            torch.cuda.synchronize()
            scratch.fill_(i + 1)  # marker kernel (and the L2 flush)
            if ahead:
                torch.cuda._sleep(SLEEP_CYCLES)
            with torch.profiler.record_function(f"call{i}"):
                fn()
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    calls = kernels_of_calls(path, reps)
    os.unlink(path)
    return calls


def cold_span(flush, kernels):
    """Flush kernel's end to the call's last kernel end: what the bench's cold timer measures."""
    return kernels[-1]["ts"] + kernels[-1]["dur"] - (flush["ts"] + flush["dur"])


def summarize(calls):
    """Per kernel: start (from the call's first kernel), duration, idle gap since the previous kernel,
    and `queued`: its start minus the end of the host call that launched it (large = the GPU reached
    it after the host handed it over late; small or negative timing noise = host far ahead). Plus the
    flush kernel's end to the first kernel's start (`lead`) and to the last kernel's end (`cold span`:
    what the bench's cold timer measures, its start event sitting right after the flush)."""
    n = min(len(c) for _, c in calls)
    rows = []
    for j in range(n):
        starts, durs, gaps, queued = [], [], [], []
        for _, c in calls:
            t0 = c[0]["ts"]
            starts.append(c[j]["ts"] - t0)
            durs.append(c[j]["dur"])
            gaps.append(c[j]["ts"] - (c[j - 1]["ts"] + c[j - 1]["dur"]) if j else 0.0)
            if c[j]["launched"] is not None:
                queued.append(c[j]["ts"] - c[j]["launched"])
        rows.append((short(calls[0][1][j]["name"]), statistics.median(starts), statistics.median(durs),
                     statistics.median(gaps), statistics.median(queued) if queued else float("nan")))
    spans = [c[-1]["ts"] + c[-1]["dur"] - c[0]["ts"] for _, c in calls]
    leads = [c[0]["ts"] - (f["ts"] + f["dur"]) for f, c in calls]
    cold = [cold_span(f, c) for f, c in calls]
    return (rows, statistics.median(spans), len(set(len(c) for _, c in calls)) == 1, statistics.median(leads),
            statistics.median(cold))


def print_extremes(calls, count):
    """The `count` fastest and slowest calls by cold span (flush end to last kernel end), kernel by
    kernel: which kernel is longer or which gap opens when a call is slow."""
    spans = sorted(calls, key=lambda fc: cold_span(*fc))
    print(f"    cold spans, sorted: {' '.join(f'{cold_span(f, c):.0f}' for f, c in spans)}", flush=True)
    picks = [("fastest", fc) for fc in spans[:count]] + [("slowest", fc) for fc in spans[-count:]]
    for label, (f, c) in picks:
        flush_end = f["ts"] + f["dur"]
        print(f"    {label}: cold {cold_span(f, c):7.1f}, lead {c[0]['ts'] - flush_end:6.1f}", flush=True)
        for j, k in enumerate(c):
            gap = k["ts"] - (c[j - 1]["ts"] + c[j - 1]["dur"]) if j else k["ts"] - flush_end
            launched = k["launched"] - flush_end if k["launched"] is not None else float("nan")
            print(f"      {short(k['name']):18s} start {k['ts'] - flush_end:7.1f}  dur {k['dur']:7.1f}  "
                  f"gap {gap:6.1f}  queued {k['ts'] - flush_end - launched:6.1f}  launched {launched:7.1f}",
                  flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workloads", default="007[B=1,S=128],007[B=1,S=512],007[B=1,S=1024],034[B=2,Lq=128,Lv=196],034[B=1,Lq=512,Lv=784]")
    ap.add_argument("--extremes", type=int, default=0,
                    help="also print the N fastest and N slowest cold calls kernel by kernel")
    ap.add_argument("--gemms", default="", help="MxNxK[+b],...: time single GEMMs instead of layers")
    ap.add_argument("--configs", default="", help="vlattn.linear configs for --gemms (default: auto + all)")
    ap.add_argument("--modes", default="ahead,cold",
                    help="comma list of ahead, cold and graph (the call's CUDA-graph replay under the cold "
                         "conditions: the same kernels without the host path, kernel by kernel against cold)")
    ap.add_argument("--switch", default="",
                    help="NAME=v1,v2,...: a development switch (vlattn.dev) at each value, the values' calls "
                         "interleaved in --rounds rounds in this one process (graph mode: one capture per value), "
                         "a kernel table per value; e.g. VLATTN_QKV_GEMM_EPI=1,0")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of --reps calls per value (with --switch)")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    scratch = torch.empty(2 * props.L2_cache_size // 4, dtype=torch.int32, device="cuda")
    if args.gemms:
        from vlattn.gemm_configs import GEMM_CONFIGS, runnable_name
        configs = args.configs.split(",") if args.configs else ["auto"] + [runnable_name(c) for c in GEMM_CONFIGS]
        jobs = [(f"{spec} {label}", fn) for spec in args.gemms.split(",") for label, fn in gemm_fns(spec, configs)]
    else:
        jobs = [(w.name, layer_fn(w)) for w in select_workloads(W.load(), args.workloads)]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    sw_name, sw_values = parse_switch(args.switch) if args.switch else (None, [None])

    def under(value):  # the switch at `value` for what runs inside (nothing without --switch)
        return dev.switch(sw_name, value) if sw_name else contextlib.nullcontext()

    for name, fn in jobs:
        for mode in modes:
            try:
                arms = {}
                for v in sw_values:  # a graph keeps what its capture chose: one capture per value
                    with under(v):
                        arms[v] = graph_fn(fn) if mode == "graph" else fn
                got = {v: [] for v in sw_values}
                for r in range(args.rounds):  # interleaved, the order reversed every other round
                    for v in (sw_values if r % 2 == 0 else sw_values[::-1]):
                        with under(v):
                            got[v] += run(arms[v], args.reps, mode == "ahead", scratch)
            except RuntimeError as exc:  # a config that cannot run this shape
                print(f"{name} {mode}: {str(exc).splitlines()[0]}", flush=True)
                break
            for v in sw_values:
                calls = got[v]
                label = f"{name} [{sw_name.removeprefix('VLATTN_')}={v}]" if sw_name else name
                if not calls or not all(c for _, c in calls):
                    print(f"{label} {mode}: no kernels found", flush=True)
                    continue
                rows, span, same, lead, cold = summarize(calls)
                print(f"{label:28s} {mode:5s} first-kernel-start to last-kernel-end {span:7.1f} us; flush end to "
                      f"first kernel {lead:6.1f}, to last kernel end {cold:7.1f}"
                      f"{'' if same else ' (kernel counts differ between calls)'}", flush=True)
                for kname, start, dur, gap, queued in rows:
                    print(f"    {kname:18s} start {start:7.1f}  dur {dur:7.1f}  gap {gap:6.1f}  queued {queued:6.1f}",
                          flush=True)
                if args.extremes and mode in ("cold", "graph"):
                    print_extremes(calls, args.extremes)

if __name__ == "__main__":
    main()
