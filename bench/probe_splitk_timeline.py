"""Where a split-K QKV launch's time goes, per CTA, from the kernel's development trace (vlattn.dev.splitk_trace):

    python3 bench/probe_splitk_timeline.py [--workload 0] [--calls 5] [--config ""]

007's workload `--workload` in sorted-by-SOL order (0 = B1 S128, the one the rule gives the split-K kernel),
called `--calls` times cold (L2 flushed by a 256 MB write first, as the bench does) and as many times warm (right
after a call). For each call, per CTA (µs, %globaltimer): its start after the earliest CTA's, the wait for its
first stage, its mainloop (first to last stage), the wait at the partial tiles' cluster barrier, the reduction, the
RoPE epilogue with the exit barrier, and its end; printed as min / median / p90 / max over the CTAs, medians over
the calls. Also the launch's span (earliest start to latest end) and the three latest CTAs.
"""
import argparse
import statistics

import torch

import vlattn
from vlattn import dev
from vlattn import workloads as W

PHASES = [("start", None, 0), ("first stage", 0, 1), ("mainloop", 1, 2), ("partials barrier", 2, 3),
          ("reduction", 3, 4), ("epilogue + exit", 4, 5)]


def summarize(rows: torch.Tensor) -> dict:
    t = rows[:, :6].double() / 1000.0  # µs
    t0 = t[:, 0].min()
    out = {}
    for name, a, b in PHASES:
        d = t[:, b] - (t0 if a is None else t[:, a])
        q = torch.quantile(d, torch.tensor([0.0, 0.5, 0.9, 1.0], dtype=torch.float64))
        out[name] = [float(v) for v in q]
    out["end"] = [float(v) for v in torch.quantile(t[:, 5] - t0, torch.tensor([0.0, 0.5, 0.9, 1.0], dtype=torch.float64))]
    out["span"] = float(t[:, 5].max() - t0)
    late = torch.argsort(t[:, 5], descending=True)[:3]
    out["latest"] = [(int(i), int(rows[i, 6]), int(rows[i, 7]), float(t[i, 5] - t0)) for i in late]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", type=int, default=0)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--config", default="")
    args = ap.parse_args()
    w = W.sorted_by_sol(W.load("007"))[args.workload]
    v = list(W.make_inputs(w, "cuda").values())
    call = lambda: vlattn.mrope_qkv(*v[:7], *v[8:10], config=args.config)  # noqa: E731
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    buf = torch.full((4096, dev.SPLITK_TRACE_SLOTS), -1, dtype=torch.int64, device="cuda")
    print(f"007 {w.axes} config={args.config or 'auto'} on {torch.cuda.get_device_name()}")
    call()
    torch.cuda.synchronize()
    dev.splitk_trace(buf)
    try:
        for mode in ("cold", "warm"):
            runs = []
            for _ in range(args.calls):
                buf.fill_(-1)
                if mode == "cold":
                    flush.fill_(1)
                else:
                    call()
                call()
                torch.cuda.synchronize()
                rows = buf[(buf[:, 0] >= 0)].cpu()
                if len(rows) == 0:
                    raise SystemExit("no CTA wrote the trace: this launch did not run a split-K kernel")
                runs.append(summarize(rows))
            print(f"== {mode}: {len(rows)} CTAs, span median {statistics.median(r['span'] for r in runs):.2f} µs "
                  f"(calls: {', '.join('%.2f' % r['span'] for r in runs)})")
            print(f"  {'phase (µs)':18s} {'min':>7s} {'median':>7s} {'p90':>7s} {'max':>7s}")
            for name in [p[0] for p in PHASES] + ["end"]:
                cols = [statistics.median(r[name][i] for r in runs) for i in range(4)]
                print(f"  {name:18s} " + " ".join(f"{c:7.2f}" for c in cols))
            print("  latest CTAs (last call): " + "; ".join(f"cta {i} sm {s} rank {k} at {e:.2f}"
                                                        for i, s, k, e in runs[-1]["latest"]))
    finally:
        dev.splitk_trace(None)


if __name__ == "__main__":
    main()
