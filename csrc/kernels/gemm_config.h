// Compile-time GEMM config: tile, cluster, schedule, tile scheduler, stages. Checks its own
// legality with static_asserts. No CUDA or CUTLASS headers, so the legality rules compile (and are
// unit-tested, tests/cpp/) with a plain host compiler.
#pragma once

namespace vlattn {

enum class Schedule { kCooperative, kPingpong };
// kParallelSplitK: the persistent kernel batched over K slices (L = splits), each slice's fp32 partial tile
// stored to a workspace, then one reduction kernel adds the slices in order, the bias, and rounds to bf16
// (kernels/splitk_reduce.h). Runs on either schedule (CUTLASS's stream-K needs the cooperative one).
enum class TileSched { kPersistent, kStreamK, kParallelSplitK };

// Hopper gives a CTA at most 227 KB of dynamic shared memory.
inline constexpr int kSm90MaxSmemBytes = 227 * 1024;

template <int TileM_, int TileN_, int TileK_, int ClusterM_, int ClusterN_, Schedule kSchedule_,
          TileSched kTileSched_, int kStages_, int kEpiN_ = 0, bool kSwapAB_ = false>
struct Sm90GemmConfig {
  static constexpr int kTileM = TileM_, kTileN = TileN_, kTileK = TileK_;
  static constexpr int kClusterM = ClusterM_, kClusterN = ClusterN_;
  static constexpr Schedule kSchedule = kSchedule_;
  static constexpr TileSched kTileSched = kTileSched_;
  static constexpr int kStages = kStages_;
  // Columns of the epilogue's subtile (the rows are the schedule's: 128 cooperative, 64 ping-pong);
  // 0 = CUTLASS's choice (32 for bf16 output). Each subtile is one smem write, barrier and TMA store.
  static constexpr int kEpiN = kEpiN_;
  // Operands swapped, as cuBLAS runs small and mid M: the kernel computes D^T = W . X^T, so the tile's
  // M (the wgmma's fixed 64 rows per warpgroup) walks the weight's rows and its N (any multiple of 16)
  // the tokens; D^T is stored column-major, i.e. D row-major. The tile, cluster and epilogue subtile
  // below are in that kernel's terms (M = weight rows, N = tokens).
  static constexpr bool kSwapAB = kSwapAB_;

  // A warpgroup's wgmma covers 64 rows; the cooperative kernel splits the tile's M over two.
  static_assert(kTileM % (kSchedule == Schedule::kCooperative ? 128 : 64) == 0,
                "tile M must be a multiple of 64 per consumer warpgroup");
  static_assert(kTileN % 16 == 0 && kTileN <= 256, "wgmma N must be a multiple of 16, at most 256");
  static_assert(kTileK % 64 == 0, "tile K must cover whole 128-byte swizzle atoms of bf16");
  static_assert(kTileSched != TileSched::kStreamK || kSchedule == Schedule::kCooperative,
                "CUTLASS's sm90 stream-K scheduler runs on the cooperative kernel");
  static_assert(kTileSched != TileSched::kParallelSplitK || !kSwapAB,
                "parallel split-K stores its partials [M, N] row-major: not with swapped operands");
  static_assert(kClusterM >= 1 && kClusterM <= 4 && (kClusterM & (kClusterM - 1)) == 0 && kClusterN >= 1 &&
                    kClusterN <= 2 && kClusterM * kClusterN <= 8,
                "clusters of 1, 2 or 4 CTAs along M and 1 or 2 along N only (larger ones are not tuned)");
  // bf16 A and B tiles of one pipeline stage; with 0 (automatic) stages CUTLASS fits as many as
  // the smem left by the epilogue allows, at least 2 are needed to overlap TMA with wgmma.
  static constexpr int kSmemBytesPerStage = (kTileM + kTileN) * kTileK * 2;
  static_assert(kStages == 0 || (kStages >= 2 && kStages * kSmemBytesPerStage <= kSm90MaxSmemBytes),
                "explicit stages must be >= 2 and fit in 227 KB of shared memory");
  static_assert(2 * kSmemBytesPerStage <= kSm90MaxSmemBytes, "two stages of this tile do not fit in smem");
  static_assert(kEpiN == 0 || (kEpiN % 16 == 0 && kTileN % (kEpiN == 0 ? 1 : kEpiN) == 0),
                "the epilogue subtile's columns must be a multiple of 16 that divides tile N");
};

}  // namespace vlattn
