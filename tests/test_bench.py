"""The bench without a GPU: its no-GPU mode, a CPU smoke run of the full pipeline, and the pure
helpers (statistics, summary math, selection, GEMM dedupe and check) on synthetic numbers."""

import itertools
import json
import math
import random
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

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


def test_rounds_default_to_blocks_of_three():
    """30 timed calls in 10 interleaved rounds of 3, 5 warm-up calls before a column's first block and 2 before
    each later one (the per-round ratios of 3 rounds of 10 moved by 10-25% on the large layers: bench/NOTES.md
    forty-second session; after one warm-up call a block's first timed call read 10-20% slow on the host-bound
    layers: forty-fourth session)."""
    args = bench.parse_args([])
    assert (args.rounds, args.warmup, args.round_warmup) == (10, 5, 2)
    assert bench.round_sizes(args.iters, args.rounds) == [3] * 10
    with pytest.raises(SystemExit):
        bench.parse_args(["--round-warmup", "-1"])


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
    assert stats["us_all"] == [round(v, 1) for v in values]  # every call, in the order timed


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


def test_graph_replay_slower_than_eager_is_flagged():
    """A graph replay whose fastest call is > 1.10x its eager impl's fastest gets a note (the fifty-sixth session's
    serialized fork read 1.19x); within the factor, an unmeasured eager impl, or no pair: nothing."""
    def rec(impl, us_min, status="measured"):
        return {"impl": impl, "us_min": us_min, "status": status}

    lines = bench.graph_replay_anomalies([
        rec("vlattn:native", 170.1), rec("vlattn:native_graph", 202.0),  # the fifty-sixth session's cell: flagged
        rec("composite", 300.0), rec("composite_graph", 320.0),  # 1.07x: within the factor
        rec("vlattn:native[X=1]", 50.0), rec("vlattn:native_graph[X=1]", 56.0),  # 1.12x, the switched pair: flagged
        rec("vlattn:native[X=0]", 50.0, "ERR"), rec("vlattn:native_graph[X=0]", 90.0),  # no measured eager: nothing
        rec("reference", 10.0), rec("compile", 1000.0),
    ])
    assert len(lines) == 2, lines
    assert lines[0].startswith("vlattn:native_graph: graph replay's fastest call 202.0 us is 1.19x vlattn:native's")
    assert lines[1].startswith("vlattn:native_graph[X=1]: ") and "1.12x" in lines[1]
    assert bench.graph_replay_anomalies([rec("vlattn:native", 100.0), rec("vlattn:native_graph", 95.0)]) == []
    notes = bench.layer_notes([dict(rec("vlattn:native", 100.0), check=None),
                               dict(rec("vlattn:native_graph", 120.0), check=None)])
    assert len(notes) == 1 and notes[0].startswith("    vlattn:native_graph: graph replay's fastest call 120.0 us")


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
    # Every event is recorded once first (torch creates it there, outside any timed interval); the warm-up call
    # takes the timed calls' protocol (drain, flush, call), untimed.
    assert log == ["event"] * 4 + ["sync", "flush", "step"] + ["sync", "flush", "event", "step", "event"] * 2 + ["sync"]

    # host_ahead: a spin kernel between the flush and the start event (the GEMM mode's and the tuner's
    # timer), and nothing else changes.
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append(("spin", cycles)))
    ahead = bench.CudaTimer(torch.device("cpu"), host_ahead=True)
    ahead.scratch = timer.scratch
    log.clear()
    assert ahead(step, iters=1, warmup=0) == pytest.approx([5.0])
    assert log == ["event"] * 2 + ["sync", "flush", ("spin", bench.HOST_AHEAD_CYCLES), "event", "step", "event", "sync"]
    assert not timer.host_ahead and bench.parse_args([]).gemm_timer == "ahead"
    assert bench.parse_args([]).qkv_timer == "cold" and bench.parse_args(["--qkv-timer", "ahead"]).qkv_timer == "ahead"
    assert bench.timer_kind(ahead)[0] == "ahead" and bench.timer_kind(timer)[0] == "cold"
    assert bench.timer_kind(bench.cpu_timer)[0] == "cpu"


def test_round_sizes_split_the_timed_calls_evenly():
    assert bench.round_sizes(30, 3) == [10, 10, 10]
    assert bench.round_sizes(5, 3) == [2, 2, 1]
    assert bench.round_sizes(2, 3) == [1, 1]
    assert bench.round_sizes(7, 1) == [7]


@pytest.mark.parametrize("rounds,round_warmup", [(3, None), (3, 0), (1, None)])
def test_impls_are_timed_in_interleaved_rounds(monkeypatch, rounds, round_warmup):
    """rounds=3: every impl built and checked once, then timed round by round in next_round_order's orders
    (seeded shuffles, never an impl's block right after its own), --warmup calls before the first round's
    blocks and --round-warmup (default: the same) before the later ones. rounds=1: each impl built, checked and timed in one block before the next. Either way an impl
    that fails to build is recorded and left out, and a failed check is still timed."""
    (w,) = bench.select_workloads(workloads.load(), "007[B=1,S=128]")
    ref = torch.zeros(2)
    builds, blocks, owner = [], [], {}

    def impl(key, value, fails=False):
        def build(c):
            builds.append(key)
            if fails:
                raise RuntimeError("no kernel for this shape")
            out = torch.full((2,), value)
            step = lambda: None  # noqa: E731
            owner[step] = key
            return bench.Runner(step=step, result=lambda: out)
        return bench.Impl(key, pytorch=True, needs_cuda=False, build=build)

    def timer(step, iters, warmup):
        blocks.append((owner[step], iters, warmup))
        return [float(len(blocks))] * iters

    monkeypatch.setattr(bench, "check_layer_output", lambda out, r, w: {"ok": bool((out == r).all())})
    impls = [impl("a", 0.0), impl("b", 1.0), impl("broken", 0.0, fails=True), impl("c", 0.0)]
    monkeypatch.setattr(bench, "release_memory", lambda device: None)
    monkeypatch.setattr(bench.workloads, "make_inputs", lambda w, device, seed=None: {})
    monkeypatch.setattr(bench, "exact_reference", lambda case: (ref, None))
    opts = bench.Options(iters=5, warmup=1, check=True, seed=0, rounds=rounds, round_warmup=round_warmup)
    monkeypatch.setattr(bench, "_ROUND_ORDER_CALLS", itertools.count())  # this workload is call 0
    recs, notes = bench.bench_workload(w, impls, torch.device("cpu"), timer, opts)
    assert builds == ["a", "b", "broken", "c"]  # each built once
    by = {r["impl"]: r for r in recs}
    if rounds == 3:
        later = 1 if round_warmup is None else round_warmup
        rng = random.Random(0 * 1_000_003 + 0)  # the run's seed (0) and the call's number (0) drive the order
        order1 = bench.next_round_order([0, 1, 3], None, rng)
        order2 = bench.next_round_order([0, 1, 3], order1[-1], rng)
        order3 = bench.next_round_order([0, 1, 3], order2[-1], rng)
        name = {0: "a", 1: "b", 3: "c"}
        assert blocks == ([(name[i], 2, 1) for i in order1] + [(name[i], 2, later) for i in order2] +
                          [(name[i], 1, later) for i in order3])
        assert all(x[0] != y[0] for x, y in zip(blocks, blocks[1:])), f"an impl ran twice in a row: {blocks}"
        samples = sorted(k + 1.0 for k, blk in enumerate(blocks) if blk[0] == "a" for _ in range(blk[1]))
        assert by["a"]["us_min"] == samples[0] and by["a"]["us_median"] == samples[2]
    else:
        assert blocks == [("a", 5, 1), ("b", 5, 1), ("c", 5, 1)]
        assert by["c"]["us_median"] == 3.0
    assert by["broken"]["status"] == "ERR" and "no kernel" in by["broken"]["error"]
    assert by["b"]["check"] == {"ok": False} and by["b"]["status"] == "measured"
    assert [by[k]["iters"] for k in "abc"] == [5, 5, 5]
    assert by["a"]["pct_sol"] > 0 and by["a"]["tflops"] > 0


def test_round_order_never_doubles_a_block():
    """next_round_order: a seeded shuffle of the live entries that does not start with the entry that ended
    the round before, for 1 to 7 entries over many rounds; from 3 entries every one is first in some round (two
    can only alternate)."""
    for n in range(1, 8):
        rng, last, seq, firsts = random.Random(n), None, [], set()
        for _ in range(40):
            order = bench.next_round_order(list(range(n)), last, rng)
            assert sorted(order) == list(range(n))
            seq += order
            firsts.add(order[0])
            last = order[-1]
        assert n == 1 or all(x != y for x, y in zip(seq, seq[1:]))
        assert n < 3 or firsts == set(range(n))
    # Two workloads of one run (consecutive calls, one seed) do not share a sequence of orders.
    assert bench.round_order_rng(3).random() != bench.round_order_rng(3).random()


# --------------------------------------------------------------------------------------------
# qkv and attention modes
# --------------------------------------------------------------------------------------------

def _workload(name):
    (w,) = bench.select_workloads(workloads.load(), name)
    return w


def test_new_modes_parse_and_all_is_still_a_mode():
    for mode in ("qkv", "attention", "all"):
        assert bench.parse_args(["--mode", mode]).mode == mode
    with pytest.raises(SystemExit):
        bench.parse_args(["--mode", "nope"])


def test_qkv_flops_and_bytes_007():
    w = _workload("007[B=1,S=128]")  # hidden 3584, 28 q heads, 4 kv heads, D 128
    assert bench.qkv_m(w) == 128
    assert bench.qkv_flops(w) == 2 * 128 * 3584 * (3584 + 512 + 512)
    weights = 2 * (3584 * 3584 + 3584 + 2 * (512 * 3584 + 512))
    assert bench.qkv_weight_bytes(w) == weights
    x, tables, out = 2 * 128 * 3584, 2 * 2 * 3 * 128 * 128, 2 * 128 * (3584 + 2 * 512)
    assert bench.qkv_min_bytes(w) == x + tables + weights + out
    assert bench.qkv_t_sol_us(w) == pytest.approx(
        max(bench.qkv_flops(w) / workloads.PEAK_FLOPS, bench.qkv_min_bytes(w) / workloads.PEAK_BYTES_PER_S) * 1e6)
    rec = {"flops": bench.qkv_flops(w), "weight_bytes": weights, "min_bytes": bench.qkv_min_bytes(w),
           "t_sol_us": 5.0}
    rates = bench.qkv_rates(rec, 10.0)
    assert rates["weight_gbps"] == pytest.approx(weights / 10e-6 / 1e9)
    assert rates["tflops"] == pytest.approx(bench.qkv_flops(w) / 10e-6 / 1e12)
    assert rates["pct_sol"] == pytest.approx(50.0)


def test_qkv_flops_and_bytes_034_use_both_token_counts():
    w = _workload("034[B=2,Lq=256,Lv=392]")  # hidden 4096, 32 q heads, 8 kv heads
    q_tok, kv_tok = 2 * 256, 2 * 392
    assert bench.qkv_m(w) == kv_tok
    assert bench.qkv_flops(w) == 2 * 4096 * (q_tok * 4096 + 2 * kv_tok * 1024)
    weights = 2 * (4096 * 4096 + 4096 + 2 * (1024 * 4096 + 1024))
    out = 2 * (q_tok * 4096 + 2 * kv_tok * 1024)
    assert bench.qkv_min_bytes(w) == 2 * (q_tok + kv_tok) * 4096 + 8 * (q_tok + 3 * kv_tok) + weights + out


def test_compare_qkv_counts_violations_and_nans():
    torch.manual_seed(0)
    refs = tuple(torch.randn(1, 2, 8, 128).to(torch.bfloat16) for _ in range(3))
    res = bench.compare_qkv(tuple(r.clone() for r in refs), refs)
    assert res == {"ok": True, "violations": 0, "elements": 3 * 2048, "max_abs_err": 0.0}
    one_ulp = tuple((r.float() * (1 + 2**-8)).to(torch.bfloat16) for r in refs)
    assert bench.compare_qkv(one_ulp, refs)["ok"]
    bad = [r.clone() for r in refs]
    bad[1][0, 0, 0, :3] += 1.0
    bad[2][0, 0, 0, 0] = float("nan")
    res = bench.compare_qkv(bad, refs)
    assert not res["ok"] and res["violations"] == 4 and res["max_abs_err"] >= 0.9
    res = bench.compare_qkv(refs[:2] + (refs[2][:, :1],), refs)
    assert not res["ok"] and "expected" in res["error"]


def test_attention_flops_count_only_unmasked_pairs():
    causal = torch.full((4, 4), torch.finfo(torch.bfloat16).min, dtype=torch.bfloat16).triu(1)
    per_batch = causal.expand(3, 1, 4, 4).contiguous()
    assert bench.allowed_pairs(per_batch, 3, 4, 4) == 3 * 10
    assert bench.allowed_pairs(causal.expand(1, 1, 4, 4), 3, 4, 4) == 3 * 10  # broadcast over batch
    assert bench.allowed_pairs(causal.expand(1, 1, 4, 4), 1, 4, 2) == 7  # only the first Sk columns
    assert bench.allowed_pairs(None, 2, 5, 7) == 70
    assert bench.attention_flops(2, 28, 5, 7) == 4 * 2 * 28 * 5 * 7 * 128
    assert bench.attention_flops(2, 28, 5, 7, pairs=10) == 4 * 28 * 128 * 10
    # The real 007 mask (finite bf16 minimum above the diagonal): half the matrix plus the diagonal.
    w = _workload("007[B=1,S=128]")
    mask = workloads.make_inputs(w, "cpu", seed=0)["attention_mask"]
    assert bench.allowed_pairs(mask, 1, 128, 128) == 128 * 129 // 2


def _col(us, ok=True, ours=False, status="measured"):
    return {"status": status, "us_median": us, "check": {"ok": ok}, "ours": ours}


def test_qkv_speedups_and_summary():
    records = []
    for i, (m, fused, eager, graph) in enumerate([(128, 10.0, 40.0, 20.0), (4096, 100.0, 120.0, 110.0)]):
        rec = {"name": f"w{i}", "problem": "007", "m": m, "columns": {
            "unfused": _col(eager), "unfused_graph": _col(graph),
            "fused": dict(_col(fused, ours=True), weight_gbps=1000.0 * (i + 3)),
            "fused:m64": _col(None, ours=True, status="ERR")}}
        bench.add_qkv_speedups(rec)
        records.append(rec)
    first = records[0]["columns"]["fused"]
    assert records[0]["best_baseline"] == "unfused_graph"
    assert (first["x_unfused"], first["x_unfused_graph"], first["x_best"]) == (4.0, 2.0, 2.0)
    summary = bench.summarize_qkv(records)
    fused = summary["columns"]["fused"]
    assert fused["geomean_x_best"] == pytest.approx(math.sqrt(2.0 * 1.1))
    assert fused["min_x_best"] == pytest.approx(1.1) and fused["below_target"] == ["w1"]
    assert summary["columns"]["fused:m64"]["errors"] == 2 and summary["columns"]["fused:m64"]["n"] == 0
    assert summary["columns"]["fused:m128"]["n"] == 0
    small = summary["small_m"]
    assert small["n"] == 1 and small["mean_weight_gbps"] == 3000.0 and small["below_target"] == ["w0"]
    # A baseline that failed its check is no target.
    rec = {"columns": {"unfused": _col(40.0), "unfused_graph": _col(5.0, ok=False), "fused": _col(10.0, ours=True)}}
    bench.add_qkv_speedups(rec)
    assert rec["best_baseline"] == "unfused" and rec["columns"]["fused"]["x_best"] == 4.0
    # The compiled stage counts toward the best baseline like the others.
    rec = {"columns": {"unfused": _col(40.0), "unfused_graph": _col(20.0), "unfused_compile": _col(12.0),
                       "fused": _col(10.0, ours=True)}}
    bench.add_qkv_speedups(rec)
    assert rec["best_baseline"] == "unfused_compile"
    assert rec["columns"]["fused"]["x_unfused_compile"] == pytest.approx(1.2)
    assert rec["columns"]["fused"]["x_best"] == pytest.approx(1.2)


def test_attention_speedups_skip_ratio_and_summary():
    def rec(name, problem, ours, noskip, sdpa, composite):
        r = {"name": name, "problem": problem, "columns": {
            "vlattn": _col(ours, ours=True), "sdpa:flash": _col(None, status="ERR"),
            "sdpa:cudnn": _col(sdpa), "sdpa:math": _col(sdpa / 4, ok=False), "composite": _col(composite)}}
        if noskip is not None:
            r["columns"]["vlattn:noskip"] = _col(noskip, ours=True)
        bench.add_attention_speedups(r)
        return r

    records = [rec("007[B=1,S=4096]", "007", 100.0, 180.0, 150.0, 200.0),
               rec("034[B=1,Lq=8192,Lv=12544]", "034", 50.0, None, 40.0, 60.0)]
    r0 = records[0]
    assert (r0["best_sdpa"], r0["best_sdpa_us"]) == ("sdpa:cudnn", 150.0)  # math failed its check
    assert r0["columns"]["vlattn"]["x_best_sdpa"] == 1.5 and r0["columns"]["vlattn"]["x_composite"] == 2.0
    assert r0["skip_ratio"] == pytest.approx(1.8) and records[1]["skip_ratio"] is None
    summary = bench.summarize_attention(records)
    ours = summary["columns"]["vlattn"]
    assert ours["n"] == 2 and ours["geomean_x_best_sdpa"] == pytest.approx(math.sqrt(1.5 * 0.8))
    assert ours["min_x_best_sdpa"] == pytest.approx(0.8)
    assert summary["columns"]["vlattn:noskip"]["n"] == 1
    assert summary["skip_ratio"] == pytest.approx(1.8) and summary["best_sdpa_counts"] == {"sdpa:cudnn": 2}


def test_exit_status_for_qkv_and_attention_columns():
    def part(col):
        return {"results": [{"name": "w", "columns": {"c": col}}], "aborted": None}

    assert bench.exit_status(None, None, part(_col(None, ours=False, status="ERR"))) == 0  # a baseline's error
    assert bench.exit_status(None, None, part(_col(None, ours=True, status="OOM"))) == 1
    assert bench.exit_status(None, None, None, part(_col(3.0, ok=False, ours=True))) == 1
    assert bench.exit_status(None, None, None, {"results": [], "aborted": "x: run aborted"}) == 1


def test_missing_ops_are_skipped_with_a_note():
    if hasattr(torch.ops.vlattn, "attention"):
        pytest.skip("this build has torch.ops.vlattn.attention")
    why = bench.vlattn_op_unavailable("attention", torch.device("cuda"))
    assert why.startswith("torch.ops.vlattn.attention is missing from this build")
    keys, notes = bench.attention_columns(torch.device("cpu"))
    assert "vlattn" not in keys and "sdpa:math" in keys and "composite" in keys
    assert notes[0].startswith("attention: vlattn: skipped, torch.ops.vlattn.attention is missing")


def test_cpu_smoke_run_of_qkv_and_attention(tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = ["--device", "cpu", "--workloads", "007[B=1,S=128]", "--mode", "qkv", "--iters", "1",
            "--warmup", "0", "--seed", "2", "--json", str(path)]
    assert bench.main(argv) == 0
    data = json.loads(path.read_text())
    (rec,) = data["qkv"]["results"]
    assert rec["columns"]["unfused"]["check"]["ok"] and "unfused_graph" not in rec["columns"]
    assert any("unfused_graph, unfused_compile: skipped, need a CUDA device" in n for n in data["notes"])
    assert bench.main(argv[:5] + ["attention"] + argv[6:]) == 0
    data = json.loads(path.read_text())
    (rec,) = data["attention"]["results"]
    assert rec["needed_fraction"] == pytest.approx(129 / 256)
    for key in ("sdpa:math", "sdpa:default", "composite"):
        assert rec["columns"][key]["status"] == "measured" and rec["columns"][key]["check"]["ok"], key
    assert rec["best_sdpa"] in bench.SDPA_KEYS


def test_cpu_run_with_stand_in_vlattn_ops(tmp_path, monkeypatch):
    """The fused/vlattn columns' plumbing, with the ops replaced by their references."""
    monkeypatch.setattr(bench, "vlattn_op_unavailable", lambda name, device: None)
    stage = bench._contiguous_stage(bench.reference.mrope_qkv)
    monkeypatch.setattr(bench.vlattn, "mrope_qkv", lambda *a, config="": stage(*a), raising=False)
    monkeypatch.setattr(bench, "_vlattn_attention", lambda skip: lambda q, k, v, mask: bench.token_major(
        bench.reference.attention(q, k, v, mask)))
    path, plot = tmp_path / "r.json", tmp_path / "r.png"
    base = ["--device", "cpu", "--workloads", "007[B=1,S=128]", "--iters", "1", "--warmup", "0",
            "--seed", "2", "--json", str(path), "--plot", str(plot)]
    assert bench.main(base + ["--mode", "qkv"]) == 0
    (rec,) = json.loads(path.read_text())["qkv"]["results"]
    for key in bench.QKV_FUSED:
        col = rec["columns"][key]
        assert col["check"]["ok"] and col["check"]["violations"] == 0 and col["x_best"] > 0
        assert col["weight_gbps"] > 0 and col["tflops"] > 0
    assert bench.main(base + ["--mode", "attention"]) == 0
    (rec,) = json.loads(path.read_text())["attention"]["results"]
    ours = rec["columns"]["vlattn"]
    assert ours["check"]["matched"] == 1.0 and ours["x_best_sdpa"] > 0 and ours["x_composite"] > 0
    assert ours["tflops_needed"] == pytest.approx(ours["tflops_full"] * 129 / 256)
    assert rec["skip_ratio"] > 0
    # gemm mode: vlattn.linear stood in by F.linear into out (its column checked against F.linear)
    monkeypatch.setattr(bench, "gemm_availability", lambda device: None)
    monkeypatch.setattr(bench.vlattn, "linear", lambda x, w, b=None, out=None: out.copy_(F.linear(x, w, b)),
                        raising=False)
    assert bench.main(base + ["--mode", "gemm"]) == 0
    gemm = json.loads(path.read_text())["gemm"]["results"]
    assert gemm and all(r["vlattn"]["status"] == "measured" and r["vlattn"]["check"]["ok"] for r in gemm)
    assert all(r["cublas"]["status"] == "measured" and "check" not in r["cublas"] for r in gemm)
    assert all(r["vlattn"]["x_cublas"] > 0 and r["vlattn"]["tflops"] > 0 for r in gemm)


def test_plot_panels_for_qkv_and_attention():
    qkv = {"results": [{"problem": "007", "axes": {"batch_size": 1, "seq_len": 128},
                        "columns": {"fused": {"x_best": 1.5}, "fused:m64": {"x_best": None}}}]}
    attention = {"results": [{"problem": "034", "axes": {"batch_size": 2}, "columns": {"vlattn": {"x_best_sdpa": 0.9}}}]}
    panels = bench.plot_panels(None, None, qkv, attention)
    assert [p.title.split()[:2] for p in panels] == [["007", "qkv"], ["034", "attention:"]]
    assert panels[0].series == {"fused": [1.5]} and panels[0].labels == ["B=1,S=128"]
    assert panels[0].reference_line == bench.QKV_TARGET_X and panels[1].series == {"vlattn": [0.9]}
    assert bench.plot_panels(None, None, {"results": []}, None) == []


def test_native_graph_column_follows_the_native_backend(monkeypatch):
    """vlattn:native_graph (the native op replayed from a CUDA graph: GPU time without the host
    path) comes with the native backend on a CUDA device, is not a PyTorch baseline, and
    --no-native-graph leaves it out; on the CPU it is skipped with a note."""
    monkeypatch.setattr(bench.vlattn, "available_backends", lambda device: ("native", "composite"))
    cuda = torch.device("cuda", 0)
    impls, notes = bench.resolve_impls(bench.parse_args(["--baselines", ""]), cuda)
    keys = [i.key for i in impls]
    assert keys == ["vlattn:native", "vlattn:composite", "vlattn:native_graph"], keys
    assert not impls[-1].pytorch and impls[-1].needs_cuda and not notes
    impls, _ = bench.resolve_impls(bench.parse_args(["--baselines", "", "--no-native-graph"]), cuda)
    assert "vlattn:native_graph" not in [i.key for i in impls]
    impls, notes = bench.resolve_impls(bench.parse_args(["--baselines", ""]), torch.device("cpu"))
    assert "vlattn:native_graph" not in [i.key for i in impls]
    assert any(n.startswith("vlattn:native_graph: skipped") for n in notes), notes
    # A column of ours: best PyTorch never picks it.
    records = [_record("007", 0, "vlattn:native_graph", 1.0, pytorch=False), _record("007", 0, "composite_graph", 5.0)]
    assert bench.best_pytorch(records) == ("composite_graph", 5.0)


def test_gpu_check_suite_parts_cover_every_test_file_once():
    """scripts/gpu_check.sh runs the GPU suite in two halves (SUITE_PART=1|2): every tests/test_*.py but
    test_codegen.py (CI's, not the device's) is in exactly one of them, so a new test file cannot be left out."""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parent.parent
    script = (root / "scripts" / "gpu_check.sh").read_text()
    parts = [re.search(rf'^SUITE_PART_{i}="([^"]*)"', script, re.M) for i in (1, 2)]
    assert all(parts), "SUITE_PART_1 / SUITE_PART_2 not found in scripts/gpu_check.sh"
    listed = [path for m in parts for path in m.group(1).split()]
    files = sorted(f"tests/{p.name}" for p in (root / "tests").glob("test_*.py") if p.name != "test_codegen.py")
    assert sorted(listed) == files, (sorted(listed), files)


def test_test_shards_partition_the_collection(tmp_path):
    """VLATTN_TEST_SHARD=i/n (tests/conftest.py, scripts/gpu_check.sh SUITE_JOBS): the n shards' collections are
    disjoint and together the whole collection; a malformed value is an error naming the variable."""
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent

    def collect(shard):
        env = dict(os.environ)
        env.pop("VLATTN_TEST_SHARD", None)
        if shard is not None:
            env["VLATTN_TEST_SHARD"] = shard
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                               "tests/test_cpp.py"], cwd=root, env=env, capture_output=True, text=True, timeout=300)

    full = [line for line in collect(None).stdout.splitlines() if "::" in line]
    assert len(full) > 10
    shards = [[line for line in collect(f"{i}/3").stdout.splitlines() if "::" in line] for i in range(3)]
    assert all(shards) and sorted(sum(shards, [])) == sorted(full)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    bad = collect("3/3")
    assert bad.returncode != 0 and "VLATTN_TEST_SHARD must be 'i/n'" in bad.stdout + bad.stderr


def test_describe_meta_says_when_t_sol_is_another_gpus():
    """T_SOL (and %SOL) are the H200's peaks on every device: the header says so on any other GPU, and not on an H200."""
    meta = {"device": "cuda", "torch": "2.11", "cuda": "13.0", "cudnn": 91900, "commit": "a514427", "driver": "580",
            "gpu": {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132, "l2_bytes": 50 * 2**20}}
    text = bench.describe_meta(meta)
    assert "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, L2 50 MiB)" in text and "not an H200" in text
    assert "989 TFLOP/s" in text and "4.8 TB/s" in text
    meta["gpu"]["name"] = "NVIDIA H200"
    assert "not an H200" not in bench.describe_meta(meta)


def test_floor_table_floor_is_above_t_sol_and_runs_on_a_run(capsys, monkeypatch):
    """bench/floor_table.py: with every ceiling below the H200's peaks, each workload's floor (a sum of stages) lies
    above its T_SOL (the max of two totals at the peaks), and the datasheet peaks themselves with no start give a
    floor no lower than T_SOL either; the script runs on a committed layers run and prints its summary."""
    import importlib.util
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("floor_table", root / "bench" / "floor_table.py")
    floor_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor_table)
    for w in workloads.load():
        measured = 1e-6 + sum(floor_table.stage_floors(w, 790e12, 700e12, 3.0e12))
        peaks = sum(floor_table.stage_floors(w, workloads.PEAK_FLOPS, workloads.PEAK_FLOPS, workloads.PEAK_BYTES_PER_S))
        t_sol = workloads.t_sol_us(w) * 1e-6
        assert measured > t_sol and peaks >= t_sol * (1 - 1e-9), f"{w.name}: floor {measured}, peaks {peaks}, T_SOL {t_sol}"
    run = root / "bench" / "runs" / "2026-12-05_d0279b1_h200_layers.json"
    monkeypatch.setattr("sys.argv", ["floor_table.py", str(run)])
    floor_table.main()
    out = capsys.readouterr().out
    assert "best PyTorch / floor: geomean" in out and out.count("\n034[") == 16 and out.count("\n007[") == 16
    # The cells follow the header: native (eager) µs, graph µs, floor / eager, floor / graph (the two percentages
    # were once printed in the other order under this header, and docs quoted eager numbers as graph replay's).
    header = next(line for line in out.splitlines() if line.startswith("workload")).replace("|", " ").split()
    row = next(line for line in out.splitlines() if line.startswith("007[B=1,S=128]")).replace("|", " ").split()
    cell = dict(zip(header, row))
    floor, eager, graph = float(cell["floor"]), float(cell["native"]), float(cell["graph"])
    assert eager != graph
    pct = {k: float(cell[k].rstrip("%")) for k in ("floor/T", "floor/Tg")}  # from the unrounded floor: ±0.2
    assert abs(pct["floor/T"] - 100 * floor / eager) < 0.2 and abs(pct["floor/Tg"] - 100 * floor / graph) < 0.2


def test_rule_audit_flags_only_workloads_faster_in_both_columns(tmp_path, capsys, monkeypatch):
    """bench/rule_audit.py: an alternative is a hit only where its graph-replay and eager medians are both at least
    --min-gain below the rule's; the rule's value is the one the --switch argument names first, whatever order the
    results come in."""
    import importlib.util
    import json
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("rule_audit", root / "bench" / "rule_audit.py")
    rule_audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rule_audit)
    cells = {  # workload: (rule eager, rule graph, alt eager, alt graph)
        "both": (100.0, 90.0, 95.0, 85.0),        # -5% / -5.6%: a hit
        "graph_only": (100.0, 90.0, 100.5, 85.0),  # eager not faster: no hit
        "slower": (100.0, 90.0, 110.0, 99.0),
    }
    results = []
    for name, (re_, rg, ae, ag) in cells.items():
        for kind, value, us in (("native", 2, ae), ("native_graph", 2, ag), ("native", 1, re_), ("native_graph", 1, rg)):
            results.append({"name": name, "impl": f"vlattn:{kind}[ATTN_X={value}]", "us_median": us})
    run = tmp_path / "audit.json"
    run.write_text(json.dumps({"meta": {"args": {"switch": "VLATTN_ATTN_X=1,2"}}, "results": results}))
    switch, values, _ = rule_audit.load(str(run))
    assert switch == "ATTN_X" and values == [1, 2]
    monkeypatch.setattr("sys.argv", ["rule_audit.py", str(run), "--min-gain", "0.02"])
    rule_audit.main()
    out = capsys.readouterr().out
    assert "rule value 1, alternatives [2]" in out
    faster = [line for line in out.splitlines() if "faster:" in line]
    assert len(faster) == 1 and "both graph 90.0->85.0" in faster[0], out


def test_compare_tuned_flags_a_dispatched_config_slower_than_the_fastest(tmp_path, capsys):
    """bench/compare_tuned.py: the committed table against its own timings reproduces every entry and flags
    nothing; the same timings with one entry's config made 10% slower than another there flag that shape, and
    a shape off the table is judged on the analytic rule's pick."""
    import copy
    import importlib.util
    import json
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("compare_tuned", root / "bench" / "compare_tuned.py")
    compare_tuned = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare_tuned)
    base = json.loads((root / "python" / "vlattn" / "data" / "gemm_tuned_h200.json").read_text())
    rows, summary = compare_tuned.compare(base, base)
    assert summary["flagged"] == [] and summary["base_entries_reproduced"] == summary["base_entries"] > 0
    assert {r["shape"] for r in rows if r["source"] == "table"} == set(base["entries"])
    other = copy.deepcopy(base)
    key = "1024,3584,3584"
    entry = base["entries"][key]
    for t in other["timings"].values():
        if f"{t['m']},{t['n']},{t['k']}" == key:
            fastest_else = min(us for name, us in t["us"].items() if name != entry and us is not None)
            t["us"][entry] = fastest_else * 1.10
    rows, summary = compare_tuned.compare(base, other)
    flagged = {r["shape"]: r for r in rows if r["flag"]}
    assert list(flagged) == [key] and flagged[key]["dispatched"] == entry and flagged[key]["loss"] >= 1.05
    assert summary["base_entries_reproduced"] == summary["base_entries"] - 1
    path = tmp_path / "other.json"
    path.write_text(json.dumps(other))
    assert compare_tuned.main([str(path)]) == 0
    assert f"flagged shapes (dispatched >= 1.05x the fastest): 1 ['{key}']" in capsys.readouterr().out


def test_intake_fit_recovers_a_known_model(tmp_path, capsys):
    """bench/intake_fit.py: timings made from the model itself (fixed 6 us, 90 GB/s per CTA, split-K 2 us + 0.5 us
    per MB of partials) fit back to those numbers with R^2 1; bare stream-K, swapped and untimed configs and shapes
    above --max-m are left out of the fit."""
    import importlib.util
    import json
    import math
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("intake_fit", root / "bench" / "intake_fit.py")
    intake_fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(intake_fit)

    def model_us(m, n, k, bm, bn, splits):
        ctas = math.ceil(m / bm) * math.ceil(n / bn) * splits
        us = 6.0 + math.ceil(ctas / 132) * (bm + bn) * (k / splits) * 2 / 90e3
        return us + (2.0 + 0.5 * m * n * splits * 4 / 1e6 if splits > 1 else 0.0)

    configs = {"t128x128x64_c1x1_coop": (128, 128, 1), "t64x128x64_c1x1_pingpong": (64, 128, 1),
               "t64x64x64_c1x1_pingpong": (64, 64, 1), "t128x128x64_c1x1_coop_streamk/splitk4": (128, 128, 4),
               "t64x128x64_c1x1_pingpong_psplit/splitk2": (64, 128, 2)}
    timings = {}
    for m, n, k in [(128, 512, 3584), (256, 3584, 3584), (392, 1024, 4096), (1024, 4096, 4096), (8192, 4096, 4096)]:
        us = {name: model_us(m, n, k, bm, bn, s) for name, (bm, bn, s) in configs.items()}
        us["t128x128x64_c1x1_coop_streamk"] = 1.0  # CUTLASS's own decomposition: not a simple grid
        us["t128x176x64_c1x1_coop_e16_swap"] = 1.0
        us["t128x256x64_c1x1_coop"] = None  # not timed (refused at this shape)
        timings[f"{m}x{n}x{k}"] = {"m": m, "n": n, "k": k, "us": us}
    rows = intake_fit.grid_rows(timings, max_m=1024, sm_count=132)
    assert len(rows) == 4 * len(configs)
    assert {r["config"] for r in rows} == set(configs)
    coef, r2, _ = intake_fit.fit(rows, "path_mb")
    assert r2 > 0.999999
    assert [round(c, 6) for c in coef] == [6.0, round(1e3 / 90, 6), 2.0, 0.5]  # 1 MB at 90 GB/s: 11.1 us
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"meta": {"sm_count": 132}, "timings": timings}))
    intake_fit.main([str(path)])
    out = capsys.readouterr().out
    assert "20 timings (M <= 1024, 132 SMs)" in out and "90.0 GB/s" in out and "R^2 1.000" in out


def test_gc_probe_finds_a_collection_inside_a_stalled_call(tmp_path, monkeypatch, capsys):
    """bench/micro/gc_probe.py on a fake bench: a timer whose sixth call runs a collection inside step() and reads
    100 µs against 10 for the rest: one stall, with a collection inside; the collector is left as it was found."""
    import gc
    import importlib.util
    import json
    import pathlib
    import types
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("gc_probe", root / "bench" / "micro" / "gc_probe.py")
    gc_probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc_probe)

    class FakeTimer:
        host_ahead = False

        def __call__(self, step, iters, warmup, host_us=None):
            for _ in range(warmup):
                step()
            return [float(step() or 10.0) for _ in range(iters)]

    def fake_main(args):
        calls = [0]

        def step():
            calls[0] += 1
            if calls[0] == 2 + 6:  # two warm-up calls, then the sixth timed one
                gc.collect(0)
                return 100.0
            return None
        FakeTimer()(step, 12, 2)
        return 0

    fake = types.ModuleType("vlattn.bench")
    fake.CudaTimer, fake.main = FakeTimer, fake_main
    import vlattn
    monkeypatch.setitem(__import__("sys").modules, "vlattn.bench", fake)
    monkeypatch.setattr(vlattn, "bench", fake, raising=False)
    was_enabled, hooks = gc.isenabled(), list(gc.callbacks)
    for mode in ("on", "off"):
        log = tmp_path / f"{mode}.json"
        assert gc_probe.main(["--gc", mode, "--log", str(log), "--", "--mode", "layers"]) == 0
        s = json.loads(log.read_text())["summary"]
        assert s["timed_calls"] == 12 and s["stalls_total"] == 1
        # gc.collect() runs the callbacks whether or not the collector is enabled: the stall has one inside.
        assert s["stalls_with_gc"] == 1 and s["with_gc"]["n"] >= 1 and s["collections"]["0"]["count"] >= 1
        assert gc.isenabled() == was_enabled and gc.callbacks == hooks
    assert "1 with a collection inside" in capsys.readouterr().out


def test_run_compare_attributes_the_movement(tmp_path, capsys):
    """bench/run_compare.py: per implementation the geomean of new / old µs, the best PyTorch's movement, and the
    × best geomeans of both runs, on two synthetic layers runs where only ours got faster (and one workload only
    the new run holds, which must be left out)."""
    import importlib.util
    import json
    import math
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("run_compare", root / "bench" / "run_compare.py")
    run_compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_compare)

    def run(native, graph, best, extra=False):
        rows = []
        names = ["007[B=1,S=128]", "034[B=2,Lq=128,Lv=196]"] + (["007[B=9,S=9]"] if extra else [])
        for i, w in enumerate(names):
            n, g, b = native[i % 2] * (1 + i), graph[i % 2] * (1 + i), best[i % 2] * (1 + i)
            rows += [{"name": w, "impl": "vlattn:native", "us_median": n, "best_pytorch_us": b, "x_best_pytorch": b / n,
                      "host_launch_us": 4.0 + extra},
                     {"name": w, "impl": "vlattn:native_graph", "us_median": g, "x_best_pytorch": b / g},
                     {"name": w, "impl": "compile", "us_median": b, "x_best_pytorch": 1.0},
                     {"name": w, "impl": "reference", "us_median": None}]
        return {"meta": {}, "results": rows}

    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(run((50.0, 80.0), (40.0, 70.0), (100.0, 200.0))))
    new.write_text(json.dumps(run((45.0, 72.0), (40.0, 63.0), (100.0, 200.0), extra=True)))
    c = run_compare.compare(str(old), str(new))
    g, lo, hi, n = c["impl"]["vlattn:native"]
    assert n == 2 and math.isclose(g, 0.9) and math.isclose(lo, 0.9) and math.isclose(hi, 0.9)
    g, lo, hi, n = c["impl"]["vlattn:native_graph"]
    assert n == 2 and math.isclose(g, math.sqrt(0.9)) and math.isclose(lo, 0.9) and math.isclose(hi, 1.0)
    assert math.isclose(c["best"][0], 1.0) and math.isclose(c["impl"]["compile"][0], 1.0)
    assert "reference" not in c["impl"]  # no timed cell in either run
    x_old, x_new = c["x_best"]["vlattn:native"]
    assert math.isclose(x_new / x_old, 1 / 0.9)  # the baseline held: the whole × best movement is ours
    assert run_compare.main([str(old), str(new), "--rows"]) == 0
    out = capsys.readouterr().out
    assert "007[B=1,S=128]" in out and "007[B=9,S=9]" not in out
    assert "host meter" not in c["impl"] and " meter" in out and " 1.25" in out  # the meter: 5.0 / 4.0 per launch


def test_run_compare_host_reading():
    """bench/run_compare.py's host reading: a workload counts only where our eager - graph gap moved >= 3 µs and the
    composite's eager µs >= 10%; it agrees when the gap widened on a slower host or narrowed on a faster one."""
    import importlib.util
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("run_compare", root / "bench" / "run_compare.py")
    run_compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_compare)

    def us(cells):  # {workload: (eager, graph, composite eager)}
        out = {}
        for w, (e, g, c) in cells.items():
            out[(w, "vlattn:native")], out[(w, "vlattn:native_graph")], out[(w, "composite")] = e, g, c
        return out

    old = us({"slower": (50, 45, 300), "faster": (80, 60, 600), "against": (50, 45, 300), "small_gap": (50, 45, 300),
              "steady_host": (50, 45, 300)})
    new = us({"slower": (60, 45, 600),    # gap 5 -> 15, host 2x slower: agrees
              "faster": (62, 60, 300),    # gap 20 -> 2, host 2x faster: agrees
              "against": (60, 45, 150),   # gap 5 -> 15 on a 2x faster host: against
              "small_gap": (52, 45, 600),  # gap moved 2 µs: not counted
              "steady_host": (70, 45, 320)})  # host moved 6.7%: not counted
    h = run_compare.host_reading(old, new)
    assert sorted(h["agree"]) == ["faster", "slower"] and h["disagree"] == ["against"]
    assert h["rows"]["slower"] == (5, 15, 2.0) and len(h["rows"]) == 5


def test_host_path_and_host_meter_recorded(monkeypatch):
    """A timer that takes host_us (CudaTimer) gets each impl's list and the record keeps its median as
    host_us_median; a timer without it (cpu_timer, the tests' fakes) is called as before and records none. Every
    record of the workload carries the host meter's reading, and host_line prints both; host_meter is None off
    CUDA and host_meter_summary takes one reading per workload."""
    (w,) = bench.select_workloads(workloads.load(), "007[B=1,S=128]")

    def impl(key):
        def build(c):
            out = torch.zeros(2)
            return bench.Runner(step=lambda: None, result=lambda: out)
        return bench.Impl(key, pytorch=False, needs_cuda=False, build=build)

    calls = []

    def timer_with_host(step, iters, warmup, host_us=None):
        calls.append(host_us is not None)
        host_us.extend([10.0 + len(calls)] * iters)
        return [50.0] * iters

    def plain_timer(step, iters, warmup):
        return [50.0] * iters

    monkeypatch.setattr(bench, "release_memory", lambda device: None)
    monkeypatch.setattr(bench.workloads, "make_inputs", lambda w, device, seed=None: {})
    real_meter = bench.host_meter
    monkeypatch.setattr(bench, "host_meter", lambda device: 4.25)
    opts = bench.Options(iters=4, warmup=0, check=False, seed=0, rounds=2, round_warmup=0)
    recs, _ = bench.bench_workload(w, [impl("vlattn:native"), impl("vlattn:native_graph")], torch.device("cpu"),
                                   timer_with_host, opts)
    assert calls and all(calls)
    by = {r["impl"]: r for r in recs}
    assert 10.0 < by["vlattn:native"]["host_us_median"] < 10.0 + len(calls) + 1
    assert all(r["host_launch_us"] == 4.25 for r in recs)
    line = bench.host_line(recs)
    assert line.startswith("    host: 4.25 µs per launch") and "vlattn:native " in line
    assert "vlattn:native_graph" not in line  # a replay's host time is one graph launch: not a host path
    recs, _ = bench.bench_workload(w, [impl("vlattn:native")], torch.device("cpu"), plain_timer, opts)
    assert "host_us_median" not in recs[0] and recs[0]["us_median"] == 50.0
    assert not bench._takes_host_us(plain_timer) and not bench._takes_host_us(bench.cpu_timer)
    assert bench._takes_host_us(timer_with_host)
    assert real_meter(torch.device("cpu")) is None
    rows = [{"name": "a", "host_launch_us": 3.0}, {"name": "a", "host_launch_us": 3.0},
            {"name": "b", "host_launch_us": 5.0}, {"name": "c", "host_launch_us": None}]
    assert bench.host_meter_summary(rows) == {"median": 4.0, "min": 3.0, "max": 5.0, "n": 2}
    assert bench.host_meter_summary([{"name": "a"}]) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the host meter launches CUDA kernels: needs a CUDA device")
def test_host_meter_reads_a_launch_time():
    us = bench.host_meter(torch.device("cuda", torch.cuda.current_device()))
    assert us is not None and 0.2 < us < 1000.0
