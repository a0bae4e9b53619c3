"""Two layers runs side by side: whose movement is a change in × best PyTorch, ours or the baseline's?

    python3 bench/run_compare.py OLD.json NEW.json [--rows]

Both files are `vlattn-bench --mode layers` JSON (bench/runs/*_layers.json). Printed:
- per implementation, the geomean over the workloads both runs hold of NEW µs / OLD µs, with its min and max
  (below 1: NEW is faster), and the same for "best PyTorch" (the fastest baseline of each run);
- the geomean × best PyTorch of `vlattn:native` (eager) and `vlattn:native_graph` in each run. Its ratio is the
  ratio of the baseline's movement to ours, so the two lines above say which side moved it;
- with --rows, per workload: our eager and graphed µs, the eager − graph gap (the host path's share on small
  layers), the best PyTorch µs, in both runs, "host": the composite eager column's NEW / OLD µs, and "meter" (where
  both runs have it): the bench's host meter's NEW / OLD µs per launch;
- the host reading: on small layers the composite's eager calls are bound by the host (hundreds of µs of launches
  around GPU work that its graph replays do in ~100-200), so their NEW / OLD ratio measures how fast the host ran
  that workload's minutes in each process. Where our eager − graph gap moved by >= 3 µs and the composite's eager
  µs by >= 10%, it counts the workloads whose gap moved the same way as the host (wider on a slower host): if
  nearly all agree, the gap's movement is the host's, not our host path's.
Two runs on different machines or days differ by the machine as well (README, "How much one run moves"): decide
kernel changes by in-process A/Bs, and use this to read a new table against the last one.
"""
import argparse
import json
import math
import sys

NATIVE, GRAPH = "vlattn:native", "vlattn:native_graph"
HOST_PROXY = "composite"   # the composite's eager calls: host-bound on small layers
METER = "host meter"       # vlattn-bench's host meter (µs per launch), where both runs have it
GAP_MOVE_US, HOST_MOVE = 3.0, 1.10


def load(path):
    """{(workload, impl): µs median}, {workload: best PyTorch µs}, {impl: {workload: × best}}. Runs from the
    seventieth session on also hold the bench's host meter (µs per launch, per workload): under the key
    (workload, "host meter") in the first dict."""
    with open(path) as f:
        results = json.load(f)["results"]
    us, best, x_best = {}, {}, {}
    for r in results:
        if r.get("host_launch_us") is not None:
            us[(r["name"], METER)] = r["host_launch_us"]
        if r.get("us_median") is None:
            continue
        us[(r["name"], r["impl"])] = r["us_median"]
        if r["impl"] == NATIVE and r.get("best_pytorch_us") is not None:
            best[r["name"]] = r["best_pytorch_us"]
        if r.get("x_best_pytorch") is not None:
            x_best.setdefault(r["impl"], {})[r["name"]] = r["x_best_pytorch"]
    return us, best, x_best


def geomean(values):
    values = list(values)
    if not values:
        return float("nan")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratio_row(old, new):
    """geomean, min and max of new[k] / old[k] over the keys both hold; None if none."""
    ratios = [new[k] / old[k] for k in old if k in new and old[k] > 0]
    return (geomean(ratios), min(ratios), max(ratios), len(ratios)) if ratios else None


def compare(old_path, new_path):
    """The printed lines' numbers: {"impl": {impl: (geo, min, max, n)}, "best": (...), "x_best": {impl: (old, new)}}."""
    return compare_loaded(load(old_path), load(new_path))


def compare_loaded(old, new):
    """compare() on two load() results."""
    (old_us, old_best, old_x), (new_us, new_best, new_x) = old, new
    impls = sorted({i for _, i in old_us} & {i for _, i in new_us} - {METER},
                   key=lambda i: (i != NATIVE, i != GRAPH, i))
    out = {"impl": {}, "best": ratio_row(old_best, new_best), "x_best": {}}
    for impl in impls:
        row = ratio_row({w: v for (w, i), v in old_us.items() if i == impl},
                        {w: v for (w, i), v in new_us.items() if i == impl})
        if row:
            out["impl"][impl] = row
    for impl in (NATIVE, GRAPH):
        shared = set(old_x.get(impl, {})) & set(new_x.get(impl, {}))
        if shared:
            out["x_best"][impl] = (geomean(old_x[impl][w] for w in shared), geomean(new_x[impl][w] for w in shared))
    out["host"] = host_reading(old_us, new_us)
    return out


def gap(us, w):
    """Our eager − graph µs for workload w, or None."""
    e, g = us.get((w, NATIVE)), us.get((w, GRAPH))
    return None if e is None or g is None else e - g


def host_reading(old_us, new_us):
    """{"rows": {w: (gap old, gap new, host NEW / OLD)}, "agree": [w...], "disagree": [w...]}: the workloads where
    our eager − graph gap moved by >= GAP_MOVE_US and the composite's eager µs by >= HOST_MOVE (either way), split
    by whether the gap widened on a slower host / narrowed on a faster one (agree) or not."""
    rows, agree, disagree = {}, [], []
    for (w, impl) in new_us:
        if impl != NATIVE:
            continue
        ga, gb = gap(old_us, w), gap(new_us, w)
        ha, hb = old_us.get((w, HOST_PROXY)), new_us.get((w, HOST_PROXY))
        if ga is None or gb is None or not ha or not hb:
            continue
        host = hb / ha
        rows[w] = (ga, gb, host)
        if abs(gb - ga) >= GAP_MOVE_US and max(host, 1 / host) >= HOST_MOVE:
            (agree if (gb > ga) == (host > 1) else disagree).append(w)
    return {"rows": rows, "agree": agree, "disagree": disagree}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rows", action="store_true", help="per workload: eager, graphed, gap, best PyTorch")
    args = ap.parse_args(argv)
    old, new = load(args.old), load(args.new)
    c = compare_loaded(old, new)
    if not c["impl"]:
        print("run_compare: the two runs share no workload and implementation", file=sys.stderr)
        return 1
    print(f"NEW / OLD µs, geomean over the shared workloads (min-max):  OLD {args.old}  NEW {args.new}")
    for impl, (g, lo, hi, n) in c["impl"].items():
        print(f"  {impl:22s} {g:6.3f}  ({lo:.2f}-{hi:.2f}, {n} workloads)")
    if c["best"]:
        g, lo, hi, n = c["best"]
        print(f"  {'best PyTorch':22s} {g:6.3f}  ({lo:.2f}-{hi:.2f}, {n} workloads)")
    for impl, (o, n) in c["x_best"].items():
        print(f"x best PyTorch, {impl}: {o:.3f} -> {n:.3f}")
    h = c["host"]
    if h["agree"] or h["disagree"]:
        print(f"host: our eager - graph gap moved >= {GAP_MOVE_US:g} us where the {HOST_PROXY} eager column moved "
              f">= {HOST_MOVE - 1:.0%} on {len(h['agree']) + len(h['disagree'])} workloads; with the host (wider on a "
              f"slower host) on {len(h['agree'])}, against it on {len(h['disagree'])}"
              + (f": {', '.join(h['disagree'])}" if h["disagree"] else ""))
    if args.rows:
        (old_us, old_best, _), (new_us, new_best, _) = old, new
        names = [w for (w, i) in new_us if i == NATIVE and (w, NATIVE) in old_us]
        meter = any((w, METER) in old_us and (w, METER) in new_us for w in names)
        print(f"\n{'workload':28s} {'eager':>15s} {'graphed':>15s} {'gap':>11s} {'best PyTorch':>15s} {'host':>6s}"
              + (f" {'meter':>6s}" if meter else ""))
        for w in names:
            cells = []
            for key in ((w, NATIVE), (w, GRAPH)):
                a, b = old_us.get(key), new_us.get(key)
                cells.append(f"{a:7.1f} {b:7.1f}" if a is not None and b is not None else f"{'-':>15s}")
            ga, gb = (float("nan") if g is None else g for g in (gap(old_us, w), gap(new_us, w)))
            ba, bb = old_best.get(w, float("nan")), new_best.get(w, float("nan"))
            host = c["host"]["rows"].get(w)
            ma, mb = old_us.get((w, METER)), new_us.get((w, METER))
            print(f"{w:28s} {cells[0]} {cells[1]} {ga:5.1f} {gb:5.1f} {ba:7.1f} {bb:7.1f} "
                  + (f"{host[2]:6.2f}" if host else f"{'-':>6s}")
                  + ((f" {mb / ma:6.2f}" if ma and mb else f" {'-':>6s}") if meter else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
