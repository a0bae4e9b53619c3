"""CPU tests of the GEMM config list and the shape -> config dispatch (no extension needed).

Run: PYTHONPATH=python python -m pytest -q tests/test_dispatch.py
"""
import re

import pytest

from vlattn import dispatch
from vlattn import workloads as W
from vlattn.gemm_configs import BY_NAME, DEFAULT_CONFIG, GEMM_CONFIGS, GemmConfig

H200_SMS = 132
STREAMK = "t128x128x64_c1x1_coop_streamk"
LARGE = "t128x256x64_c1x1_coop"
PINGPONG = "t64x128x64_c1x1_pingpong"
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

def test_small_m_picks_stream_k():
    # 1 x 28 tiles of 128x128 on 132 SMs: split K.
    assert dispatch.analytic_config(128, 3584, 3584, H200_SMS) == STREAMK


def test_large_m_picks_128x256():
    # 128 x 18 tiles of 128x256: many full waves.
    assert dispatch.analytic_config(16384, 4608, 3584, H200_SMS) == LARGE


def test_short_k_never_stream_k():
    assert dispatch.analytic_config(128, 3584, 512, H200_SMS) != STREAMK


def test_sm_count_is_an_input():
    # 28 tiles: stream-K on 132 SMs, but a full wave on a 28-SM part.
    assert dispatch.analytic_config(128, 3584, 3584, 28) != STREAMK


def test_analytic_picks_are_configs_for_every_workload_gemm():
    for w in W.load():
        for _, m, n, k, _ in W.projection_shapes(w):
            for sms in (H200_SMS, 114, 78):
                assert dispatch.analytic_config(m, n, k, sms) in BY_NAME, (w.name, m, n, k, sms)


# --------------------------------------------------------------------------------------------
# select_gemm_config: tuned table -> analytic -> default, limited to what was compiled
# --------------------------------------------------------------------------------------------

def test_select_uses_analytic_when_compiled(no_tuned_table):
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, ALL) == STREAMK
    assert dispatch.select_gemm_config(16384, 4608, 3584, H200_SMS, ALL) == LARGE


def test_select_falls_back_to_default_when_pick_not_compiled(no_tuned_table):
    compiled = frozenset({DEFAULT_CONFIG, PINGPONG})
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, compiled) == DEFAULT_CONFIG
    assert dispatch.select_gemm_config(16384, 4608, 3584, H200_SMS, compiled) == DEFAULT_CONFIG


def test_select_without_default_compiled_stays_in_compiled_set(no_tuned_table):
    compiled = frozenset({PINGPONG})
    for m in (1, 128, 541, 16384):
        assert dispatch.select_gemm_config(m, 3584, 3584, H200_SMS, compiled) == PINGPONG


def test_select_prefers_tuned_entry_when_compiled(tuned_table):
    tuned_table[(128, 3584, 3584)] = PINGPONG
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, ALL) == PINGPONG
    # A tuned pick that this build lacks falls through to the analytic rule.
    dispatch.select_gemm_config.cache_clear()
    assert dispatch.select_gemm_config(128, 3584, 3584, H200_SMS, ALL - {PINGPONG}) == STREAMK


def test_committed_tuned_table_names_known_configs():
    dispatch.tuned_table.cache_clear()
    for (m, n, k), name in dispatch.tuned_table().items():
        assert name in BY_NAME and m >= 0 and n > 0 and k > 0


# --------------------------------------------------------------------------------------------
# The config list
# --------------------------------------------------------------------------------------------

_NAME = re.compile(r"t(\d+)x(\d+)x(\d+)_c(\d+)x(\d+)_(coop|pingpong)(_streamk)?")


@pytest.mark.parametrize("cfg", GEMM_CONFIGS, ids=lambda c: c.name)
def test_config_name_describes_config(cfg):
    m = _NAME.fullmatch(cfg.name)
    assert m, f"{cfg.name} does not follow t<M>x<N>x<K>_c<M>x<N>_<coop|pingpong>[_streamk]"
    assert tuple(int(v) for v in m.group(1, 2, 3)) == cfg.tile
    assert tuple(int(v) for v in m.group(4, 5)) == cfg.cluster
    assert {"coop": "cooperative", "pingpong": "pingpong"}[m.group(6)] == cfg.schedule
    assert ("streamk" if m.group(7) else "persistent") == cfg.scheduler
    # Legal by construction: rebuilding it runs the legality checks again.
    assert GemmConfig(cfg.name, cfg.tile, cfg.cluster, cfg.schedule, cfg.scheduler, cfg.stages) == cfg


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
    ((128, 128, 64), "cooperative", "splitk"),
])
def test_illegal_config_rejected(tile, schedule, scheduler):
    with pytest.raises(ValueError, match="bad"):
        GemmConfig("bad", tile, (1, 1), schedule, scheduler)
