"""Summary of a same-machine A/B made with bench/ab_env.sh and vlattn-bench's --json {v}_{r} files.

    python3 bench/ab_summary.py DIR/prefix_    # reads DIR/prefix_<value>_<round>.json

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


if __name__ == "__main__":
    main(sys.argv[1])
