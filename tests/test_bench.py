"""The bench without a GPU: its no-GPU mode, a CPU smoke run of the full pipeline, and the pure
helpers (statistics, summary math, selection, GEMM dedupe and check) on synthetic numbers."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

bench = pytest.importorskip("vlattn.bench")
workloads = pytest.importorskip("vlattn.workloads")


# --------------------------------------------------------------------------------------------
# End to end on the CPU
# --------------------------------------------------------------------------------------------

def test_no_gpu_mode_runs_cpu_reference_and_writes_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = tmp_path / "out.json"
    assert bench.main(["--json", str(path), "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert "no CUDA device: ran the CPU reference on 007[B=1,S=128] only" in printed
    data = json.loads(path.read_text())
    assert data["meta"]["device"] == "cpu"
    assert data["meta"]["args"]["seed"] == 1
    (record,) = data["results"]
    assert record["impl"] == "reference_cpu"
    assert record["name"] == "007[B=1,S=128]"
    assert record["us_wall"] > 0
    if record["check"] is not None:  # None only when the seeds directory is absent
        assert record["check"]["ok"]


def test_cpu_smoke_run_of_layers_and_gemm(tmp_path, capsys):
    path, plot = tmp_path / "r.json", tmp_path / "r.png"
    argv = ["--device", "cpu", "--problem", "007", "--workloads", "B=1 S=128", "--mode", "all",
            "--baselines", "reference", "--iters", "2", "--warmup", "0", "--seed", "3",
            "--json", str(path), "--plot", str(plot)]
    assert bench.main(argv) == 0
    data = json.loads(path.read_text())
    (record,) = data["results"]
    assert record["impl"] == "reference" and record["status"] == "measured"
    assert record["check"]["ok"] and record["check"]["matched"] == 1.0
    assert record["x_best_pytorch"] == 1.0 and record["best_pytorch"] == "reference"
    assert record["us_min"] <= record["us_median"] and record["iters"] == 2
    assert math.isclose(record["pct_sol"], 100 * record["t_sol_us"] / record["us_median"])
    gemm = data["gemm"]["results"]
    assert [(r["m"], r["n"], r["k"], r["bias"]) for r in gemm] == [
        (128, 512, 3584, True), (128, 3584, 3584, False), (128, 3584, 3584, True)]
    assert all(r["cublas"]["status"] == "measured" and r["vlattn"] is None for r in gemm)
    printed = capsys.readouterr().out
    assert plot.exists() or "matplotlib is not installed" in printed


def test_unknown_workload_is_a_usage_error(capsys):
    assert bench.main(["--workloads", "no-such-workload"]) == 2
    assert "matches no workload" in capsys.readouterr().err


def test_quick_lowers_iterations_unless_given():
    assert (bench.parse_args(["--quick"]).iters, bench.parse_args(["--quick"]).warmup) == (10, 2)
    assert bench.parse_args(["--quick", "--iters", "7"]).iters == 7
    assert bench.parse_args([]).iters == 30
    with pytest.raises(SystemExit):
        bench.parse_args(["--baselines", "reference,nope"])


# --------------------------------------------------------------------------------------------
# Statistics and summary math
# --------------------------------------------------------------------------------------------

def test_percentile_interpolates_like_numpy():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert bench.percentile(values, 50) == 3.0
    assert bench.percentile(values, 20) == pytest.approx(1.8)
    assert bench.percentile(values, 80) == pytest.approx(4.2)
    assert bench.percentile([7.0], 80) == 7.0
    stats = bench.time_stats(values)
    assert (stats["us_median"], stats["us_min"], stats["iters"]) == (3.0, 1.0, 5)


def test_pct_sol_tflops_and_geomean():
    assert bench.pct_sol(25.0, 100.0) == 25.0
    assert bench.tflops(2e12, 1e6) == pytest.approx(2.0)  # 2 TFLOP in one second
    assert bench.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert bench.geomean([]) is None


def _record(problem, index, impl, us, *, pytorch=True, ok=True, t_sol=10.0):
    return {"problem": problem, "index": index, "impl": impl, "pytorch": pytorch,
            "us_median": us, "status": "measured" if us else "ERR", "t_sol_us": t_sol,
            "pct_sol": bench.pct_sol(t_sol, us) if us else None,
            "check": {"ok": ok}}


def test_best_pytorch_ignores_our_impls_and_failed_checks():
    records = [
        _record("007", 0, "vlattn:native", 10.0, pytorch=False),
        _record("007", 0, "composite", 30.0, ok=False),  # fastest baseline, but wrong
        _record("007", 0, "composite_graph", 40.0),
        _record("007", 0, "reference", 200.0),
        _record("007", 0, "compile", None),  # errored: not measured
    ]
    assert bench.best_pytorch(records) == ("composite_graph", 40.0)
    bench.add_relative_speed(records)
    assert records[0]["x_best_pytorch"] == pytest.approx(4.0)
    assert records[3]["x_best_pytorch"] == pytest.approx(0.2)
    assert records[4]["x_best_pytorch"] is None
    assert bench.best_pytorch([records[0]]) == (None, None)


def test_summary_means_pct_sol_and_geomeans_speedups():
    records = []
    for index, (ours, best) in enumerate([(20.0, 40.0), (10.0, 80.0)]):
        rows = [_record("034", index, "vlattn:native", ours, pytorch=False),
                _record("034", index, "composite_graph", best)]
        bench.add_relative_speed(rows)
        records += rows
    lone = [_record("034", 2, "vlattn:native", 50.0, pytorch=False, ok=False)]
    bench.add_relative_speed(lone)  # no baseline measured here: no x_best_pytorch
    records += lone
    summary = bench.summarize_layers(records, ["vlattn:native", "composite_graph"])
    assert list(summary) == ["034"]  # no "all" group for a single problem
    ours = summary["034"]["vlattn:native"]
    assert ours["n"] == 3 and ours["failures"] == 1 and ours["errors"] == 0
    assert ours["mean_pct_sol"] == pytest.approx((50 + 100 + 20) / 3)
    assert ours["geomean_x_best_pytorch"] == pytest.approx(math.sqrt(2 * 8))  # third has no best
    best = summary["034"]["best PyTorch"]
    assert best["n"] == 2 and best["mean_pct_sol"] == pytest.approx((25 + 12.5) / 2)


def test_exit_status_fails_on_check_failures_our_errors_and_aborts():
    def layers(*records, aborted=None):
        return {"results": list(records), "aborted": aborted}

    baseline_oom = dict(_record("007", 0, "reference", None), status="OOM", name="w")
    assert bench.exit_status(layers(baseline_oom), None) == 0
    ours_err = dict(_record("007", 0, "vlattn:native", None, pytorch=False), name="w")
    assert bench.exit_status(layers(ours_err), None) == 1
    failing = dict(_record("007", 0, "composite", 5.0, ok=False), name="w")
    assert bench.exit_status(layers(failing), None) == 1
    assert bench.exit_status(layers(aborted="w: run aborted"), None) == 1
    gemm_fail = {"label": "g", "vlattn": {"status": "measured", "check": {"ok": False}}}
    assert bench.exit_status(None, {"results": [gemm_fail], "aborted": None}) == 1


# --------------------------------------------------------------------------------------------
# Workload selection, GEMM shapes and checks
# --------------------------------------------------------------------------------------------

def test_select_workloads_by_index_problem_index_and_name():
    all_ws = workloads.load()
    assert len(all_ws) == 32
    by_name = bench.select_workloads(all_ws, "007[B=4,S=128],B=2 Lq=128 Lv=196")
    assert [w.name for w in by_name] == ["007[B=4,S=128]", "034[B=2,Lq=128,Lv=196]"]
    assert [w.problem for w in bench.select_workloads(all_ws, "3")] == ["007", "034"]
    (one,) = bench.select_workloads(all_ws, "034:3")
    assert (one.problem, one.index) == ("034", 3)
    assert bench.select_workloads(all_ws, None) == all_ws
    with pytest.raises(ValueError, match="matches no workload"):
        bench.select_workloads(all_ws, "B=999")


def test_dedupe_gemm_shapes_merges_users_and_sorts_by_work():
    shapes = bench.dedupe_gemm_shapes([
        ("a", [("q", 256, 4096, 4096, True), ("k", 128, 512, 3584, True), ("v", 128, 512, 3584, True)]),
        ("b", [("q", 256, 4096, 4096, True), ("o", 256, 4096, 4096, False)]),
    ])
    assert [(s.m, s.n, s.k, s.bias) for s in shapes] == [
        (128, 512, 3584, True), (256, 4096, 4096, False), (256, 4096, 4096, True)]
    assert shapes[0].users == ("a k", "a v") and shapes[2].users == ("a q", "b q")


def test_gemm_speed_of_light_takes_the_larger_of_compute_and_memory():
    big = bench.GemmShape(8192, 8192, 8192, False)  # compute-bound
    assert big.t_sol_us == pytest.approx(2 * 8192**3 / workloads.PEAK_FLOPS * 1e6)
    skinny = bench.GemmShape(1, 4096, 4096, True)  # reads the weight: memory-bound
    assert skinny.min_bytes == 2 * (4096 + 4096 * 4096 + 4096 + 4096)
    assert skinny.t_sol_us == pytest.approx(skinny.min_bytes / workloads.PEAK_BYTES_PER_S * 1e6)


def test_compare_gemm_rule():
    torch.manual_seed(0)
    ref = torch.randn(64, 128).to(torch.bfloat16)
    assert bench.compare_gemm(ref.clone(), ref)["ok"]
    rounded = (ref.float() * (1 + 2**-9)).to(torch.bfloat16)  # about one bf16 rounding
    assert bench.compare_gemm(rounded, ref)["ok"]
    wrong = ref.clone()
    wrong[:, :8] += 1.0  # 1 in 16 elements off
    res = bench.compare_gemm(wrong, ref)
    assert not res["ok"] and res["matched"] == pytest.approx(15 / 16) and res["max_abs_err"] >= 1.0
    poisoned = ref.clone()
    poisoned[0, 0] = float("nan")
    res = bench.compare_gemm(poisoned, ref)
    assert not res["ok"] and res["nan_or_inf"]


# --------------------------------------------------------------------------------------------
# The CUDA timer's order of operations, with torch.cuda faked
# --------------------------------------------------------------------------------------------

def test_cuda_timer_flushes_l2_outside_the_events(monkeypatch):
    log, clock = [], [0.0]

    class FakeEvent:
        def __init__(self, enable_timing):
            assert enable_timing

        def record(self):
            self.t = clock[0]
            log.append("event")

        def elapsed_time(self, end):
            return end.t - self.t  # milliseconds, like torch.cuda.Event

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(L2_cache_size=1024))
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: log.append("sync"))
    timer = bench.CudaTimer(torch.device("cpu"))
    assert timer.scratch.numel() * timer.scratch.element_size() == 2 * 1024
    timer.scratch = SimpleNamespace(zero_=lambda: (log.append("flush"), clock.__setitem__(0, clock[0] + 1.0)))

    def step():
        log.append("step")
        clock[0] += 0.005

    times = timer(step, iters=2, warmup=1)
    assert times == pytest.approx([5.0, 5.0])  # µs: the flush's 1 ms is outside the events
    assert log == ["step"] + ["sync", "flush", "event", "step", "event"] * 2 + ["sync"]
