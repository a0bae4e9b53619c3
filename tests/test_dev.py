"""Development switches (vlattn.dev, csrc/launch/dev_switch.h) and the bench's in-process A/B (--switch).

The switch table, its environment start and in-process changes run on the CPU (the compiled extension
only); that a change reaches the dispatch of the next call is checked on the GPU by the kernels it
launches (torch.profiler's names), with the same bits in both arms.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vlattn
from vlattn import bench, dev

from conftest import requires_ext, requires_sm90

EXPECTED = {
    "VLATTN_QKV_GEMM_MIN_M", "VLATTN_QKV_GEMM_STREAMS", "VLATTN_QKV_PAIR_WAVES",
    "VLATTN_QKV_TUNED",
    "VLATTN_QKV_ROPE_MERGE", "VLATTN_QKV_ROPE_TABLE", "VLATTN_QKV_PASS_WIDTH", "VLATTN_QKV_GEMM_EPI",
    "VLATTN_QKV_EPI_POS1D",
    "VLATTN_QKV_PLAN", "VLATTN_QKV_GROUPED_MIN_M", "VLATTN_QKV_GROUPED_MAX_M", "VLATTN_QKV_V_TOKEN_MAJOR", "VLATTN_ATTN_SIMPLE",
    "VLATTN_ATTN_MASK_SMEM", "VLATTN_ATTN_LEAN_ZERO", "VLATTN_ATTN_PACK", "VLATTN_ATTN_PERSISTENT", "VLATTN_ATTN_BN",
    "VLATTN_ATTN_RESIDENT", "VLATTN_ATTN_TAIL_SPLIT", "VLATTN_ATTN_DIAG_HALF", "VLATTN_ATTN_TMA_O", "VLATTN_ATTN_WALK_CACHE",
    "VLATTN_PDL", "VLATTN_ATTN_SPLIT_KEYS", "VLATTN_LAYER_SCRATCH",
}


ROOT = Path(__file__).resolve().parents[1]
ENV_DOC = ROOT / "docs" / "environment.md"
# Where vlattn reads its variables: the extension, the package, the build, the device script, the tests' conftest.
SOURCES = [*sorted((ROOT / "csrc").rglob("*")), *sorted((ROOT / "python" / "vlattn").glob("*.py")), ROOT / "setup.py",
           ROOT / "scripts" / "gpu_check.sh", ROOT / "tests" / "conftest.py"]
VAR = re.compile(r"\bVLATTN_[A-Z0-9_]*[A-Z0-9]\b")


def _variables_in_sources() -> dict[str, str]:
    """{VLATTN_* name: first file naming it} over SOURCES, less the C++ macros (#define VLATTN_...)."""
    names: dict[str, str] = {}
    macros: set[str] = set()
    for path in SOURCES:
        if not path.is_file() or path.suffix not in {".h", ".cuh", ".cu", ".cpp", ".py", ".sh"}:
            continue
        text = path.read_text()
        macros.update(re.findall(r"#define\s+(VLATTN_[A-Z0-9_]+)", text))
        for name in VAR.findall(text):
            names.setdefault(name, str(path.relative_to(ROOT)))
    return {n: f for n, f in names.items() if n not in macros}


def _documented() -> dict[str, list[str]]:
    """{name: its table row's cells} for every row of docs/environment.md's tables that starts with a variable."""
    rows = {}
    for line in ENV_DOC.read_text().splitlines():
        m = re.match(r"\| `(VLATTN_[A-Z0-9_]+)` \|", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} has two rows in docs/environment.md"
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    return rows


def test_environment_doc_names_exactly_the_variables_the_sources_read():
    used, documented = _variables_in_sources(), set(_documented())
    missing = {n: f for n, f in used.items() if n not in documented}
    assert not missing, f"named in the sources but not in docs/environment.md: {missing}"
    stale = documented - set(used)
    assert not stale, f"docs/environment.md documents variables no source names: {sorted(stale)}"
    assert EXPECTED <= documented


@requires_ext
def test_environment_doc_gives_the_compiled_switch_defaults():
    """The dispatch-switch table (variable | values | default | ...) against the extension's own table."""
    rows = _documented()
    for name, entry in dev.switches().items():
        assert name in rows, name
        assert rows[name][2] == str(entry["default"]), (name, rows[name][2], entry["default"])


def _switches_in_subprocess(env: dict) -> dict:
    """dev.switches() in a fresh process whose VLATTN_* variables are exactly ``env``."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(vlattn.__file__)))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VLATTN_")}
    clean.update(env, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", "import json; from vlattn import dev; print(json.dumps(dev.switches()))"],
                         env=clean, check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


@requires_ext
def test_table_starts_at_defaults_without_the_environment():
    table = _switches_in_subprocess({})
    assert set(table) == EXPECTED
    for name, entry in table.items():
        assert entry["value"] == entry["default"], name
    assert table["VLATTN_QKV_GEMM_EPI"]["default"] == 1 and table["VLATTN_ATTN_PERSISTENT"]["default"] == 1
    assert table["VLATTN_PDL"]["default"] == 1 and table["VLATTN_ATTN_SIMPLE"]["default"] == 0


@requires_ext
def test_environment_sets_the_start_values():
    table = _switches_in_subprocess({"VLATTN_ATTN_PERSISTENT": "2", "VLATTN_PDL": "0", "VLATTN_QKV_PLAN": "yes",
                                     "VLATTN_QKV_GEMM_EPI": "x", "VLATTN_QKV_GEMM_MIN_M": "4096",
                                     "VLATTN_ATTN_BN": ""})
    assert table["VLATTN_ATTN_PERSISTENT"]["value"] == 2
    assert table["VLATTN_PDL"]["value"] == 0            # a flag: off when it starts with '0'
    assert table["VLATTN_QKV_PLAN"]["value"] == 1       # on otherwise
    assert table["VLATTN_QKV_GEMM_EPI"]["value"] == 1   # not a number: the default (the rule)
    assert table["VLATTN_QKV_GEMM_MIN_M"]["value"] == 4096
    assert table["VLATTN_ATTN_BN"]["value"] == 0        # empty: the default


@requires_ext
def test_set_returns_the_previous_value_and_the_context_restores():
    name = "VLATTN_ATTN_PERSISTENT"
    start = dev.get_switch(name)
    try:
        assert dev.set_switch(name, 2) == start
        assert dev.get_switch(name) == 2
        with dev.switch(name, 0):
            assert dev.get_switch(name) == 0
        assert dev.get_switch(name) == 2
        with pytest.raises(RuntimeError, match="boom"):
            with dev.switch(name, 0):
                raise RuntimeError("boom")
        assert dev.get_switch(name) == 2
        assert dev.set_switch("VLATTN_PDL", 5) in (0, 1)
        assert dev.get_switch("VLATTN_PDL") == 1  # flags hold 0 or 1
    finally:
        dev.set_switch(name, start)
        dev.set_switch("VLATTN_PDL", 1)


@requires_ext
def test_bad_switch_names_and_values_are_clear_errors():
    with pytest.raises(ValueError, match="unknown switch 'VLATTN_NOPE'.*VLATTN_ATTN_PERSISTENT"):
        dev.set_switch("VLATTN_NOPE", 1)
    with pytest.raises(ValueError, match="unknown switch 'VLATTN_NOPE'"):
        dev.get_switch("VLATTN_NOPE")
    with pytest.raises(TypeError, match="value must be an int"):
        dev.set_switch("VLATTN_PDL", True)
    with pytest.raises(TypeError, match="value must be an int"):
        dev.set_switch("VLATTN_PDL", "1")


def test_parse_switch():
    assert bench.parse_switch("VLATTN_QKV_GEMM_EPI=1,4") == ("VLATTN_QKV_GEMM_EPI", [1, 4])
    assert bench.parse_switch(" VLATTN_PDL =0") == ("VLATTN_PDL", [0])
    for bad, match in [("VLATTN_PDL", "expected NAME=v1"), ("=1,2", "expected NAME=v1"), ("VLATTN_PDL=", "expected"),
                       ("VLATTN_PDL=a,1", "integers"), ("VLATTN_PDL=1,1", "given twice")]:
        with pytest.raises(ValueError, match=match):
            bench.parse_switch(bad)


@requires_ext
def test_switched_impl_sets_the_switch_for_the_build_and_every_call():
    name = "VLATTN_ATTN_BN"
    seen: list[tuple[str, int]] = []

    def build(case):
        seen.append(("build", dev.get_switch(name)))
        return bench.Runner(step=lambda: seen.append(("step", dev.get_switch(name))), result=lambda: None)

    inner = bench.Impl("vlattn:native", pytorch=False, needs_cuda=False, build=build, description="d")
    start = dev.get_switch(name)
    try:
        a, b = bench.switched_impl(inner, name, 128), bench.switched_impl(inner, name, 176)
        assert (a.key, b.key) == ("vlattn:native[ATTN_BN=128]", "vlattn:native[ATTN_BN=176]")
        ra, rb = a.build(None), b.build(None)
        assert dev.get_switch(name) == start  # the build leaves the switch as it found it
        ra.step(), rb.step(), ra.step()
        assert seen == [("build", 128), ("build", 176), ("step", 128), ("step", 176), ("step", 128)]
    finally:
        dev.set_switch(name, start)


def test_switch_flag_is_a_usage_error_when_malformed(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--switch", "VLATTN_PDL"])
    assert exc.value.code == 2
    assert "expected NAME=v1" in capsys.readouterr().err


@requires_ext
def test_switch_flag_names_an_unknown_switch(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--switch", "VLATTN_NOPE=1,2"])
    assert exc.value.code == 2
    assert "unknown switch 'VLATTN_NOPE'" in capsys.readouterr().err


def _kernel_names(fn) -> set[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


@requires_sm90
def test_an_in_process_change_reaches_the_next_calls_dispatch():
    """VLATTN_ATTN_PERSISTENT 0 / 2 in one process: different attention kernels (the persistent flag is a
    template argument, so the launched names differ), the same bits."""
    q = torch.randn(4, 32, 256, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(4, 8, 392, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(4, 8, 392, 128, dtype=torch.bfloat16, device="cuda")
    outs, names = {}, {}
    for value in (0, 2, 0):
        with dev.switch("VLATTN_ATTN_PERSISTENT", value):
            names.setdefault(value, set()).update(
                n for n in _kernel_names(lambda: outs.__setitem__(value, vlattn.attention(q, k, v))) if "attention" in n)
    assert names[0] and names[2] and names[0] != names[2], names
    assert torch.equal(outs[0], outs[2])


@requires_sm90
def test_bench_switch_runs_every_value_in_one_process(tmp_path):
    """`vlattn.bench --switch`: one checked, timed column per value for the native op and its graph, and
    the switch back at its start value afterwards."""
    path = tmp_path / "r.json"
    start = dev.get_switch("VLATTN_ATTN_PERSISTENT")
    argv = ["--problem", "034", "--workloads", "034:0", "--mode", "layers", "--backends", "native", "--baselines=",
            "--switch", "VLATTN_ATTN_PERSISTENT=0,2", "--iters", "2", "--warmup", "1", "--rounds", "2",
            "--warmup-s", "0", "--json", str(path), "--plot", str(tmp_path / "r.png")]
    assert bench.main(argv) == 0
    records = json.loads(path.read_text())["results"]
    keys = {r["impl"] for r in records}
    assert keys == {"vlattn:native[ATTN_PERSISTENT=0]", "vlattn:native[ATTN_PERSISTENT=2]",
                    "vlattn:native_graph[ATTN_PERSISTENT=0]", "vlattn:native_graph[ATTN_PERSISTENT=2]"}, keys
    assert all(r["status"] == "measured" and r["check"]["ok"] for r in records)
    assert dev.get_switch("VLATTN_ATTN_PERSISTENT") == start


@requires_ext
def test_bench_puts_the_switch_back_after_the_run(tmp_path):
    """main() runs under _switch_restored: a --switch run leaves the switch as it found it."""
    start = dev.get_switch("VLATTN_ATTN_BN")
    dev.set_switch("VLATTN_ATTN_BN", 128)
    try:
        with bench._switch_restored("VLATTN_ATTN_BN=0,176"):
            dev.set_switch("VLATTN_ATTN_BN", 176)
        assert dev.get_switch("VLATTN_ATTN_BN") == 128
    finally:
        dev.set_switch("VLATTN_ATTN_BN", start)
