"""How much one layers run's × best PyTorch moves between its interleaved rounds.

    PYTHONPATH=python python3 bench/round_spread.py bench/runs/<run>_layers.json [--rounds N] [--below 1.35]
        [--impl vlattn:native] [--positions]

The bench times each column's calls in --rounds interleaved blocks (``us_all`` keeps them in order, block after
block, of the sizes vlattn.bench.round_sizes gives). For every workload this prints the run's × best
(medians over all calls), the × best of each round alone (the same columns, that round's calls) and, per round, the
impl's median minus its graph replay's (the eager - graph gap): if the rounds disagree by more than the margin a
target is judged on, one run cannot decide that target. --rounds defaults to the run's own (its
``meta.args.rounds``, else 3). The best PyTorch column of a round is chosen by the bench's own rule (best_pytorch).
--positions prints instead, per workload and column, the median of the calls at each place in their blocks (first
timed call of a block, second, ...): a first call slower than the rest is the column's state after another column
ran (the forty-fourth session's run, one warm-up call per block: 10-20% on the host-bound layers' eager calls,
8.5% for torch.compile's in the median workload).
"""
import argparse
import json
import statistics

from vlattn.bench import best_pytorch, round_sizes  # the bench's best-PyTorch rule; how it split a column's calls


def blocks(us_all: list, rounds: int):
    """A column's timed calls, block by block (the sizes the bench split them into: round_sizes)."""
    start = 0
    for n in round_sizes(len(us_all), rounds):
        yield us_all[start:start + n]
        start += n


def per_round(us_all: list, rounds: int) -> list:
    return [statistics.median(b) for b in blocks(us_all, rounds)]


def by_position(us_all: list, rounds: int) -> list:
    """Median of the calls at each place in their blocks (a shorter block adds nothing to its missing places)."""
    places: list = []
    for b in blocks(us_all, rounds):
        for i, t in enumerate(b):
            if i == len(places):
                places.append([])
            places[i].append(t)
    return [statistics.median(p) for p in places]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--below", type=float, default=None, help="only workloads whose × best is below this")
    ap.add_argument("--impl", default="vlattn:native")
    ap.add_argument("--graph-impl", default="vlattn:native_graph",
                    help="also print the impl's median minus this column's, per round (the eager - graph gap)")
    ap.add_argument("--positions", action="store_true",
                    help="per column, the median of the calls at each place in their blocks")
    args = ap.parse_args()
    data = json.load(open(args.json))
    rounds = args.rounds or int((data.get("meta", {}).get("args") or {}).get("rounds") or 3)
    by: dict = {}
    for rec in data["results"]:
        if rec.get("us_all"):
            by.setdefault(rec["name"], {})[rec["impl"]] = rec
    if args.positions:
        print(f"{rounds} rounds; µs, median of the calls at each place in their blocks (1st timed call, 2nd, ...)")
        for name, cols in by.items():
            for impl, rec in cols.items():
                meds = by_position(rec["us_all"], rounds)
                print(f"{name:28s} {impl:22s} " + " ".join(f"{m:9.1f}" for m in meds) +
                      f"   1st / last {meds[0] / meds[-1]:.3f}")
        return
    print(f"{rounds} rounds; × best of the whole run, then of each round alone; spread = max / min - 1")
    for name, cols in by.items():
        ours = cols.get(args.impl)
        if ours is None or ours.get("x_best_pytorch") is None:
            continue
        if args.below is not None and ours["x_best_pytorch"] >= args.below:
            continue
        mine = per_round(ours["us_all"], rounds)
        by_round = {impl: per_round(rec["us_all"], rounds) for impl, rec in cols.items()}
        xs = []
        for r in range(len(mine)):  # the bench's own rule for the best PyTorch column, on round r's medians
            _, best = best_pytorch([dict(rec, us_median=by_round[impl][r] if r < len(by_round[impl]) else None)
                                    for impl, rec in cols.items()])
            xs.append(best / mine[r] if best else float("nan"))
        if not xs:
            continue
        spread = max(xs) / min(xs) - 1
        line = (f"{name:28s} {ours['x_best_pytorch']:.3f}  rounds " + " ".join(f"{x:.3f}" for x in xs) +
                f"  spread {100 * spread:.0f}%")
        graph = cols.get(args.graph_impl)
        if graph is not None:
            g = per_round(graph["us_all"], rounds)
            if len(g) == len(mine):
                line += "  gap us " + " ".join(f"{m - q:+.0f}" for m, q in zip(mine, g))
        print(line)


if __name__ == "__main__":
    main()
