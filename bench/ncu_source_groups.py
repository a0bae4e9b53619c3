"""Group an ncu SASS source page by execution count: the lines of one loop part run equally often.

    python3 bench/ncu_source_groups.py ncu_007_6_source.csv.gz [--groups 12]

Input: `ncu -i REPORT --page source --csv --print-source sass` (bench/ncu_mask_vs_causal.sh writes it,
gzip'd), one block per profiled kernel. Per kernel: warp instructions and stall samples in total, then the
execution-count groups with the most samples: lines, instructions, samples, the top opcodes (warp
instructions per line of the group), the top stall reasons, and the group's global loads (L1 requests,
L2 sectors). In the attention kernel a count is a loop part: e.g. CTAs x 8 consumer warps = once per
unit (first tile, epilogue), the steady loop's ZERO tiles, its diagonal tile, the producer warps.
"""
import argparse
import collections
import csv
import gzip

STALLS = ("stall_barrier", "stall_branch_resolving", "stall_dispatch", "stall_lg", "stall_long_sb", "stall_math",
          "stall_membar", "stall_mio", "stall_no_inst", "stall_not_selected", "stall_selected", "stall_short_sb",
          "stall_sleep", "stall_wait", "stall_drain", "stall_imc", "stall_misc", "stall_tex")


def num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def load(path: str) -> list[dict]:
    """[{name, rows}] per kernel block; a repeated block (same name, same rows) is kept once."""
    kernels, cur, header = [], None, None
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                cur = {"name": row[1], "rows": []}
                kernels.append(cur)
                header = None
            elif row[0] == "Address":
                header = row
            elif header and cur is not None:
                cur["rows"].append(dict(zip(header, row)))
    unique, seen = [], set()
    for k in kernels:
        key = (k["name"], len(k["rows"]), sum(num(r.get("Instructions Executed", "0")) for r in k["rows"]))
        if key not in seen:
            seen.add(key)
            unique.append(k)
    return unique


def opcode(source: str) -> str:
    parts = source.strip().split()
    if not parts:
        return "?"
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--groups", type=int, default=12)
    args = ap.parse_args()
    for k in load(args.csv):
        rows = k["rows"]
        total_i = sum(num(r["Instructions Executed"]) for r in rows)
        total_s = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows)
        print(f"{k['name']}\n  {total_i / 1e6:.2f}M warp instructions, {total_s:.0f} stall samples, {len(rows)} SASS lines")
        groups = collections.defaultdict(lambda: {"lines": 0, "instr": 0.0, "samples": 0.0, "ops": collections.Counter(),
                                                  "stalls": collections.Counter(), "l1": 0.0, "l2": 0.0})
        for r in rows:
            count = int(num(r["Instructions Executed"]))
            g = groups[count]
            g["lines"] += 1
            g["instr"] += count
            g["samples"] += num(r["Warp Stall Sampling (All Samples)"])
            g["ops"][opcode(r["Source"])] += 1
            for s in STALLS:
                g["stalls"][s[6:]] += num(r.get(s, "0"))
            g["l1"] += num(r.get("L1 Tag Requests Global", "0"))
            g["l2"] += num(r.get("L2 Theoretical Sectors Global", "0"))
        for count, g in sorted(groups.items(), key=lambda kv: -kv[1]["samples"])[:args.groups]:
            ops = ", ".join(f"{o} {n}" for o, n in g["ops"].most_common(6))
            stalls = ", ".join(f"{s} {v:.0f}" for s, v in g["stalls"].most_common(4) if v > 0)
            print(f"  x{count:<7d} lines {g['lines']:5d}  instr {g['instr'] / 1e6:6.2f}M  samples {g['samples']:7.0f}"
                  f"  | {ops}  | {stalls}  | global L1 req {g['l1']:.3g}, L2 sectors {g['l2']:.3g}")


if __name__ == "__main__":
    main()
