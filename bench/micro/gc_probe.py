"""Python's garbage collector inside a bench run: do its collections land in the timed calls?

The eager columns of a whole layers run read 30-350 µs above graph replay on some calls of GPU-bound layers, and
`probe_timeline --modes cold` put all of it in the host's lead before the first launch (bench/NOTES.md, sixty-first
session). A quiet process (three workloads, no baselines) showed no such stall with the collector on or off, so the
question needs the whole command's process: torch.compile's baselines leave millions of tracked objects behind, and
a generation-2 collection walks all of them.

This runs `vlattn.bench` in-process with a `gc.callbacks` hook that records every collection (start, duration,
generation) and wraps each timed call's `step()` in host timestamps (the bench's own CudaTimer, unchanged otherwise;
the wrapper adds one Python call per step to every column alike). At the end it prints, over all timed calls:
how many overlapped a collection, and each group's excess over its block's fastest call. `--gc off` runs the same
with `gc.disable()` from the start (the hook then records only explicit `gc.collect()` calls), for the eager-minus-graph
A/B.

    python3 bench/micro/gc_probe.py --gc on --log /tmp/gc_on.json -- --mode layers --workloads 034:9 --json /tmp/b.json
"""
from __future__ import annotations

import argparse
import bisect
import gc
import json
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gc", choices=["on", "off"], default="on")
    ap.add_argument("--log", required=True, help="JSON: the collections, the timed calls' spans, the summary")
    ap.add_argument("--stall-us", type=float, default=30.0, help="a call this far above its block's fastest is a stall")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="after '--': vlattn.bench's arguments")
    a = ap.parse_args(argv)
    bench_args = a.bench_args[1:] if a.bench_args[:1] == ["--"] else a.bench_args

    events: list[tuple[int, int, int]] = []  # (start ns, duration ns, generation)
    started = [0]

    def on_gc(phase: str, info: dict) -> None:
        now = time.perf_counter_ns()
        if phase == "start":
            started[0] = now
        else:
            events.append((started[0], now - started[0], int(info["generation"])))

    gc.callbacks.append(on_gc)
    if a.gc == "off":
        gc.disable()

    blocks: list[dict] = []
    vb = original = None
    try:
        import vlattn.bench as vb

        original = vb.CudaTimer.__call__

        def timed(self, step, iters, warmup, host_us=None):
            spans: list[tuple[int, int]] = []

            def wrapped():
                t0 = time.perf_counter_ns()
                out = step()
                spans.append((t0, time.perf_counter_ns()))
                return out

            us = original(self, wrapped, iters, warmup, host_us)
            blocks.append({"us": us, "spans": spans[warmup:], "host_ahead": bool(self.host_ahead)})
            return us

        vb.CudaTimer.__call__ = timed
        rc = vb.main(bench_args)
    except SystemExit as e:  # argparse errors and explicit exits
        rc = e.code if isinstance(e.code, int) else 1
    finally:
        if original is not None:
            vb.CudaTimer.__call__ = original
        gc.callbacks.remove(on_gc)
        if a.gc == "off":
            gc.enable()

    tracked = len(gc.get_objects())
    calls = []  # (excess µs over the block's fastest, GC ns inside the call's host span, generations)
    starts = [s for s, _, _ in events]  # in time order, and collections never overlap: ends are ordered too
    for b in blocks:
        if not b["us"]:
            continue
        fastest = min(b["us"])
        for us, (t0, t1) in zip(b["us"], b["spans"]):
            inside = []
            i = bisect.bisect_left(starts, t1) - 1
            while i >= 0 and events[i][0] + events[i][1] > t0:
                inside.append(events[i])
                i -= 1
            ns = sum(min(s + d, t1) - max(s, t0) for s, d, _ in inside)
            calls.append((us - fastest, ns, sorted({g for _, _, g in inside})))

    def group(rows):
        ex = [r[0] for r in rows]
        return {"n": len(rows), "excess_median_us": statistics.median(ex) if ex else None,
                "excess_mean_us": statistics.fmean(ex) if ex else None,
                "stalls": sum(e >= a.stall_us for e in ex)}

    with_gc = [c for c in calls if c[1] > 0]
    without = [c for c in calls if c[1] == 0]
    per_gen = {}
    for g in (0, 1, 2):
        d = [ns / 1e3 for _, ns, gg in events if gg == g]
        per_gen[g] = {"count": len(d), "total_ms": sum(d) / 1e3, "max_us": max(d) if d else 0.0,
                      "median_us": statistics.median(d) if d else 0.0}
    g_with, g_without = group(with_gc), group(without)
    summary = {"gc": a.gc, "rc": rc, "tracked_objects_at_end": tracked, "collections": per_gen,
               "timed_calls": len(calls), "with_gc": g_with, "without_gc": g_without,
               "stall_us": a.stall_us,
               "stalls_total": g_with["stalls"] + g_without["stalls"],
               "stalls_with_gc": g_with["stalls"],
               "gc_us_in_stalled_calls": [round(c[1] / 1e3, 1) for c in with_gc if c[0] >= a.stall_us][:50]}
    print(f"gc_probe ({a.gc}): {len(calls)} timed calls in {len(blocks)} blocks; {tracked} tracked objects at the end")
    for g, s in per_gen.items():
        print(f"  gen {g}: {s['count']} collections, {s['total_ms']:.1f} ms, median {s['median_us']:.0f} µs, "
              f"max {s['max_us']:.0f} µs")
    for name, s in (("calls with a collection inside", g_with), ("calls without", g_without)):
        if s["n"]:
            print(f"  {name}: {s['n']}, excess over block fastest median {s['excess_median_us']:.1f} µs, "
                  f"mean {s['excess_mean_us']:.1f}, >= {a.stall_us:.0f} µs: {s['stalls']}")
    print(f"  stalls (>= {a.stall_us:.0f} µs over block fastest): {summary['stalls_total']}, "
          f"{summary['stalls_with_gc']} with a collection inside")
    with open(a.log, "w") as f:
        json.dump({"summary": summary, "events": events[:20000],
                   "calls": [(round(c[0], 2), c[1], c[2]) for c in calls]}, f)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
