"""Every kernel of the attention translation unit with its ptxas stack frame / spills and SASS size against
tests/test_codegen.py's budgets, in one table (the test stops at the first kernel over budget). Runs here (no GPU:
nvcc, the CUTLASS headers and readelf), ~40 s:

    PYTHONPATH=python:tests python bench/ptxas_table.py [csrc/attention/attention_sm90.cu]
"""
import pathlib
import sys
import tempfile

import test_codegen as T


def main(tu: str) -> None:
    out = pathlib.Path(tempfile.mkdtemp())
    report = T.ptxas_report(tu, out)
    sizes = T.sass_instructions(out / "tu.cubin")
    for name, (frame, stores, loads) in sorted(report.items()):
        key = T._attention_kernel(name)
        tag = f"attention_kernel{key}" if key else name[:70]
        budget = T.ATTENTION_SASS_BUDGET.get(key) if key else None
        print(f"{tag:72s} frame {frame:3d} B  spills {stores:3d}/{loads:3d} B  SASS {sizes.get(name)}  budget {budget}")
    print("wgmma serialized (C7513):", sorted(report.serialized) or "none")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "csrc/attention/attention_sm90.cu")
