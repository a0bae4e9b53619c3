// Tile kinds of the mask pre-pass (mask_summary.cuh) and the rule that decides them, entry by entry.
// Host and device, no CUDA headers: the host tests (tests/cpp/test_rope_maps.cpp) check the rule itself.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define VLATTN_MK_HD __host__ __device__ __forceinline__
#else
#define VLATTN_MK_HD inline
#endif

namespace vlattn {
namespace attn_sm90 {

enum TileKind : uint8_t { kTileDead = 0, kTileZero = 1, kTileMixed = 2, kTileCausal = 3 };

constexpr float kTauDead = -1.2676506002282294e30f;  // -2^100
constexpr float kTauLive = -6.338253001141147e29f;   // -2^99

// The bits of a tile's kind that one visible entry (query row i, key j, value x) keeps: bit 0 DEAD
// (x <= tau_dead), bit 1 ZERO (x == 0; -0 too), bit 2 CAUSAL (x == 0 where j <= i, x <= tau_dead where
// j > i). A tile's bits are the AND over its visible entries, kKindBitsAll when it has none.
constexpr uint32_t kKindBitsAll = 7u;
VLATTN_MK_HD uint32_t entry_kind_bits(float x, int i, int j) {
  const bool is_dead = x <= kTauDead, is_zero = x == 0.f;
  return uint32_t(is_dead) | uint32_t(is_zero) << 1 | uint32_t(j <= i ? is_zero : is_dead) << 2;
}

// A tile's kind from its AND-ed bits: DEAD before ZERO before CAUSAL (no visible entry: DEAD).
VLATTN_MK_HD TileKind tile_kind(uint32_t bits) {
  return (bits & 1u) ? kTileDead : (bits & 2u) ? kTileZero : (bits & 4u) ? kTileCausal : kTileMixed;
}

// A visible entry at or above tau_live makes its row live (the condition for skipping DEAD tiles and
// for applying CAUSAL ones without their values).
VLATTN_MK_HD bool entry_live(float x) { return x >= kTauLive; }

}  // namespace attn_sm90
}  // namespace vlattn
