"""How well "each SM's intake" explains the tuner's small- and mid-M timings (a model fitted to runs on file).

    python bench/intake_fit.py bench/runs/<run>_tune_full.json [--max-m 1024] [--sm-count 132]

Every config of a `python -m vlattn.tune` run is a grid of CTAs; a CTA of tile BM x BN over a K range of k_cta
columns pulls (BM + BN) * k_cta * 2 bytes of bf16 operands into its SM, whatever the cluster multicast does at L2.
The model fitted here (least squares over every timed persistent or parallel-split config of the run's shapes with
M <= --max-m; stream-K's own decomposition and swapped configs are left out, their grids are not this simple):

    us = fixed + waves * cta_bytes / rate + [split] * (launch + partial_bytes / partial_rate)

where waves = ceil(CTAs / SMs) and a split config's fp32 partials are M x N x splits x 4 bytes, written by the GEMM
and read by its reduction. It prints the fit (fixed µs, the per-CTA rate in GB/s, the split-K reduction's launch
and rate), R^2, the same fit on the run's total bytes instead (an aggregate-bandwidth model, for contrast) and the worst
residuals. A reading of the runs on file, not a dispatch rule: bench/NOTES.md (seventy-second session) has the
numbers and what they say about tile choice at small M.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from vlattn.gemm_configs import BY_NAME, parse_name  # noqa: E402


def grid_rows(timings: dict, max_m: int, sm_count: int) -> list[dict]:
    """One row per timed config: the model's inputs and the measured µs. Configs this tree no longer defines
    (older runs) are left out, with bare stream-K and swapped ones (their grids are not one tile per output tile)."""
    rows = []
    for key, t in timings.items():
        m, n, k = t["m"], t["n"], t["k"]
        if m > max_m:
            continue
        for name, us in t["us"].items():
            try:
                base, splits = parse_name(name)
            except ValueError:
                continue
            config = BY_NAME.get(base)
            if us is None or config is None or config.swap_ab or config.scheduler == "streamk" and splits == 1:
                continue
            bm, bn = config.out_tile()
            ctas = config.tile_count(m, n) * splits
            cta_bytes = (bm + bn) * (k / splits) * 2
            rows.append({"shape": key, "config": name, "us": us, "split": splits > 1,
                         "partial_mb": m * n * splits * 4 / 1e6 if splits > 1 else 0.0,
                         "path_mb": math.ceil(ctas / sm_count) * cta_bytes / 1e6, "total_mb": ctas * cta_bytes / 1e6})
    return rows


def fit(rows: list[dict], column: str) -> tuple[np.ndarray, float, np.ndarray]:
    """Least squares of us on [1, column, split, partial MB]: (coefficients, R^2, residuals)."""
    x = np.array([[1.0, r[column], float(r["split"]), r["partial_mb"]] for r in rows])
    y = np.array([r["us"] for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    r2 = 1.0 - float((resid ** 2).sum() / ((y - y.mean()) ** 2).sum())
    return coef, r2, resid


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a python -m vlattn.tune JSON")
    ap.add_argument("--max-m", type=int, default=1024)
    ap.add_argument("--sm-count", type=int, default=None, help="default: the run's meta.sm_count, else 132")
    ap.add_argument("--worst", type=int, default=8)
    args = ap.parse_args(argv)
    with open(args.run) as f:
        run = json.load(f)
    if "timings" not in run:
        raise SystemExit(f"{args.run}: no 'timings': not a python -m vlattn.tune output")
    sm_count = args.sm_count or run.get("meta", {}).get("sm_count", 132)
    rows = grid_rows(run["timings"], args.max_m, sm_count)
    if len(rows) < 4:
        raise SystemExit(f"{args.run}: {len(rows)} timed configs with M <= {args.max_m}: too few to fit")
    coef, r2, resid = fit(rows, "path_mb")
    print(f"{len(rows)} timings (M <= {args.max_m}, {sm_count} SMs)")
    print(f"per-CTA intake: us = {coef[0]:.2f} + waves x CTA MB / {1e3 / coef[1]:.1f} GB/s"
          f" + split ({coef[2]:.2f} + partial MB x {coef[3]:.3f})   R^2 {r2:.3f}")
    agg, agg_r2, _ = fit(rows, "total_mb")
    print(f"aggregate bytes: us = {agg[0]:.2f} + total MB / {1 / agg[1]:.2f} TB/s"
          f" + split ({agg[2]:.2f} + partial MB x {agg[3]:.3f})   R^2 {agg_r2:.3f}")
    for e, r in sorted(zip(resid, rows), key=lambda z: -abs(z[0]))[: args.worst]:
        print(f"  {e:+6.1f} us  {r['shape']:<18} {r['config']:<40} measured {r['us']:.1f}")


if __name__ == "__main__":
    main()
