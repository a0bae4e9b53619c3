"""CPU tests of vlattn.reference (exact seed references, generalized) and vlattn.workloads.

Run: PYTHONPATH=python python -m pytest -q tests/test_reference.py
Seed comparisons need the SOL-ExecBench seeds ($VLATTN_SEEDS_DIR or <repo>/../shared/sol_execbench)
and are skipped with a reason when they are absent.
"""

import inspect
import json
import math

import pytest
import torch

from vlattn import reference as R
from vlattn import workloads as W

BF16 = torch.bfloat16
SEEDS_MISSING = "SOL-ExecBench seeds not found (set VLATTN_SEEDS_DIR or provide <repo>/../shared/sol_execbench)"


def seed_or_skip(problem):
    seed = R.load_seed(problem)
    if seed is None:
        pytest.skip(SEEDS_MISSING)
    return seed


def small(problem, batch, *lens):
    """A non-benchmark shape of a problem (the seeds hard-code hidden sizes and head counts, not lengths)."""
    names = ("seq_len",) if problem == "007" else ("lang_seq_len", "vision_seq_len")
    return W.Workload(problem, -1, "test", {"batch_size": batch, **dict(zip(names, lens))}, atol=0.01)


def rel_err(out, ref):
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


# --------------------------------------------------------------------------------------------
# Bitwise equality with the seeds
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch,seq_len", [(1, 17), (2, 33), (1, 128)])
def test_mrope_self_attention_matches_seed_bitwise(batch, seq_len):
    seed = seed_or_skip("007")
    inputs = W.make_inputs(small("007", batch, seq_len), "cpu", seed=seq_len)
    assert torch.equal(R.mrope_self_attention(**inputs), seed.run(**inputs))


@pytest.mark.parametrize("batch,lang_len,vision_len", [(1, 9, 20), (2, 16, 200), (1, 37, 411)])
def test_vision_cross_attention_matches_seed_bitwise(batch, lang_len, vision_len):
    seed = seed_or_skip("034")
    inputs = W.make_inputs(small("034", batch, lang_len, vision_len), "cpu", seed=lang_len)
    assert torch.equal(R.vision_cross_attention(**inputs), seed.run(**inputs))


def test_make_inputs_matches_seed_get_inputs():
    seed = seed_or_skip("034")
    w = small("034", 2, 5, 400)  # Lv > 2 * 196: two temporal steps plus a partial third
    torch.manual_seed(3)
    expected = seed.get_inputs(w.axes, "cpu")
    torch.manual_seed(3)
    got = W.make_inputs(w, "cpu")
    assert list(got) == list(expected)
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


@pytest.mark.parametrize("problem", ["007", "034"])
def test_make_inputs_uses_seed_argument_order(problem):
    seed = seed_or_skip(problem)
    w = small(problem, 1, 4) if problem == "007" else small(problem, 1, 4, 4)
    assert list(W.make_inputs(w, "cpu", seed=0)) == list(inspect.signature(seed.run).parameters)


# --------------------------------------------------------------------------------------------
# Generalisations (small head counts: the reference infers them from the weights)
# --------------------------------------------------------------------------------------------

def small_mrope_inputs(batch=2, seq_len=11, hidden=192, num_heads=4, num_kv_heads=2, head_dim=128, seed=0):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(BF16)

    q_dim, kv_dim = num_heads * head_dim, num_kv_heads * head_dim
    return dict(
        hidden_states=randn(batch, seq_len, hidden),
        q_weight=randn(q_dim, hidden, scale=0.05), q_bias=randn(q_dim, scale=0.05),
        k_weight=randn(kv_dim, hidden, scale=0.05), k_bias=randn(kv_dim, scale=0.05),
        v_weight=randn(kv_dim, hidden, scale=0.05), v_bias=randn(kv_dim, scale=0.05),
        o_weight=randn(hidden, q_dim, scale=0.05),
        cos=randn(3, batch, seq_len, head_dim), sin=randn(3, batch, seq_len, head_dim),
    )


def per_channel_mrope(x, cos, sin, section):
    """Independent formulation: channel d reads plane p(d); its rotate-half partner is d -/+ D/2."""
    head_dim = x.shape[-1]
    plane = torch.repeat_interleave(torch.arange(len(section)) % 3, torch.tensor(section))
    channel = torch.arange(head_dim)
    cos_d = cos[plane, :, :, channel].permute(1, 2, 0).unsqueeze(1)  # [B, 1, S, D]
    sin_d = sin[plane, :, :, channel].permute(1, 2, 0).unsqueeze(1)
    half = head_dim // 2
    partner = (channel + half) % head_dim
    sign = torch.where(channel < half, -1.0, 1.0).to(x.dtype)
    return x * cos_d + (x[..., partner] * sign) * sin_d


def test_hf_mrope_section_matches_per_channel_plane_map():
    inputs = small_mrope_inputs()
    proj = {k: v for k, v in inputs.items() if k != "o_weight"}
    q_hf, k_hf, v_hf = R.mrope_qkv(**proj, mrope_section=R.MROPE_SECTION_HF)
    q_seed, _, v_seed = R.mrope_qkv(**proj)
    assert not torch.equal(q_hf, q_seed)
    assert torch.equal(v_hf, v_seed)

    x = inputs["hidden_states"]
    bsz, seq_len, _ = x.shape
    for got, w, b in ((q_hf, "q_weight", "q_bias"), (k_hf, "k_weight", "k_bias")):
        raw = torch.nn.functional.linear(x, inputs[w], inputs[b]).view(bsz, seq_len, -1, 128).transpose(1, 2)
        expected = per_channel_mrope(raw, inputs["cos"], inputs["sin"], R.MROPE_SECTION_HF)
        assert torch.equal(got, expected)


def test_mrope_section_must_cover_head_dim():
    inputs = small_mrope_inputs()
    with pytest.raises(ValueError, match="sum to head_dim"):
        R.mrope_self_attention(**inputs, mrope_section=(32, 48, 40))


def test_causal_flag_equals_explicit_causal_mask():
    inputs = small_mrope_inputs(seq_len=19)
    bsz, seq_len = inputs["hidden_states"].shape[:2]
    above = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
    causal = R.mrope_self_attention(**inputs, causal=True)
    # -inf added to a score is exactly what masked_fill(-inf) writes.
    minus_inf = torch.zeros(bsz, 1, seq_len, seq_len, dtype=BF16).masked_fill(above, float("-inf"))
    assert torch.equal(causal, R.mrope_self_attention(**inputs, attention_mask=minus_inf))
    # The benchmark's finite bf16 minimum swamps every score, so exp() underflows to exactly 0 too.
    finite_min = torch.zeros(bsz, 1, seq_len, seq_len, dtype=BF16).masked_fill(above, torch.finfo(BF16).min)
    assert torch.equal(causal, R.mrope_self_attention(**inputs, attention_mask=finite_min))
    assert not torch.equal(causal, R.mrope_self_attention(**inputs))
    # The flag composes with a mask: together they keep the stricter of the two.
    window = torch.zeros(bsz, 1, seq_len, seq_len, dtype=BF16).masked_fill(
        torch.ones(seq_len, seq_len, dtype=torch.bool).tril(-4), float("-inf"))
    assert torch.equal(
        R.mrope_self_attention(**inputs, attention_mask=window, causal=True),
        R.mrope_self_attention(**inputs, attention_mask=window + minus_inf),
    )


def test_attention_scale_modes():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 4, 9, 64, generator=g) for _ in range(3))
    k, v = k[:, :2], v[:, :2]
    mul, div = R.attention(q, k, v), R.attention(q, k, v, scale_mode="div")
    torch.testing.assert_close(mul, div)
    torch.testing.assert_close(R.attention(q, k, v, scale=0.5), R.attention(q, k, v, scale=2.0, scale_mode="div"))
    with pytest.raises(ValueError, match="scale_mode"):
        R.attention(q, k, v, scale_mode="pow")


def test_fp32_reference_close_to_bf16_mrope():
    inputs = W.make_inputs(small("007", 1, 33), "cpu", seed=5)
    bf16 = R.mrope_self_attention(**inputs)
    fp32 = R.mrope_self_attention(**inputs, compute_dtype=torch.float32)
    assert bf16.dtype == BF16 and fp32.dtype == torch.float32
    assert 0 < rel_err(bf16, fp32) < 2e-2


def test_fp32_reference_close_to_bf16_vision():
    inputs = W.make_inputs(small("034", 1, 16, 200), "cpu", seed=6)
    bf16 = R.vision_cross_attention(**inputs)
    fp32 = R.vision_cross_attention(**inputs, compute_dtype=torch.float32)
    assert bf16.dtype == BF16 and fp32.dtype == torch.float32
    assert 0 < rel_err(bf16, fp32) < 2e-2


def test_rope_1d_tables():
    cos, sin = R.rope_1d_cos_sin(torch.arange(5).unsqueeze(0), 128, R.ROPE_THETA, torch.float32)
    assert cos.dtype == torch.float32 and cos.shape == (1, 1, 5, 128)
    # Position 3, channel j and j + 64 share the angle 3 * theta^(-2j/128).
    angle = 3 * R.ROPE_THETA ** (-2 * 10 / 128)
    assert cos[0, 0, 3, 10].item() == pytest.approx(math.cos(angle), rel=1e-6)
    assert sin[0, 0, 3, 74].item() == pytest.approx(math.sin(angle), rel=1e-6)


def test_thw_split_generalisation():
    inputs = W.make_inputs(small("034", 1, 8, 230), "cpu", seed=7)
    proj = {k: v for k, v in inputs.items() if k != "o_proj_weight"}
    q_a, k_a, v_a = R.vision_qkv(**proj)
    q_b, k_b, v_b = R.vision_qkv(**proj, thw_split=(40, 44, 44))
    assert torch.equal(q_a, q_b) and torch.equal(v_a, v_b)
    assert not torch.equal(k_a, k_b)
    # The t segment changes too: Lv = 230 > 196 gives t = 1 tokens, rotated with width-40 frequencies and pairs.
    assert not torch.equal(k_a[..., :40], k_b[..., :40])
    out = R.vision_cross_attention(**inputs, thw_split=(40, 44, 44))
    assert out.shape == (1, 8, 4096) and not torch.equal(out, R.vision_cross_attention(**inputs))
    with pytest.raises(ValueError, match="thw_split"):
        R.vision_qkv(**proj, thw_split=(41, 43, 44))


def test_load_seed_missing_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("VLATTN_SEEDS_DIR", str(tmp_path / "nowhere"))
    assert R.load_seed("007") is None
    with pytest.raises(ValueError):
        R.load_seed("999")


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------

def test_load_counts_and_names():
    all_workloads = W.load()
    assert len(all_workloads) == 32
    assert [w.problem for w in all_workloads] == ["007"] * 16 + ["034"] * 16
    assert W.load("034") == W.load("034_vision_language_cross_attention_fusion")
    assert [w.index for w in W.load("007")] == list(range(16))
    assert W.load("007")[0].name == "007[B=4,S=128]"
    assert W.load("034")[0].name == "034[B=2,Lq=256,Lv=392]"
    assert W.load("034")[0].consts == {"hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128}
    assert all(w.match_ratio == 0.99 for w in all_workloads)
    assert len({w for w in all_workloads}) == 32  # hashable despite the axes dict
    sols = [W.t_sol_us(w) for w in W.sorted_by_sol(W.load("007"))]
    assert sols == sorted(sols)


@pytest.mark.parametrize("problem", ["007", "034"])
def test_workloads_match_jsonl(problem):
    if R.seeds_dir() is None:
        pytest.skip(SEEDS_MISSING)
    lines = (R.seeds_dir() / R.PROBLEMS[problem] / "workload.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    workloads = W.load(problem)
    assert len(records) == len(workloads) == 16
    for w, rec in zip(workloads, records):
        assert (w.uuid, w.axes) == (rec["uuid"], rec["axes"])
        assert (w.atol, w.rtol) == (rec["tolerance"]["max_atol"], rec["tolerance"]["max_rtol"])


def test_make_inputs_007_shapes_and_mask():
    w = small("007", 2, 7)
    inputs = W.make_inputs(w, "cpu", seed=0)
    shapes = {name: tuple(t.shape) for name, t in inputs.items()}
    assert shapes == {
        "hidden_states": (2, 7, 3584),
        "q_weight": (3584, 3584), "q_bias": (3584,),
        "k_weight": (512, 3584), "k_bias": (512,),
        "v_weight": (512, 3584), "v_bias": (512,),
        "o_weight": (3584, 3584),
        "cos": (3, 2, 7, 128), "sin": (3, 2, 7, 128),
        "attention_mask": (2, 1, 7, 7),
    }
    assert all(t.dtype == BF16 for t in inputs.values())
    assert all(t.abs().sum() > 0 for t in inputs.values())
    assert 0.01 < inputs["q_weight"].float().std().item() < 0.03
    mask = inputs["attention_mask"]
    above = torch.ones(7, 7, dtype=torch.bool).triu(1).expand(2, 1, 7, 7)
    assert (mask[above] == torch.finfo(BF16).min).all() and (mask[~above] == 0).all()
    assert torch.equal(W.make_inputs(w, "cpu", seed=0)["cos"], inputs["cos"])
    assert not torch.equal(W.make_inputs(w, "cpu", seed=1)["cos"], inputs["cos"])


def test_make_inputs_034_shapes_and_positions():
    inputs = W.make_inputs(small("034", 2, 5, 400), "cpu", seed=0)
    assert {name: tuple(t.shape) for name, t in inputs.items()} == {
        "language_hidden_states": (2, 5, 4096),
        "vision_hidden_states": (2, 400, 4096),
        "language_position_ids": (2, 5),
        "vision_grid_thw": (2, 400, 3),
        "q_proj_weight": (4096, 4096), "q_proj_bias": (4096,),
        "k_proj_weight": (1024, 4096), "k_proj_bias": (1024,),
        "v_proj_weight": (1024, 4096), "v_proj_bias": (1024,),
        "o_proj_weight": (4096, 4096),
    }
    for name, t in inputs.items():
        assert t.dtype == (torch.int64 if name in ("language_position_ids", "vision_grid_thw") else BF16), name
    assert torch.equal(inputs["language_position_ids"][1], torch.arange(5))
    thw = inputs["vision_grid_thw"][1]
    assert thw[0].tolist() == [0, 0, 0] and thw[15].tolist() == [0, 1, 1]
    assert thw[196].tolist() == [1, 0, 0] and thw[399].tolist() == [2, 0, 7]


def test_check_close():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(100, 100, generator=g).to(BF16)
    assert W.check_close(ref.clone(), ref, atol=0.01).ok
    # 0.5% of elements far off: still passes the 99% rule, fails a 99.9% one.
    out = ref.clone().flatten()
    out[:50] += 10
    out = out.view_as(ref)
    result = W.check_close(out, ref, atol=0.01)
    assert result.ok and result.matched == pytest.approx(0.995) and result.max_abs_err >= 9
    assert not W.check_close(out, ref, atol=0.01, match_ratio=0.999).ok
    # A uniform perturbation well beyond atol + 5% fails.
    assert not W.check_close(ref * 1.2 + 0.05, ref, atol=0.01).ok
    # One NaN fails regardless of the match ratio.
    nan = ref.clone()
    nan[3, 4] = float("nan")
    result = W.check_close(nan, ref, atol=0.01)
    assert not result.ok and result.nan_or_inf and result.matched > 0.999
    w = W.load("007")[0]
    assert W.check_workload(w, ref, ref).ok
    with pytest.raises(ValueError, match="shape"):
        W.check_close(ref[:10], ref, atol=0.01)


# T_SOL (us) from /work/shared/docs/ANCHORS.md, keyed by workload name.
ANCHORS_T_SOL = {
    "007[B=1,S=128]": 12.7, "007[B=1,S=256]": 16.1, "007[B=4,S=128]": 31.3, "007[B=1,S=512]": 34.2,
    "007[B=1,S=613]": 41.8, "007[B=8,S=128]": 62.7, "007[B=4,S=256]": 64.6, "007[B=1,S=1024]": 76.0,
    "007[B=2,S=1024]": 151.9, "007[B=32,S=128]": 250.7, "007[B=8,S=512]": 273.5, "007[B=4,S=1024]": 303.9,
    "007[B=1,S=4096]": 486.2, "007[B=32,S=256]": 516.6, "007[B=64,S=256]": 1033, "007[B=32,S=541]": 1163,
    "034[B=2,Lq=128,Lv=196]": 24.8, "034[B=8,Lq=128,Lv=196]": 99.4, "034[B=16,Lq=128,Lv=196]": 198.7,
    "034[B=2,Lq=256,Lv=392]": 51.3, "034[B=8,Lq=256,Lv=392]": 205.4, "034[B=64,Lq=256,Lv=392]": 1643,
    "034[B=1,Lq=512,Lv=784]": 54.7, "034[B=2,Lq=512,Lv=784]": 109.3, "034[B=4,Lq=512,Lv=784]": 218.7,
    "034[B=16,Lq=512,Lv=784]": 874.7, "034[B=4,Lq=541,Lv=980]": 248.4, "034[B=32,Lq=373,Lv=588]": 1245,
    "034[B=1,Lq=1024,Lv=1568]": 122.6, "034[B=2,Lq=1024,Lv=1568]": 245.3, "034[B=1,Lq=4096,Lv=6272]": 809.6,
    "034[B=1,Lq=8192,Lv=12544]": 2470,
}


def test_t_sol_matches_anchors():
    workloads = W.load()
    assert sorted(w.name for w in workloads) == sorted(ANCHORS_T_SOL)
    for w in workloads:
        assert W.t_sol_us(w) == pytest.approx(ANCHORS_T_SOL[w.name], rel=0.02), w.name


def test_speed_of_light_counts():
    w = next(w for w in W.load("007") if w.name == "007[B=1,S=128]")
    assert [s[:4] for s in W.projection_shapes(w)] == [
        ("q", 128, 3584, 3584), ("k", 128, 512, 3584), ("v", 128, 512, 3584), ("o", 128, 3584, 3584)]
    assert W.flops(w) == 2 * 128 * 3584 * (3584 + 512 + 512 + 3584) + 4 * 28 * 128 * 128 * 128
    weights = (2 * 3584 * 3584 + 2 * 512 * 3584 + 3584 + 2 * 512) * 2
    assert W.min_bytes(w) == weights + 2 * 128 * 3584 * 2 + 2 * 3 * 128 * 128 * 2 + 128 * 128 * 2
    v = next(w for w in W.load("034") if w.name == "034[B=2,Lq=128,Lv=196]")
    assert [s[:4] for s in W.projection_shapes(v)] == [
        ("q", 256, 4096, 4096), ("k", 392, 1024, 4096), ("v", 392, 1024, 4096), ("o", 256, 4096, 4096)]
    assert W.flops(v) - sum(2 * m * n * k for _, m, n, k, _ in W.projection_shapes(v)) == 4 * 2 * 32 * 128 * 196 * 128
