"""CPU tests of the GEMM config list and the shape -> config dispatch (no extension needed).

Run: PYTHONPATH=python python -m pytest -q tests/test_dispatch.py
"""
import re

import pytest

from vlattn import dispatch
from vlattn import workloads as W
from vlattn.gemm_configs import (BY_NAME, DEFAULT_CONFIG, GEMM_CONFIGS, PARALLEL_SPLITS, SPLITS, GemmConfig,
                                 expand_splits, is_valid_name, parse_name, split_name, splits_fit)

H200_SMS = 132
STREAMK = "t128x128x64_c1x1_coop_streamk"
LARGE = "t128x256x64_c2x1_coop_e64"
PINGPONG = "t64x128x64_c1x1_pingpong"
SMALL = "t64x64x64_c1x1_pingpong"
ALL = frozenset(BY_NAME)


@pytest.fixture
def no_tuned_table(monkeypatch):
    """Dispatch from the analytic rule only, whatever tuned table is committed."""
    monkeypatch.setattr(dispatch, "tuned_table", lambda: {})
    dispatch.select_gemm_config.cache_clear()
    yield
    dispatch.select_gemm_config.cache_clear()


@pytest.fixture
def tuned_table(monkeypatch):
    table = {}
    monkeypatch.setattr(dispatch, "tuned_table", lambda: table)
    dispatch.select_gemm_config.cache_clear()
    yield table
    dispatch.select_gemm_config.cache_clear()


# --------------------------------------------------------------------------------------------
# Analytic rule
# --------------------------------------------------------------------------------------------

# Measured best persistent config per shape (H200, 2026-11-30 smoke run, cold L2, µs in comments).
@pytest.mark.parametrize("m,n,k,best", [
    (128, 4608, 3584, PINGPONG),   # pingpong 20.4, coop 25.5, 128x256 39.9
    (128, 3584, 3584, SMALL),      # 18.6 / 24.3 / 39.7; tenth session: 64x64 16.0, 64x128 19.0 (+bias)
    (541, 3584, 3584, PINGPONG),   # 30.6 / 43.4 / 40.4
    (4096, 4608, 3584, DEFAULT_CONFIG),  # coop 199.7, 128x256 203.2, pingpong 327.7
    (8192, 4096, 4096, LARGE),     # 128x256 416.4, coop 424.3; ninth session: 128x256 in 2-CTA clusters
                                   # 371.9 / 388.6 (bias / none), alone 420.5 / 368.5
    (128, 1024, 4096, SMALL),      # 17.5 / 32.0 / 57.5 (64x64 not timed at this shape: 32 tiles, one wave,
                                   # like 128x512x3584 where it measured 11.9 against 14.8)
    # Tenth session (python -m vlattn.tune --max-m 2048, 15 iters, +bias), 64x64 / 64x128 ping-pong:
    (128, 512, 3584, SMALL),       # 11.9 / 14.8
    (1024, 512, 3584, SMALL),      # 13.4 / 15.6
    (2048, 512, 3584, PINGPONG),   # 19.8 / 16.6 (64x64 needs two waves)
    (256, 3584, 3584, PINGPONG),   # 21.2 / 19.0 (two waves)
    (784, 1024, 4096, PINGPONG),   # 29.0 / 22.4 (two waves)
    (256, 4096, 4096, PINGPONG),   # 24.1 / 22.1 (two waves)
    (512, 3584, 3584, DEFAULT_CONFIG),  # 128x128 25.8, 64x128 28.1, 64x64 34.8
])
def test_analytic_matches_measured_best(m, n, k, best):
    assert dispatch.analytic_config(m, n, k, H200_SMS) == best


def test_side_by_side_pair_counts_both_grids():
    """034's K and V GEMMs at 392 vision rows run side by side on two streams. Alone, 64x64 is one
    wave (112 tiles) and wins; as a pair its 224 tiles are two waves, 64x128's 112 one (tenth session:
    picked alone, 64x64 made 034 B2 Lq128 9.7% slower)."""
    assert dispatch.analytic_config(392, 1024, 4096, H200_SMS) == SMALL
    assert dispatch.analytic_config(392, 1024, 4096, H200_SMS, concurrent=2) == PINGPONG


def test_analytic_never_picks_stream_k_heuristic():
    """Stream-K's own decomposition measured slower on every small-M shape: only its split-K variants."""
    for m in (1, 128, 541, 4096, 16384):
        assert dispatch.analytic_config(m, 3584, 3584, H200_SMS) != STREAMK


def test_analytic_never_splits():
    """Every '/splitk<N>' measured slower than the best whole-K config (tuner, 2026-11-30)."""
    for m in (1, 128, 541, 1024, 4096):
        for n, k in ((512, 3584), (3584, 3584), (1024, 4096)):
            assert "/" not in dispatch.analytic_config(m, n, k, H200_SMS)


def test_analytic_never_picks_tuned_only_configs():
    """rule=False configs (the wave-fitted mid-M widths) are reached through the tuned table only: not
    from the full list, and not when they are the only candidates."""
    tuned_only = [c.name for c in GEMM_CONFIGS if not c.rule]
    assert tuned_only, "expected the mid-M fitted widths in the list"
    for m in (1, 128, 512, 613, 1024, 2164, 3136, 4096, 16384):
        for n, k in ((512, 3584), (3584, 3584), (1024, 4096), (4096, 4096)):
            assert dispatch.analytic_config(m, n, k, H200_SMS) not in tuned_only
    assert dispatch.analytic_config(613, 3584, 3584, H200_SMS, tuned_only) is None


def test_sm_count_is_an_input():
    # 28 tiles of 128x128: under a wave on 132 SMs (the 64x64 tile quadruples them and still fits one
    # wave), one full wave on a 28-SM part (where 112 tiles of 64x64 would need four).
    assert dispatch.analytic_config(128, 3584, 3584, H200_SMS) == SMALL
    assert dispatch.analytic_config(128, 3584, 3584, 28) == DEFAULT_CONFIG


def test_analytic_stays_in_candidates():
    assert dispatch.analytic_config(128, 3584, 3584, H200_SMS, {DEFAULT_CONFIG, LARGE}) == DEFAULT_CONFIG
    assert dispatch.analytic_config(128, 3584, 3584, H200_SMS, {STREAMK, STREAMK + "/splitk4"}) is None


def test_analytic_picks_are_configs_for_every_workload_gemm():
    for w in W.load():
        for _, m, n, k, _ in W.projection_shapes(w):
            for sms in (H200_SMS, 114, 78):
                assert is_valid_name(dispatch.analytic_config(m, n, k, sms)), (w.name, m, n, k, sms)


# --------------------------------------------------------------------------------------------
# select_gemm_config: tuned table -> analytic -> default, limited to what was compiled
# --------------------------------------------------------------------------------------------

def test_select_uses_analytic_when_compiled(no_tuned_table):
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, ALL) == SMALL
    assert dispatch.select_gemm_config(8192, 4096, 4096, H200_SMS, ALL) == LARGE


def test_select_analytic_chooses_among_compiled(no_tuned_table):
    compiled = frozenset({DEFAULT_CONFIG, LARGE})
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, compiled) == DEFAULT_CONFIG
    assert dispatch.select_gemm_config(8192, 4096, 4096, H200_SMS, compiled) == LARGE


def test_select_stream_k_only_build_uses_it(no_tuned_table):
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, frozenset({STREAMK})) == STREAMK


def test_select_without_default_compiled_stays_in_compiled_set(no_tuned_table):
    compiled = frozenset({PINGPONG})
    for m in (1, 128, 541, 16384):
        assert dispatch.select_gemm_config(m, 3584, 3584, H200_SMS, compiled) == PINGPONG


def test_select_prefers_tuned_entry_when_compiled(tuned_table):
    tuned_table[(128, 3584, 3584)] = PINGPONG
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, ALL) == PINGPONG
    # A tuned pick that this build lacks falls through to the analytic rule.
    tuned_table[(8192, 4096, 4096)] = STREAMK
    dispatch.select_gemm_config.cache_clear()
    assert dispatch.select_gemm_config(8192, 4096, 4096, H200_SMS, ALL - {STREAMK}) == LARGE


def test_committed_tuned_table_names_known_configs():
    dispatch.tuned_table.cache_clear()
    for (m, n, k), name in dispatch.tuned_table().items():
        assert is_valid_name(name) and m >= 0 and n > 0 and k > 0


# --------------------------------------------------------------------------------------------
# The config list
# --------------------------------------------------------------------------------------------

_NAME = re.compile(r"t(\d+)x(\d+)x(\d+)_c(\d+)x(\d+)_(coop|pingpong)(_streamk|_psplit)?(?:_e(\d+))?(_swap)?")


@pytest.mark.parametrize("cfg", GEMM_CONFIGS, ids=lambda c: c.name)
def test_config_name_describes_config(cfg):
    m = _NAME.fullmatch(cfg.name)
    assert m, f"{cfg.name} does not follow t<M>x<N>x<K>_c<M>x<N>_<coop|pingpong>[_streamk|_psplit][_e<N>][_swap]"
    assert tuple(int(v) for v in m.group(1, 2, 3)) == cfg.tile
    assert tuple(int(v) for v in m.group(4, 5)) == cfg.cluster
    assert {"coop": "cooperative", "pingpong": "pingpong"}[m.group(6)] == cfg.schedule
    assert {None: "persistent", "_streamk": "streamk", "_psplit": "splitk"}[m.group(7)] == cfg.scheduler
    assert int(m.group(8) or 0) == cfg.epi_n
    assert bool(m.group(9)) == cfg.swap_ab
    # Legal by construction: rebuilding it runs the legality checks again.
    assert GemmConfig(cfg.name, cfg.tile, cfg.cluster, cfg.schedule, cfg.scheduler, cfg.stages, cfg.efficiency,
                      cfg.epi_n, cfg.rule, cfg.swap_ab) == cfg
    assert 0 < cfg.efficiency <= 1


def test_config_list_shape():
    names = [c.name for c in GEMM_CONFIGS]
    assert len(set(names)) == len(names)
    assert names[0] == DEFAULT_CONFIG  # the C++ op runs entry 0 for config=""
    assert set(BY_NAME) == set(names)


@pytest.mark.parametrize("tile,schedule,scheduler", [
    ((64, 128, 64), "cooperative", "persistent"),  # cooperative: two warpgroups need 128 rows
    ((96, 128, 64), "pingpong", "persistent"),  # 64-row warpgroup granularity
    ((128, 120, 64), "cooperative", "persistent"),  # N not a multiple of 16
    ((128, 128, 32), "cooperative", "persistent"),  # K tile below 64
    ((64, 128, 64), "pingpong", "streamk"),  # sm90 stream-K needs the cooperative kernel
    ((128, 128, 64), "warpspecialized", "persistent"),
    ((128, 128, 64), "cooperative", "parallel"),  # unknown scheduler
    ((64, 64, 64), "pingpong", "splitk"),  # parallel split-K in the rule (the default rule=True)
])
def test_illegal_config_rejected(tile, schedule, scheduler):
    with pytest.raises(ValueError, match="bad"):
        GemmConfig("bad", tile, (1, 1), schedule, scheduler)


@pytest.mark.parametrize("cluster", [(3, 1), (8, 1), (1, 4), (4, 4)])
def test_illegal_cluster_rejected(cluster):
    with pytest.raises(ValueError, match="cluster"):
        GemmConfig("bad", (128, 128, 64), cluster, "cooperative", "persistent")


def test_swapped_config_must_stay_out_of_the_rule():
    with pytest.raises(ValueError, match="tuned-table only"):
        GemmConfig("bad", (64, 112, 64), (1, 1), "pingpong", "persistent", swap_ab=True)  # rule defaults to True
    with pytest.raises(ValueError, match="tuned-table only"):
        GemmConfig("bad", (128, 128, 64), (1, 1), "cooperative", "streamk", rule=False, swap_ab=True)


def test_swapped_config_counts_tokens_along_its_n():
    """A swapped config's tile is (weight rows, tokens): the wave model counts its tiles that way."""
    cfg = next(c for c in GEMM_CONFIGS if c.swap_ab)
    tm, tn, _ = cfg.tile
    assert cfg.out_tile() == (tn, tm)
    # ceil(M / tokens) x ceil(N / weight rows) tiles; one wave on 132 SMs, two with one more row of tiles.
    m, n = 7 * tn, 16 * tm
    assert dispatch.estimated_cost(cfg, m, n, H200_SMS) == tm * tn / cfg.efficiency
    assert dispatch.estimated_cost(cfg, 9 * tn, n, H200_SMS) == 2 * tm * tn / cfg.efficiency


@pytest.mark.parametrize("epi_n", [24, 48, 512])
def test_illegal_epilogue_subtile_rejected(epi_n):
    with pytest.raises(ValueError, match="epilogue subtile"):
        GemmConfig("bad", (128, 256, 64), (1, 1), "cooperative", "persistent", epi_n=epi_n)


def test_split_names():
    assert parse_name(STREAMK) == (STREAMK, 1)
    assert parse_name(split_name(STREAMK, 4)) == (STREAMK, 4) and split_name(STREAMK, 4) == STREAMK + "/splitk4"
    assert split_name(STREAMK, 1) == STREAMK
    for bad in (STREAMK + "/splitk1", STREAMK + "/splitk17", STREAMK + "/split4", STREAMK + "/splitkx", STREAMK + "/",
                STREAMK + "/splitk04", STREAMK + "/splitk004", STREAMK + "/splitk²"):
        with pytest.raises(ValueError, match="splitk<N>"):
            parse_name(bad)
        assert not is_valid_name(bad)
    assert not is_valid_name(DEFAULT_CONFIG + "/splitk4")  # persistent configs do not split
    assert not is_valid_name(STREAMK + "/splitk4", frozenset({DEFAULT_CONFIG}))  # not compiled
    assert is_valid_name(STREAMK + "/splitk16")
    assert expand_splits([DEFAULT_CONFIG, STREAMK]) == [DEFAULT_CONFIG, STREAMK] + [split_name(STREAMK, s) for s in SPLITS]


def test_parallel_split_names():
    """A parallel split-K config always splits: valid only with '/splitk<N>', timed only at PARALLEL_SPLITS, and at
    a K that cuts into N equal slices of a multiple of 8 columns."""
    psplit = next(c.name for c in GEMM_CONFIGS if c.scheduler == "splitk")
    assert not is_valid_name(psplit)
    assert is_valid_name(split_name(psplit, 8)) and is_valid_name(split_name(psplit, 3))
    assert expand_splits([psplit, DEFAULT_CONFIG]) == [split_name(psplit, s) for s in PARALLEL_SPLITS] + [DEFAULT_CONFIG]
    for k in (3584, 4096):
        assert all(splits_fit(split_name(psplit, s), k) for s in PARALLEL_SPLITS)
    assert splits_fit(split_name(psplit, 7), 3584) and not splits_fit(split_name(psplit, 7), 4096)
    assert not splits_fit(split_name(psplit, 16), 3592)  # 224.5 columns
    assert not splits_fit(split_name(psplit, 16), 4000)  # 250 columns: not whole 16-byte rows
    assert splits_fit(STREAMK + "/splitk3", 4000) and splits_fit(DEFAULT_CONFIG, 1)  # other configs: any K


def test_tuner_leaves_out_splits_that_do_not_fit():
    """The tuner times a parallel split-K count only where it divides K (the op refuses the others)."""
    from vlattn.tune import configs_for_shape
    psplit = next(c.name for c in GEMM_CONFIGS if c.scheduler == "splitk")
    names = expand_splits([DEFAULT_CONFIG, psplit, STREAMK]) + [split_name(psplit, 7)]
    assert configs_for_shape(names, 128, 512, 3584, H200_SMS) == names
    assert configs_for_shape(names, 128, 512, 4096, H200_SMS) == [n for n in names if n != split_name(psplit, 7)]
    kept = configs_for_shape(names, 128, 512, 4000, H200_SMS)  # 2000 and 1000 columns fit; 500, 250 and 571.4 do not
    assert [n for n in kept if n.startswith(psplit)] == [split_name(psplit, 2), split_name(psplit, 4)]
    assert DEFAULT_CONFIG in kept and STREAMK + "/splitk3" in kept


def test_tuner_leaves_out_splits_where_the_grid_fills_a_wave():
    """A split variant (parallel or stream-K) is timed only where its config's own whole-K grid has fewer tiles
    than SMs; whole-K configs are timed everywhere."""
    from vlattn.tune import configs_for_shape
    by_tile = {c.out_tile(): c.name for c in GEMM_CONFIGS if c.scheduler == "splitk"}
    p64, p128 = by_tile[(64, 64)], by_tile[(64, 128)]
    names = expand_splits([DEFAULT_CONFIG, p64, p128, STREAMK])
    whole = [n for n in names if "/" not in n]
    assert configs_for_shape(names, 392, 1024, 4096, H200_SMS) == names  # 112 and 56 tiles; 128x128: 32
    # 1024 x 512: 128 tiles of 64x64 (under 132), 64 of 64x128, 32 of 128x128; 1056 x 512: 136 of 64x64 (a full wave)
    assert configs_for_shape(names, 1024, 512, 3584, H200_SMS) == names
    kept = configs_for_shape(names, 1056, 512, 3584, H200_SMS)
    assert not any(n.startswith(p64 + "/") for n in kept) and split_name(p128, 2) in kept
    assert STREAMK + "/splitk2" in kept
    # 2048 x 1024: 128 tiles of 128x128 (stream-K splits kept); 2176 x 1024: 136 (left out, the whole-K one kept)
    assert STREAMK + "/splitk8" in configs_for_shape(names, 2048, 1024, 4096, H200_SMS)
    kept = configs_for_shape(names, 2176, 1024, 4096, H200_SMS)
    assert STREAMK in kept and not any(n.startswith(STREAMK + "/") for n in kept)
    assert configs_for_shape(names, 8192, 4096, 4096, H200_SMS) == whole
    assert configs_for_shape(names, 8192, 4096, 4096, 1 << 30) == names  # --all-splits


def test_parallel_split_config_rules():
    with pytest.raises(ValueError, match="tuned-table only"):
        GemmConfig("bad", (64, 64, 64), (1, 1), "pingpong", "splitk")
    with pytest.raises(ValueError, match="tuned-table only|not swapped"):
        GemmConfig("bad", (64, 64, 64), (1, 1), "pingpong", "splitk", rule=False, swap_ab=True)
    assert all(not c.rule and not c.swap_ab for c in GEMM_CONFIGS if c.scheduler == "splitk")
    # The wave model never sees them (dispatch.analytic_config's pool is the persistent rule configs).
    names = {c.name for c in GEMM_CONFIGS if c.scheduler == "splitk"}
    for m, n, k in ((128, 512, 3584), (392, 1024, 4096), (8192, 4096, 4096)):
        assert dispatch.analytic_config(m, n, k, H200_SMS) not in names


def test_cpp_wave_model_matches_python():
    """The QKV 'gemm' config picks its GEMMs in C++ (gemm_analytic_pick): the same choice as
    dispatch.analytic_config for every projection shape, split-K range and SM count."""
    from vlattn import _ext
    if _ext.LOAD_ERROR is not None:
        pytest.skip(f"extension not loaded: {_ext.LOAD_ERROR}")
    compiled = [c["name"] for c in _ext._C.gemm_configs()]
    if set(compiled) != set(BY_NAME):
        pytest.skip("a VLATTN_GEMM_CONFIGS subset build")
    shapes = {(m, n, k) for w in W.load() for _, m, n, k, _ in W.projection_shapes(w)}
    shapes |= {(m, n, k) for m in (1, 64, 127, 128, 129, 256, 300, 512, 613, 1000, 1024, 1568, 2048, 3000, 8192)
               for n, k in ((512, 3584), (3584, 3584), (1024, 4096), (4096, 4096), (256, 256), (512, 512))}
    for sms in (H200_SMS, 114, 78, 16):
        for m, n, k in sorted(shapes):
            assert _ext._C.gemm_analytic_config(m, n, k, sms) == dispatch.analytic_config(m, n, k, sms), (m, n, k, sms)
            for pair in (1, 2):
                assert (_ext._C.gemm_analytic_config(m, n, k, sms, concurrent=pair)
                        == dispatch.analytic_config(m, n, k, sms, concurrent=pair)), (m, n, k, sms, pair)


def test_cpp_tuned_table_matches_python():
    """The QKV path's plain GEMMs pick in C++ (gemm_pick): the committed tuned table, built into the
    registry, for a GEMM alone, else the wave model. Alone, that is select_gemm_config's choice for every
    table shape and projection shape; side by side (concurrent 2) it is the wave model's pair pick even on
    a table shape."""
    from vlattn import _ext
    if _ext.LOAD_ERROR is not None:
        pytest.skip(f"extension not loaded: {_ext.LOAD_ERROR}")
    compiled = frozenset(c["name"] for c in _ext._C.gemm_configs())
    if compiled != frozenset(BY_NAME):
        pytest.skip("a VLATTN_GEMM_CONFIGS subset build")
    table = dispatch.tuned_table()
    assert table, "the committed tuned table has entries"
    shapes = set(table) | {(m, n, k) for w in W.load() for _, m, n, k, _ in W.projection_shapes(w)}
    for sms in (H200_SMS, 78):
        for m, n, k in sorted(shapes):
            assert (_ext._C.gemm_pick_config(m, n, k, sms)
                    == dispatch.select_gemm_config(m, n, k, sms, compiled)), (m, n, k, sms)
            assert (_ext._C.gemm_pick_config(m, n, k, sms, concurrent=2)
                    == dispatch.analytic_config(m, n, k, sms, concurrent=2)), (m, n, k, sms)
    # A table entry the wave model would not pick is really taken from the table (the test can fail).
    differs = [(m, n, k) for (m, n, k), name in table.items() if name != dispatch.analytic_config(m, n, k, H200_SMS)]
    assert differs
    m, n, k = differs[0]
    assert _ext._C.gemm_pick_config(m, n, k, H200_SMS) == table[(m, n, k)]


def test_cpp_pick_prints_each_decision_once_under_vlattn_log():
    """VLATTN_LOG=1: the C++ picks (the QKV path's plain GEMMs) print each decision once, with its source,
    as vlattn.dispatch does; without it they print nothing."""
    import os
    import subprocess
    import sys
    from vlattn import _ext
    if _ext.LOAD_ERROR is not None:
        pytest.skip(f"extension not loaded: {_ext.LOAD_ERROR}")
    if frozenset(c["name"] for c in _ext._C.gemm_configs()) != frozenset(BY_NAME):
        pytest.skip("a VLATTN_GEMM_CONFIGS subset build")
    (m, n, k), name = next(iter(sorted(dispatch.tuned_table().items())))
    code = ("from vlattn import _ext\n"
            f"for _ in range(2):\n"
            f"    _ext._C.gemm_pick_config({m}, {n}, {k}, 132, log=True)\n"
            f"    _ext._C.gemm_pick_config({m}, {n}, {k}, 132, concurrent=2, log=True)\n")
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(dispatch.__file__)))
    env = {key: v for key, v in os.environ.items() if key != "VLATTN_LOG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    quiet = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert "vlattn: pick gemm" not in quiet.stderr
    loud = subprocess.run([sys.executable, "-c", code], env={**env, "VLATTN_LOG": "1"}, capture_output=True,
                          text=True, timeout=120)
    assert loud.returncode == 0, loud.stderr
    lines = [line for line in loud.stderr.splitlines() if line.startswith("vlattn: pick gemm")]
    pair = dispatch.analytic_config(m, n, k, 132, concurrent=2)
    assert lines == [f"vlattn: pick gemm M={m} N={n} K={k} -> {name} (tuned)",
                     f"vlattn: pick gemm M={m} N={n} K={k} (2 side by side) -> {pair} (analytic)"], loud.stderr


# --------------------------------------------------------------------------------------------
# The tuning script's table logic (the timing itself needs a GPU)
# --------------------------------------------------------------------------------------------

def test_tune_best_entries_merges_bias_and_skips_failed_configs():
    from vlattn import tune
    timings = {
        "128x3584x3584": {"m": 128, "n": 3584, "k": 3584, "bias": False, "us": {"a": 10.0, "b": 12.0, "c": 1.0}},
        "128x3584x3584+b": {"m": 128, "n": 3584, "k": 3584, "bias": True, "us": {"a": 11.0, "b": 8.0, "c": None}},
        "1x8x8": {"m": 1, "n": 8, "k": 8, "bias": False, "us": {"a": None}},
    }
    # a: 21, b: 20, c failed on one variant -> never chosen; a shape where every config failed has no entry.
    assert tune.best_entries(timings, H200_SMS) == {"128,3584,3584": "b"}


def test_tune_entry_needs_to_beat_the_rule_by_min_gain():
    from vlattn import tune
    rule = dispatch.analytic_config(16384, 4096, 4096, H200_SMS)
    other = next(name for name in BY_NAME if name != rule)

    def timings(other_us):
        return {"s": {"m": 16384, "n": 4096, "k": 4096, "bias": False, "us": {rule: 100.0, other: other_us}}}

    assert tune.best_entries(timings(99.0), H200_SMS) == {}  # 1% faster: noise, the rule stays
    assert tune.best_entries(timings(90.0), H200_SMS) == {"16384,4096,4096": other}


def test_tune_without_gpu_exits_2(monkeypatch):
    from vlattn import tune
    monkeypatch.setattr(tune.torch.cuda, "is_available", lambda: False)
    assert tune.main([]) == 2


# --------------------------------------------------------------------------------------------
# The committed tuned table (python -m vlattn.tune on the H200)
# --------------------------------------------------------------------------------------------

def test_committed_tuned_table_is_consistent():
    """Every entry names a compiled-list config, covers a projection shape of the workloads, is the
    fastest (with and without bias summed) of the timings recorded beside it, and beats the analytic
    rule's choice by the table's min_gain (shapes without an entry are the rule's)."""
    import json
    from importlib import resources

    text = resources.files("vlattn").joinpath("data", "gemm_tuned_h200.json").read_text()
    table = json.loads(text)
    meta = table["meta"]
    assert meta["gpu"].startswith("NVIDIA H200") and meta["date"] and meta["tool"] == "python -m vlattn.tune"
    shapes = {(m, n, k) for w in W.load() for _, m, n, k, _ in W.projection_shapes(w)}
    totals = {}
    for t in table["timings"].values():
        row = totals.setdefault((t["m"], t["n"], t["k"]), {})
        for name, us in t["us"].items():
            row[name] = row.get(name, 0.0) + (float("inf") if us is None else us)
    assert table["entries"], "empty tuned table"
    for key, name in table["entries"].items():
        m, n, k = (int(v) for v in key.split(","))
        assert is_valid_name(name), f"{key}: unknown config {name}"
        assert (m, n, k) in shapes, f"{key}: not a projection shape of the workloads"
        row = totals[(m, n, k)]
        assert min(row, key=row.get) == name, f"{key}: {name} is not the fastest timed"
        rule = dispatch.analytic_config(m, n, k, meta["sm_count"], row.keys())
        assert row[rule] >= meta["min_gain"] * row[name], f"{key}: {name} does not beat the rule's {rule} by min_gain"
    assert dispatch.tuned_table() == {tuple(int(v) for v in key.split(",")): name
                                      for key, name in table["entries"].items()}


def test_tuner_rotates_the_config_order():
    """Each config leads exactly once per len(configs) rounds, and every round times every config once."""
    from vlattn.tune import round_orders
    names = ["a", "b", "c"]
    orders = round_orders(names, 4)
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(sorted(o) == names for o in orders)
    assert round_orders([], 2) == [[], []]
    assert round_orders(names, 1) == [names]


def test_tuner_rotates_cublas_with_the_configs(monkeypatch, capsys):
    """cuBLAS takes a turn in every round's rotation (not one block after the configs), a config that is
    wrong on a shape is never timed, and each column's median comes from its own samples. A config the
    full-wave rule leaves out is never called, is listed under "left_out" and prints "skip"; a wrong one
    prints "FAIL"."""
    import torch

    from vlattn import bench, tune

    order = []

    class FakeTimer:
        def __init__(self, device, host_ahead=False):
            assert host_ahead  # the tuner's default: GPU spans with the host queued ahead

        def __call__(self, step, iters, warmup):
            step()
            order.append(calls[-1])
            return [{"good": 10.0, "other": 20.0, tune._CUBLAS: 15.0}[calls[-1]]] * iters

    calls = []

    def fake_linear(x, w, b, out=None, config=None):
        calls.append(config)
        ref = torch.matmul(x, w.t()) + b
        out.copy_(ref if config != "wrong" else torch.zeros_like(ref))
        return out

    def fake_cublas(x, w, b=None):
        calls.append(tune._CUBLAS)
        return torch.matmul(x, w.t()) if b is None else torch.matmul(x, w.t()) + b

    monkeypatch.setattr(bench, "CudaTimer", FakeTimer)
    monkeypatch.setattr(tune, "linear", fake_linear)
    monkeypatch.setattr(tune.F, "linear", fake_cublas)
    shape = bench.GemmShape(8, 16, 32, True)
    psplit = split_name(next(c.name for c in GEMM_CONFIGS if c.scheduler == "splitk"), 2)
    timings = tune.measure([shape], ["good", "wrong", "other", psplit], torch.device("cpu"), iters=6, warmup=0,
                           seed=0, rounds=3, sm_count=1)  # one SM: the split's one-tile grid fills a wave
    t = timings[shape.label]
    assert t["us"] == {"good": 10.0, "wrong": None, "other": 20.0, psplit: None} and t["cublas_us"] == 15.0
    assert t["left_out"] == [psplit] and psplit not in calls
    printed = capsys.readouterr().out
    assert "wrong=FAIL" in printed and f"{psplit}=skip" in printed and "good=10.0" in printed
    assert "wrong" not in order
    assert order == ["good", "other", tune._CUBLAS, "other", tune._CUBLAS, "good", tune._CUBLAS, "good", "other"]
