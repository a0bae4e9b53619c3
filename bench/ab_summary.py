"""Summary of a same-machine A/B: bench/ab_env.sh's separate processes, or one vlattn-bench --switch run.

    python3 bench/ab_summary.py DIR/prefix_    # reads DIR/prefix_<value>_<round>.json (ab_env.sh)
    python3 bench/ab_summary.py RUN.json       # one `--switch NAME=v1,v2` run: its columns "impl[NAME=v]"

Per workload and impl: the median µs of each round per value, then the median over rounds of each value
and the ratio of every value to the first one (values in the order they sort in the file names, rounds
alternate A B A B in ab_env.sh, so machine drift shows in both arms).
"""
import glob
import json
import re
import statistics
import sys
from collections import defaultdict


def main(prefix: str) -> None:
    runs = defaultdict(lambda: defaultdict(dict))  # (workload, impl) -> value -> round -> us
    values = []
    for path in sorted(glob.glob(prefix + "*.json")):
        m = re.match(re.escape(prefix) + r"(.+)_(\d+)\.json$", path)
        if not m:
            continue
        value, rnd = m.group(1), int(m.group(2))
        if value not in values:
            values.append(value)
        with open(path) as f:
            for r in json.load(f)["results"]:
                if r.get("us_median") is not None:
                    runs[(r["name"], r["impl"])][value][rnd] = r["us_median"]
    if not runs:
        sys.exit(f"no {prefix}*.json results")
    head = " ".join(f"{v:>22s}" for v in values)
    print(f"{'workload':32s} {'impl':22s} {head}  ratios to {values[0]}")
    for (name, impl), by_value in sorted(runs.items()):
        cells, medians = [], []
        for v in values:
            rounds = by_value.get(v, {})
            med = statistics.median(rounds.values()) if rounds else float("nan")
            medians.append(med)
            cells.append(f"{med:8.1f} ({'/'.join(f'{rounds[k]:.0f}' for k in sorted(rounds))})".rjust(22))
        ratios = " ".join(f"{m / medians[0]:.3f}" for m in medians[1:])
        print(f"{name:32s} {impl:22s} {' '.join(cells)}  {ratios}")


def main_switch(path: str) -> None:
    """Per workload and impl: each switch value's median over all its timed calls, the medians of its
    rounds (the bench splits a column's calls over --rounds, the columns interleaved), and the ratio of
    every value to the first."""
    with open(path) as f:
        data = json.load(f)
    from vlattn.bench import round_sizes  # how the bench split a column's calls (needs PYTHONPATH=python)

    n_rounds = int(data.get("meta", {}).get("args", {}).get("rounds", 1) or 1)
    runs = defaultdict(dict)  # (workload, impl) -> value -> us_all
    values, switch = [], None
    for r in data["results"]:
        m = re.match(r"^(.*)\[(\w+)=(-?\d+)\]$", r["impl"])
        if not m or not r.get("us_all"):
            continue
        switch = m.group(2)
        value = int(m.group(3))
        if value not in values:
            values.append(value)
        runs[(r["name"], m.group(1))][value] = r["us_all"]
    if not runs:
        sys.exit(f"{path}: no columns of a --switch run (impl keys 'name[SWITCH=value]')")
    print(f"{switch}: values {values}, {n_rounds} rounds; median (round medians)")
    print(f"{'workload':32s} {'impl':20s} " + " ".join(f"{v:>26d}" for v in values) + f"  ratios to {values[0]}")
    for (name, impl), by_value in sorted(runs.items()):
        cells, medians = [], []
        for v in values:
            us = by_value.get(v, [])
            med = statistics.median(us) if us else float("nan")
            medians.append(med)
            per_round, i = [], 0
            for n in round_sizes(len(us), n_rounds):
                per_round.append(statistics.median(us[i:i + n]))
                i += n
            cells.append(f"{med:8.1f} ({'/'.join(f'{x:.0f}' for x in per_round)})".rjust(26))
        ratios = " ".join(f"{m / medians[0]:.3f}" for m in medians[1:])
        print(f"{name:32s} {impl:20s} {' '.join(cells)}  {ratios}")


if __name__ == "__main__":
    if sys.argv[1].endswith(".json"):
        main_switch(sys.argv[1])
    else:
        main(sys.argv[1])
