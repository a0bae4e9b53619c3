"""Screen the dispatch rules against their own switches: which workloads run faster on another value.

    python3 bench/rule_audit.py RUN.json [RUN.json ...] [--min-gain 0.02]

Each RUN.json is one `vlattn-bench --mode layers --switch NAME=default,alt1,...` run (bench/rule_audit.sh runs
one per switch over all 32 workloads), the rule's value first. Per switch, for every alternative value, the
workloads whose graph-replay median AND eager median are both at least --min-gain below the rule's, then the
spread of the ratios over all workloads (a switch that changes nothing on a workload reads ~1.000 there: the
run's own noise). A screen, not a verdict: a hit is a candidate for an in-process A/B with more calls (and on an
H200 for rules measured there).
"""
import argparse
import json
import re
import statistics
from collections import defaultdict


def load(path):
    with open(path) as f:
        data = json.load(f)
    cells = defaultdict(dict)  # workload -> (kind, value) -> median us
    switch, values = None, []
    for r in data["results"]:
        m = re.match(r"^vlattn:(native|native_graph)\[(\w+)=(-?\d+)\]$", r["impl"])
        if not m or r.get("us_median") is None:
            continue
        kind, switch, value = m.group(1), m.group(2), int(m.group(3))
        if value not in values:
            values.append(value)
        cells[r["name"]][(kind, value)] = r["us_median"]
    order = [int(v) for v in data.get("meta", {}).get("args", {}).get("switch", "").split("=")[-1].split(",") if v]
    if order and set(order) == set(values):
        values = order  # the command line's order: the rule's value first
    return switch, values, cells


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--min-gain", type=float, default=0.02)
    a = p.parse_args()
    for path in a.runs:
        switch, values, cells = load(path)
        if switch is None:
            print(f"{path}: no switch columns")
            continue
        base = values[0]
        print(f"== {switch}: rule value {base}, alternatives {values[1:]} ({path})")
        for alt in values[1:]:
            hits, ratios = [], []
            for name, c in sorted(cells.items()):
                try:
                    g = c[("native_graph", alt)] / c[("native_graph", base)]
                    e = c[("native", alt)] / c[("native", base)]
                except KeyError:
                    continue
                ratios.append(g)
                if g <= 1 - a.min_gain and e <= 1 - a.min_gain:
                    hits.append(f"{name} graph {c[('native_graph', base)]:.1f}->{c[('native_graph', alt)]:.1f} "
                                f"({g:.3f}), eager {c[('native', base)]:.1f}->{c[('native', alt)]:.1f} ({e:.3f})")
            if ratios:
                q = statistics.quantiles(ratios, n=10) if len(ratios) >= 10 else [min(ratios), max(ratios)]
                print(f"  {switch}={alt}: graph ratio to {base} min {min(ratios):.3f} p10 {q[0]:.3f} median "
                      f"{statistics.median(ratios):.3f} p90 {q[-1]:.3f} max {max(ratios):.3f} over {len(ratios)}")
            for h in hits:
                print(f"    faster: {h}")
            if not hits:
                print(f"    no workload faster by >= {a.min_gain:.0%} in both graph replay and eager")


if __name__ == "__main__":
    main()
