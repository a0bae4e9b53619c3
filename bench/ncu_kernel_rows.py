"""One row per kernel launch of an `ncu --metrics ...` log: name (CUTLASS kernels condensed to "cutlass" and their
cluster / tile shapes), grid, and the value of each metric asked for, in the order given.

    python3 bench/ncu_kernel_rows.py LOG --metrics gpu__time_duration.sum,sm__cycles_elapsed.max
        [--match qkv,cutlass] [--last-of 3] [--units]

--match keeps the kernels whose condensed name contains one of the words; --last-of N prints only the last 1/N of
the rows (a script that ran its op N times reads the last call's kernels); --units prints each value with its unit.
Used by bench/ncu_qkv_kernels.sh and bench/ncu_qkv_pass.sh.
"""
import argparse
import re

HEADER = re.compile(r"^  (\S.*?)\s+\((\d+), (\d+), (\d+)\)x\((\d+), 1, 1\)")
CUTE_SHAPE = re.compile(r"cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)>")


EPILOGUES = {"RopeStoreEpilogue": " rope-epi"}  # our CUTLASS epilogues


def kernel_name(raw: str) -> str:
    if "GemmUniversal" in raw or "cutlass" in raw:
        tag = "".join(t for key, t in EPILOGUES.items() if key in raw)
        return "cutlass " + " ".join("x".join(t) for t in CUTE_SHAPE.findall(raw)[:2]) + tag
    return re.sub(r"\(.*", "", raw)[:70]


def rows(path: str, metrics: list[str], units: bool) -> list[list[str]]:
    out, row = [], None
    for line in open(path):
        m = HEADER.match(line)
        if m:
            row = [kernel_name(m.group(1)), "x".join(m.group(i) for i in (2, 3, 4))] + [""] * len(metrics)
            out.append(row)
            continue
        if row is not None:
            for k, key in enumerate(metrics):
                if key in line:
                    unit, value = line.split()[-2:]
                    row[2 + k] = f"{value} {unit}" if units else value
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log")
    p.add_argument("--metrics", required=True, help="comma-separated ncu metric names")
    p.add_argument("--match", default="", help="comma-separated words; keep kernels whose name has one")
    p.add_argument("--last-of", type=int, default=1)
    p.add_argument("--units", action="store_true")
    a = p.parse_args()
    found = rows(a.log, a.metrics.split(","), a.units)
    n = len(found) // a.last_of if a.last_of > 1 else len(found)
    words = [w for w in a.match.split(",") if w]
    for r in found[-n:] if n else found:
        if not words or any(w in r[0] for w in words):
            print("   ", *r)


if __name__ == "__main__":
    main()
