"""The single source of truth for which sm_90a GEMM configurations are compiled.

`setup.py` reads this file (without importing the package) and generates one translation unit per
config plus the registry that maps names to launch functions; `vlattn.dispatch` reads it to choose
among them. Adding a config here is the only step needed to build and dispatch to it.

Why these configs (H200, bf16, K = 3584 or 4096, N = 512..4608):
- 128x128x64 cooperative, persistent: the safe default. Two consumer warpgroups each own 64 rows;
  a 128x128 tile keeps 2 CTAs' worth of accumulators in registers and many tiles for the scheduler.
- 128x256x64 cooperative, persistent: large M. Halves the A re-reads per FLOP; 128x256 fp32
  accumulators are 128 registers per consumer thread, which still fits next to the mainloop.
- 64x128x64 ping-pong, persistent: mid M. Two warpgroups alternate mainloop and epilogue on
  separate 64-row tiles, hiding the epilogue behind the other's MMAs.
- 128x128x64 cooperative, stream-K: small M (128..613 tokens), where M/128 x N/128 output tiles
  are far fewer than 132 SMs and splitting K puts every SM on the weights. With CUTLASS's own
  (heuristic) decomposition it measured slower than the 64x128 ping-pong tile on every small-M
  shape (2026-11-30). Named "<config>/splitk<N>" it runs plain split-K instead: every output tile's
  K cut into N parts, the partials reduced in a workspace in a fixed order (deterministic bits).
- 64x64x64 ping-pong, persistent: small M, where a 64x128 grid is one partial wave (N = 512 at up to
  1024 rows, 128x3584): twice the CTAs streaming weights.
- 128x256x64 and 128x128x64 cooperative in 2-CTA clusters along M: the weight tile is multicast to
  both CTAs of a pair. 128x256 in pairs is the rule's large tile since the ninth session (the list's
  comments have the numbers), with 128 x 64 epilogue subtiles (`_e64`, epi_n) since the twenty-eighth;
  128x128 in pairs only through the tuned table.

Dispatch (vlattn.dispatch and, for the QKV projections' "gemm" config, csrc/ops/linear.cpp) picks by
a wave model whose per-config efficiencies live here: setup.py writes them into the C++ registry, so
both languages use one set of numbers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SCHEDULES = ("cooperative", "pingpong")
SCHEDULERS = ("persistent", "streamk", "splitk")


@dataclass(frozen=True)
class GemmConfig:
    name: str
    tile: tuple[int, int, int]  # CTA tile M x N x K
    cluster: tuple[int, int]  # cluster M x N
    schedule: str  # "cooperative" | "pingpong"
    scheduler: str  # "persistent" | "streamk" | "splitk" (parallel split-K: always named "<config>/splitk<N>")
    stages: int = 0  # 0 = as many as fit in shared memory next to the epilogue
    # Relative mainloop throughput of a full tile (the wave model's divisor; 128x256 cooperative in
    # 2-CTA clusters = 1).
    efficiency: float = 0.9
    # Columns of the epilogue's subtile (rows: 128 cooperative, 64 ping-pong); 0 = CUTLASS's choice (32).
    # Each subtile costs one smem write, barrier and TMA store between two mainloops.
    epi_n: int = 0
    # In the wave model (dispatch.analytic_config, gemm_analytic_pick in C++). False: reached only
    # through the tuned table, for configs fitted to a few shapes whose efficiency elsewhere is unmeasured.
    rule: bool = True
    # Operands swapped (as cuBLAS runs small and mid M): the kernel computes D^T = W . X^T, so ``tile``,
    # ``cluster`` and ``epi_n`` are in its terms: M = the weight's rows (wgmma's fixed 64 per warpgroup),
    # N = the tokens (any multiple of 16). Name suffix "_swap".
    swap_ab: bool = False

    def out_tile(self) -> tuple[int, int]:
        """The tile as (output rows = tokens, output columns = weight rows)."""
        tm, tn, _ = self.tile
        return (tn, tm) if self.swap_ab else (tm, tn)

    def tile_count(self, m: int, n: int) -> int:
        """Output tiles of an M x N GEMM on this config's grid (partial tiles count whole)."""
        tm, tn = self.out_tile()
        return -(-m // tm) * -(-n // tn)

    def __post_init__(self) -> None:
        tm, tn, tk = self.tile
        cm, cn = self.cluster
        if cm not in (1, 2, 4) or cn not in (1, 2) or cm * cn > 8:
            raise ValueError(f"{self.name}: cluster {self.cluster}: 1, 2 or 4 along M and 1 or 2 along N")
        if self.epi_n and (self.epi_n % 16 or tn % self.epi_n):
            raise ValueError(f"{self.name}: epilogue subtile of {self.epi_n} columns does not divide tile N {tn}")
        if self.schedule not in SCHEDULES or self.scheduler not in SCHEDULERS:
            raise ValueError(f"{self.name}: unknown schedule/scheduler")
        # wgmma: a warpgroup owns 64 rows; cooperative splits M over two warpgroups.
        min_m = 128 if self.schedule == "cooperative" else 64
        if tm % min_m or tn % 16 or tk % 64:
            raise ValueError(f"{self.name}: tile {self.tile} is not legal for {self.schedule}")
        if self.scheduler == "streamk" and self.schedule != "cooperative":
            raise ValueError(f"{self.name}: CUTLASS's sm90 stream-K needs the cooperative kernel")
        # The C++ wave model (gemm_analytic_pick) counts registry tiles as (tokens, weight rows).
        if self.swap_ab and (self.rule or self.scheduler != "persistent"):
            raise ValueError(f"{self.name}: swapped configs are persistent and tuned-table only (rule=False)")
        if self.scheduler == "splitk" and (self.rule or self.swap_ab):
            raise ValueError(f"{self.name}: parallel split-K configs are tuned-table only (rule=False) and not swapped "
                             "(their fp32 partials are stored [M, N] row-major)")


# Efficiencies calibrated on the H200 smoke run of 2026-11-30 (all configs timed on 7 projection
# shapes, cold L2; bench/NOTES.md): with them the wave model picks the measured-best persistent config
# on every one of those shapes.
GEMM_CONFIGS: tuple[GemmConfig, ...] = (
    GemmConfig("t128x128x64_c1x1_coop", (128, 128, 64), (1, 1), "cooperative", "persistent", efficiency=0.95),
    GemmConfig("t128x256x64_c1x1_coop", (128, 256, 64), (1, 1), "cooperative", "persistent", efficiency=0.98),
    GemmConfig("t64x128x64_c1x1_pingpong", (64, 128, 64), (1, 1), "pingpong", "persistent", efficiency=0.85),
    GemmConfig("t128x128x64_c1x1_coop_streamk", (128, 128, 64), (1, 1), "cooperative", "streamk",
               efficiency=0.95),
    # Clusters of 2 CTAs along M: the weight (B) tile is multicast to both, halving its L2 -> SM traffic.
    # H200, ninth session (python -m vlattn.tune, 10 iters): 128x256 in pairs is 7% faster than alone
    # summed over the 12 shapes with M >= 8192, N >= 3584 (6153 vs 6633 us; cuBLAS 6229), within 1-2% at
    # N <= 1024 either way; so it was the rule's 128x256 tile (the 1x1 one 0.98) until its e64 twin
    # below took over. 128x128 in pairs wins 4096x3584 (149 vs 158 us) but loses badly at N = 1024 (6272
    # rows: 102 vs 72): tuned table only (efficiency below the 1x1 twin's).
    GemmConfig("t128x256x64_c2x1_coop", (128, 256, 64), (2, 1), "cooperative", "persistent", efficiency=0.99),
    GemmConfig("t128x128x64_c2x1_coop", (128, 128, 64), (2, 1), "cooperative", "persistent", efficiency=0.93),
    # The rule's large tile since the twenty-eighth session: the 128x256 pair with 128 x 64 epilogue
    # subtiles instead of CUTLASS's 128 x 32 (four smem write / barrier / TMA-store rounds per tile
    # between two mainloops instead of eight; still four 48 KB stages, 226 KB in all). H200 (python -m
    # vlattn.tune, same process): -3.3% summed over the 16 shapes with M >= 8192 and N >= 3584 (7227 ->
    # 6989 us; cuBLAS 7557), -0.1% at N <= 1024; the O projection forced inside the layers
    # (bench/probe_layer_oproj.py, 6 rounds) -1.0% summed over 12 workloads. The same change on the
    # 128x128 1x1 tile (two rounds instead of four) measured -0.5% / +0.6%: not built.
    GemmConfig("t128x256x64_c2x1_coop_e64", (128, 256, 64), (2, 1), "cooperative", "persistent",
               efficiency=1.0, epi_n=64),
    # The same pair under CUTLASS's stream-K scheduler (heuristic decomposition: data-parallel unless the last
    # wave is under half full, then the last two waves' tiles are shared out by K iterations), for the large-M
    # grids whose tail wave is nearly empty: 17312x3584 (1904 tiles, 14.4 waves: the e64 pair 571.8 us against
    # cuBLAS 548.5) and 11936x4096 (1504 tiles, 11.4 waves: 519.4 against 504.6; ed37721's H200 table). The wave
    # count predicts 550 and 493 us less the fix-up. Launched without PDL (setup.py: stream-K TUs). Tuned table
    # only (seventy-first session): the wave model does not price the fix-up.
    GemmConfig("t128x256x64_c2x1_coop_streamk_e64", (128, 256, 64), (2, 1), "cooperative", "streamk",
               efficiency=1.0, epi_n=64, rule=False),
    # Small M: 64x64 ping-pong tiles put twice as many CTAs on the weights as 64x128 where both fit in
    # one wave (128x3584: 112 instead of 56), with ~13 stages of 16 KB in flight. H200, tenth session
    # (python -m vlattn.tune, 15 iters, same run): 128x3584x3584+b 19.0 -> 16.0 us, N = 512 at 128..1024
    # rows 14.8-15.6 -> 11.9-13.4; loses once it needs a second wave (256x3584 21.2 vs 19.0, 784x1024
    # 29.0 vs 22.4), so the wave model's efficiency 0.5 (a one-wave 64x64 grid beats a one-wave 64x128
    # one, two waves do not). 2x1 and 2x2 clusters of it (weights / activations multicast) measured no
    # faster anywhere (128x512: 11.9 all three; 392x1024: 18.6 / 21.2 vs 16.5): not built.
    GemmConfig("t64x64x64_c1x1_pingpong", (64, 64, 64), (1, 1), "pingpong", "persistent", efficiency=0.5),
    # Mid M: tile widths that make the grid one full wave, as cuBLAS does (twenty-ninth session, ncu: at
    # 613x3584x3584 cuBLAS runs 144 weight rows x 128 tokens, 125 tiles; at 512x3584 112 x 128, 128
    # tiles; neither splits K). 128- and 256-wide tiles give 1.06 waves or a half-empty one there.
    # Fitted per shape: 144 for 613x3584 (5 x 25 tiles), 112 for 512x3584 (4 x 32), 224 for 1024x3584
    # (8 x 16), 208 for 3136x1024 (25 x 5), 192 for 2164x4096 (17 x 22: 3 waves against 128x256's 2.06).
    # Epilogue subtiles of 16 columns where 32 does not divide the width (48 fails CUTLASS's
    # vectorization check). They need CuTe's extended wgmma N sizes (kernels/sm90_gemm.cuh).
    # H200, thirtieth session (python -m vlattn.tune, full, us, new / previous best / cuBLAS of the
    # ninth-session table): 613x3584 27.9 / 33.9 / 26.4; 512x3584 23.3 / 24.8 / 22.0; 1024x3584 38.0 /
    # 41.3 / 37.3; 2048x3584 71.9 / 80.1 / 77.6 (224); 4096x3584 147.9 / 153.6 / 146.8 (224); 3136x1024+b
    # 40.3 / 45.6 / 38.3; 2164x4096 106.0 / 115.4 / 94.5. Slower than 128x256 at large M (16384x3584:
    # 224 637 against 552), so tuned table only (rule=False): the wave model cannot tell them apart there.
    # Tried and not built: 128x144 in 1x2 clusters (the activation tile multicast, as cuBLAS's 2x1):
    # slower than its 1x1 twin on every shape (613x3584 33.7 against 27.9).
    GemmConfig("t128x144x64_c1x1_coop_e16", (128, 144, 64), (1, 1), "cooperative", "persistent", epi_n=16,
               rule=False),
    GemmConfig("t128x112x64_c1x1_coop_e16", (128, 112, 64), (1, 1), "cooperative", "persistent", epi_n=16,
               rule=False),
    GemmConfig("t128x224x64_c1x1_coop_e32", (128, 224, 64), (1, 1), "cooperative", "persistent", epi_n=32,
               rule=False),
    GemmConfig("t128x208x64_c1x1_coop_e16", (128, 208, 64), (1, 1), "cooperative", "persistent", epi_n=16,
               rule=False),
    GemmConfig("t128x192x64_c1x1_coop_e64", (128, 192, 64), (1, 1), "cooperative", "persistent", epi_n=64,
               rule=False),
    # Operands swapped, the tokens on the wgmma's N side, as cuBLAS runs 034's vision K/V projections
    # (N = 1024, K = 4096; thirtieth session, bench/ncu_cublas_shapes.sh: 392 rows nvjet 64x56, 14 stages,
    # 4x1 clusters, 112 tiles; 784 rows 64x104 in pairs, 128 tiles; 1568 rows 128x112 in 4x2 clusters, 112
    # tiles). 64 weight rows x 112 tokens in pairs along the weights (the token tile shared by the pair):
    # 784x1024x4096+b 20.1 us against 22.1 for the 64x128 ping-pong and 18.8 for cuBLAS (python -m vlattn.tune,
    # same process; GEMM mode 0.80 -> 0.86x cuBLAS). Tuned table only.
    GemmConfig("t64x112x64_c2x1_pingpong_e16_swap", (64, 112, 64), (2, 1), "pingpong", "persistent", epi_n=16,
               rule=False, swap_ab=True),
    # 128 weight rows x 176 tokens, swapped, for 17312x512x3584 (007 B32 S541's K and V): 4 x 99 = 396 tiles, 3.0
    # waves, where the 128 x 256 pair makes 272 tiles (2.06 waves, a third wave 6% full: 126.7 us against
    # cuBLAS's 95.1, thirty-third session) and the tuned 128 x 128 stream-K pick 102.8. Tuned table only.
    GemmConfig("t128x176x64_c1x1_coop_e16_swap", (128, 176, 64), (1, 1), "cooperative", "persistent", epi_n=16,
               rule=False, swap_ab=True),
    # Parallel split-K for small M at N = 512 / 1024 (sixty-third session): there the 64x64 grid is 16-112 CTAs,
    # each streaming the whole K (128x512x3584: 16 CTAs of 917 KB; 0.86x cuBLAS in the H200 table, 0.79x at
    # 392x1024x4096), where cuBLAS splits K and reduces in a second kernel (16th session: nvjet 5.9 us + 2.2 us
    # reduce at 128x512x3584). CUTLASS's stream-K split runs on the cooperative kernel only and measured ~19 us
    # there (128x128 tiles, a fix-up in the workspace). These run the ping-pong kernel batched over K slices
    # (fp32 partials, kernels/sm90_gemm.cuh) and a reduction kernel (kernels/splitk_reduce.h), launched with PDL.
    # Always named "<config>/splitk<N>"; K must cut into N equal slices of a multiple of 8 columns. Tuned table
    # only: the wave model does not price the partials' traffic. Measured (H100, sixty-fourth session, two tuner
    # runs; bench/runs/2026-12-07_a1f4d40_h100_tune_psplit_*): faster than every whole-K config where that grid
    # has <= 56 tiles: 128x512x3584+b 10.6-11.2 us against 12.1-12.4 (cuBLAS 11.0), 256x512x3584+b 10.8-11.1
    # against 12.3-12.4 (cuBLAS 11.2), 392x1024x4096+b 16.2-16.5 on 64x128/splitk2 against 17.6-17.9 (cuBLAS
    # 15.0); from 80 tiles up (613x512) and at N = 3584 / 4096 slower (-2% to -44%). Not in the H200 table yet:
    # that needs an H200 tuner run.
    GemmConfig("t64x64x64_c1x1_pingpong_psplit", (64, 64, 64), (1, 1), "pingpong", "splitk", efficiency=0.5,
               rule=False),
    GemmConfig("t64x128x64_c1x1_pingpong_psplit", (64, 128, 64), (1, 1), "pingpong", "splitk", efficiency=0.85,
               rule=False),
    # Tried with it and not built: 64 x 64 swapped in 4-CTA clusters for 392 rows (16.0 us against 16.1 for
    # the 64x64 ping-pong, cuBLAS 15.2; 2-5% on the N = 512 shapes below 1024 rows, under the 5% bar) and
    # 128 x 112 swapped cooperative in 4x2 clusters for 1568 rows (25.6 against 26.7, cuBLAS 24.1).
    # Tried in the tenth session and not built: the small-M tiles with 128-deep K steps (64x64x128,
    # 64x128x128 ping-pong; half the mainloop iterations) were no faster than their 64-deep twins
    # (bench/NOTES.md, tenth session, call 4).
    # Tried for mid M in the twelfth session and not built: 128x256 cooperative under CUTLASS's stream-K
    # (t128x256x64_c1x1_coop_streamk), for the grids of under one wave or just over a whole number
    # (613x3584: 70 tiles, 3136x1024: 100, 2164x4096: 272). Never faster than the best other config on
    # any of the 36 shapes with 256 <= M <= 4096, and a ~35 us floor below 1024 rows (613x3584 43.2 us
    # against 33.8 for the 128x128 stream-K pick and 26.2 for cuBLAS; bench/NOTES.md, twelfth session).
    # Again in the twenty-ninth session with CUTLASS's stream-K decomposition forced (its heuristic had run
    # that config as plain data-parallel tiles), full tuner run: 613x3584 38.3, 512x3584 36.9, 3136x1024
    # 49.1 us against 33.8 / 25.0 / 45.9 for the picks; 35-42 us on every shape below 1024 rows (25-35 with
    # the unordered fix-up); only 2164x4096 gained (112.8 against 117.1, under the 5% bar). Not built.
    # Tried for large M in the tenth session and not built: 128x128 ping-pong in 2x1 clusters (+1.5%
    # summed over the 18 shapes with M >= 8192) and 256x128 cooperative in 1x2 clusters (-1.0%, inside
    # the ~1.5% run-to-run noise of those sums) against the rule's 128x256 pair.
)

# Split-K (stream-K configs only): the split counts the tuner times. The analytic rule never picks
# a split (every one measured slower than the best whole-K config; vlattn.dispatch).
SPLITS: tuple[int, ...] = (2, 3, 4, 6, 8)
# Parallel split-K configs (scheduler "splitk"): the counts the tuner times, each dividing K = 3584 and 4096 into
# slices of a multiple of 8 columns (the projections' K; other K that do not divide are refused, not rounded).
PARALLEL_SPLITS: tuple[int, ...] = (2, 4, 8, 16)
MAX_SPLITS = 16  # what a config name may ask for (csrc/launch/gemm_params.h kMaxGemmSplits)


def split_name(base: str, splits: int) -> str:
    return base if splits == 1 else f"{base}/splitk{splits}"


def runnable_name(config: GemmConfig) -> str:
    """A name vlattn.linear runs the config by: its own, or a parallel split-K one at its smallest split (the bare
    name of a config that always splits is refused)."""
    return split_name(config.name, PARALLEL_SPLITS[0]) if config.scheduler == "splitk" else config.name


def parse_name(name: str) -> tuple[str, int]:
    """"<config>" -> (config, 1); "<config>/splitk<N>" -> (config, N). Raises ValueError otherwise."""
    base, sep, suffix = name.partition("/")
    if not sep:
        return base, 1
    match = re.fullmatch(r"splitk([1-9][0-9]?)", suffix)  # the C++ parser's grammar (csrc/ops/linear.cpp)
    if match is None or not 2 <= int(match.group(1)) <= MAX_SPLITS:
        raise ValueError(f"config suffix must be '/splitk<N>' with 2 <= N <= {MAX_SPLITS}; got '{name}'")
    return base, int(match.group(1))


def is_valid_name(name: str, compiled: "frozenset[str] | set[str] | None" = None) -> bool:
    """A compiled config, or a stream-K one with a legal '/splitk<N>'."""
    try:
        base, splits = parse_name(name)
    except ValueError:
        return False
    config = BY_NAME.get(base)
    if config is None or (compiled is not None and base not in compiled):
        return False
    if config.scheduler == "splitk":
        return splits > 1  # always split
    return splits == 1 or config.scheduler == "streamk"


def splits_fit(name: str, k: int) -> bool:
    """Whether a valid config name runs at this K: a parallel split-K one needs K cut into equal slices of a
    multiple of 8 columns (csrc/kernels/sm90_gemm.cuh splits_fit); every other config runs at any K."""
    base, splits = parse_name(name)
    config = BY_NAME.get(base)
    if config is None or config.scheduler != "splitk":
        return True
    return k % splits == 0 and (k // splits) % 8 == 0


def expand_splits(names) -> list[str]:
    """What the tuner times: the names, with every stream-K one's split variants after it, and every parallel
    split-K one as its split variants only."""
    out = []
    for n in names:
        config = BY_NAME.get(n)
        if config is not None and config.scheduler == "splitk":
            out += [split_name(n, s) for s in PARALLEL_SPLITS]
            continue
        out.append(n)
        if config is not None and config.scheduler == "streamk":
            out += [split_name(n, s) for s in SPLITS]
    return out

DEFAULT_CONFIG = "t128x128x64_c1x1_coop"

BY_NAME = {c.name: c for c in GEMM_CONFIGS}
# The C++ op treats an empty config name as the registry's first entry: keep the default first.
assert GEMM_CONFIGS[0].name == DEFAULT_CONFIG and len(BY_NAME) == len(GEMM_CONFIGS)
