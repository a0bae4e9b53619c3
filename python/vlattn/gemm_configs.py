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
  are far fewer than 132 SMs and splitting K puts every SM on the weights. Measured slower than the
  64x128 ping-pong tile on every small-M shape tried so far (2026-11-30), so only a tuned-table
  entry selects it; kept compiled as the base for the split-K work of the projection GEMMs.
"""
from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("cooperative", "pingpong")
SCHEDULERS = ("persistent", "streamk")


@dataclass(frozen=True)
class GemmConfig:
    name: str
    tile: tuple[int, int, int]  # CTA tile M x N x K
    cluster: tuple[int, int]  # cluster M x N
    schedule: str  # "cooperative" | "pingpong"
    scheduler: str  # "persistent" | "streamk"
    stages: int = 0  # 0 = as many as fit in shared memory next to the epilogue

    def __post_init__(self) -> None:
        tm, tn, tk = self.tile
        if self.schedule not in SCHEDULES or self.scheduler not in SCHEDULERS:
            raise ValueError(f"{self.name}: unknown schedule/scheduler")
        # wgmma: a warpgroup owns 64 rows; cooperative splits M over two warpgroups.
        min_m = 128 if self.schedule == "cooperative" else 64
        if tm % min_m or tn % 16 or tk % 64:
            raise ValueError(f"{self.name}: tile {self.tile} is not legal for {self.schedule}")
        if self.scheduler == "streamk" and self.schedule != "cooperative":
            raise ValueError(f"{self.name}: CUTLASS's sm90 stream-K needs the cooperative kernel")


GEMM_CONFIGS: tuple[GemmConfig, ...] = (
    GemmConfig("t128x128x64_c1x1_coop", (128, 128, 64), (1, 1), "cooperative", "persistent"),
    GemmConfig("t128x256x64_c1x1_coop", (128, 256, 64), (1, 1), "cooperative", "persistent"),
    GemmConfig("t64x128x64_c1x1_pingpong", (64, 128, 64), (1, 1), "pingpong", "persistent"),
    GemmConfig("t128x128x64_c1x1_coop_streamk", (128, 128, 64), (1, 1), "cooperative", "streamk"),
)

DEFAULT_CONFIG = "t128x128x64_c1x1_coop"

BY_NAME = {c.name: c for c in GEMM_CONFIGS}
# The C++ op treats an empty config name as the registry's first entry: keep the default first.
assert GEMM_CONFIGS[0].name == DEFAULT_CONFIG and len(BY_NAME) == len(GEMM_CONFIGS)
