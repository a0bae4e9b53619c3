"""Two `python -m vlattn.tune` outputs side by side: would the first GPU's table serve the second?

    python bench/compare_tuned.py OTHER.json [--base python/vlattn/data/gemm_tuned_h200.json]

Per "M,N,K" (with and without bias summed, as the tuner's entries are), on OTHER's timings: the config
the committed dispatch runs there (the base table's entry, else the analytic rule's pick), OTHER's own
fastest config, and how much slower the dispatched one is than that fastest. A shape is flagged when the
loss reaches the tuner's own bar for an entry (MIN_GAIN, 5%). The summary says whether a table of OTHER's
own is worth carrying: the dispatched picks' summed time against the fastest configs' and cuBLAS's.
CPU only (reads JSON; imports vlattn.dispatch, which needs torch but no GPU).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from vlattn.dispatch import analytic_config  # noqa: E402
from vlattn.tune import _CUBLAS, MIN_GAIN, best_entries, shape_totals  # noqa: E402


def compare(base: dict, other: dict) -> tuple[list[dict], dict]:
    sm_count = other["meta"].get("sm_count", 132)
    entries = base.get("entries", {})
    rows = []
    totals = shape_totals(other["timings"])  # the tuner's own per-shape sums (bias variants together)
    for key in sorted(totals, key=lambda key: [int(v) for v in key.split(",")]):
        row = {name: us for name, us in totals[key].items() if name != _CUBLAS}
        cublas = totals[key].get(_CUBLAS, float("nan"))
        m, n, k = (int(v) for v in key.split(","))
        dispatched = entries.get(key)
        source = "table"
        if dispatched is None or dispatched not in row:
            dispatched, source = analytic_config(m, n, k, sm_count, row.keys()), "rule"
        best = min(row, key=row.get)
        loss = row[dispatched] / row[best] if dispatched in row else float("inf")
        # A dispatched config missing from OTHER's timings (not built there, or no rule config at all) reads as
        # NaN and is flagged, rather than crashing the report.
        rows.append({"shape": key, "dispatched": dispatched, "source": source,
                     "dispatched_us": row.get(dispatched, float("nan")),
                     "best": best, "best_us": row[best], "loss": loss, "cublas_us": cublas,
                     "flag": loss >= MIN_GAIN})
    own = best_entries(other["timings"], sm_count)
    same = sum(1 for key, name in entries.items() if own.get(key, None) == name)
    summary = {
        "shapes": len(rows),
        "flagged": [r["shape"] for r in rows if r["flag"]],
        "dispatched_sum_us": sum(r["dispatched_us"] for r in rows),
        "best_sum_us": sum(r["best_us"] for r in rows),
        "cublas_sum_us": sum(r["cublas_us"] for r in rows),
        "base_entries": len(entries),
        "base_entries_reproduced": same,
        "own_entries": own,
    }
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("other", type=Path, help="a tuner JSON from another GPU (or another run)")
    p.add_argument("--base", type=Path, default=ROOT / "python" / "vlattn" / "data" / "gemm_tuned_h200.json")
    a = p.parse_args(argv)
    base, other = json.loads(a.base.read_text()), json.loads(a.other.read_text())
    rows, s = compare(base, other)
    print(f"base {a.base.name} ({base['meta'].get('gpu')}, {base['meta'].get('date')}); "
          f"timings {a.other.name} ({other['meta'].get('gpu')}, {other['meta'].get('date')}, commit "
          f"{other['meta'].get('commit')})")
    print(f"{'M,N,K':>16} {'dispatched (source)':>44} {'µs':>8} {'fastest there':>36} {'µs':>8} {'loss':>6} {'cuBLAS':>8}")
    for r in rows:
        d = f"{r['dispatched']} ({r['source']})"
        print(f"{r['shape']:>16} {d:>44} {r['dispatched_us']:8.1f} {r['best']:>36} {r['best_us']:8.1f} "
              f"{r['loss']:6.3f} {r['cublas_us']:8.1f}{'  <- >= ' + format(MIN_GAIN, '.2f') if r['flag'] else ''}")
    print(f"sums over {s['shapes']} shapes (bias variants summed): dispatched {s['dispatched_sum_us']:.1f} µs, "
          f"fastest per shape {s['best_sum_us']:.1f} ({s['best_sum_us'] / s['dispatched_sum_us'] - 1:+.1%}), "
          f"cuBLAS {s['cublas_sum_us']:.1f} ({s['cublas_sum_us'] / s['dispatched_sum_us'] - 1:+.1%})")
    print(f"base entries whose config the other GPU's own table would keep: {s['base_entries_reproduced']} of "
          f"{s['base_entries']}; flagged shapes (dispatched >= {MIN_GAIN:.2f}x the fastest): "
          f"{len(s['flagged'])} {s['flagged']}")
    print(f"the other GPU's own entries: {json.dumps(s['own_entries'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
