"""Write the table the H100 predicts for the H200 (sixty-fifth session): the committed
python/vlattn/data/gemm_tuned_h200.json plus the three parallel split-K entries the H100's tuner picked three times
(bench/runs/2026-12-07_*_h100_tune_*). Deterministic, so the output is byte-identical to the pred65 branch's
table and its prebuilt module matches (call65.sh runs it on the device; NOTES says how pred65 is made from it).

    python3 bench/pending/pred65_table.py [OUT]     # default: overwrite the committed table in place
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "python" / "vlattn" / "data" / "gemm_tuned_h200.json"
ADD = {"128,512,3584": "t64x64x64_c1x1_pingpong_psplit/splitk4",
       "256,512,3584": "t64x64x64_c1x1_pingpong_psplit/splitk4",
       "392,1024,4096": "t64x128x64_c1x1_pingpong_psplit/splitk2"}


def main(out: pathlib.Path) -> None:
    d = json.loads(TABLE.read_text())
    d["entries"] = dict(sorted({**d["entries"], **ADD}.items()))
    d["meta"]["psplit_entries"] = {
        "added": "2026-12-07 (sixty-fifth session)",
        "rule": "the H200 tuner run of this session (bench/runs/*_h200_tune_full*) picked a parallel split-K config "
                "for each of these three shapes with >= 5% over the best whole-K config; the entries are the "
                "H100-measured winners (2026-12-07_a1f4d40_h100_tune_psplit_full.json), the split counts within "
                "noise of each other on both GPUs",
        "shapes": ADD}
    out.write_text(json.dumps(d, indent=1) + "\n")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else TABLE)
