// sm_90a projection GEMM with the QKV stage's epilogue in registers (qkv/gemm_rope_epi.h):
// out[b, head, s, :] = RoPE(bf16(X . W^T + bias)) for one group, written head-major, no y round trip
// and no second pass.
//
// Assembled from CUTLASS 3.x pieces: the TMA + wgmma mainloop and persistent tile scheduler of
// vlattn.linear's configs (kernels/sm90_gemm.cuh), and our own collective epilogue
// (RopeStoreEpilogue below) behind CUTLASS's adapter for epilogues without shared memory
// (Sm90TmaWarpSpecializedAdapter), which calls it with each tile's accumulators in registers.
//
// Register layout the epilogue relies on (CuTe's wgmma 64xN fp32 accumulator, one atom per consumer
// warpgroup, 64 rows each): a thread's fragment is (2, 2, N/8) with the first mode +1 column, the
// second +8 rows, the third +8 columns, starting at row 16 * warp + lane / 4 and column 2 * (lane % 4).
// So column c and c + 64 of a head sit in the same thread (third-mode index +8): rotate-half RoPE over
// the full head is a register operation, and the thread's two rows need their cos/sin once for all
// heads of the tile. The static_asserts below pin the fragment's shape; the bitwise tests (config
// "gemm" with and without the fused epilogue) pin the meaning.
#pragma once

#include <cuda_bf16.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/epilogue/dispatch_policy.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "kernels/gemm_config.h"
#include "kernels/sm90_gemm.cuh"  // set_tile_order, launch_gemm_kernel
#include "qkv/gemm_rope_epi.h"
#include "qkv/rope_math.cuh"  // rope_combine2

namespace vlattn {
namespace gemm_epi {

using namespace cute;

// 4 x 4 transpose of 32-bit words across the four lanes q = lane % 4 of a quad: on return lane q holds
// w[t] = (lane t's w[q]) for t = 0..3. Two butterfly rounds (lanes q ^ 1, then q ^ 2), each swapping the
// two words whose index differs from the lane in that bit. Every lane of the warp must call it.
CUTLASS_DEVICE void quad_transpose(uint32_t (&w)[4], int q) {
  const bool odd = q & 1;
  CUTLASS_PRAGMA_UNROLL
  for (int s = 0; s < 2; ++s) {
    const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? w[2 * s] : w[2 * s + 1], 1);
    if (odd) w[2 * s] = got; else w[2 * s + 1] = got;
  }
  const bool high = q & 2;
  CUTLASS_PRAGMA_UNROLL
  for (int s = 0; s < 2; ++s) {
    const uint32_t got = __shfl_xor_sync(0xffffffffu, high ? w[s] : w[s + 2], 2);
    if (high) w[s] = got; else w[s + 2] = got;
  }
}

template <RopeMode kMode, int TileM, int TileN>
class RopeStoreEpilogue {
  // Table RoPE or none. (1-D positions would pair channels the same way, but their cos/sin computed
  // here cost ~50 us per 128 x 256 tile, latency-bound at two warps per scheduler: fourteenth session.)
  static_assert(kMode == RopeMode::kNone || kMode == RopeMode::kTable,
                "the register epilogue takes table RoPE or none");
  static_assert(TileN % kQkvHeadDim == 0, "a tile covers whole heads");
  static constexpr int kHeadsPerTile = TileN / kQkvHeadDim;
  static constexpr int kHalf = kQkvHeadDim / 2;

 public:
  // The names CUTLASS's kernel and adapter read.
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ElementC = void;
  using ElementD = cutlass::bfloat16_t;
  using StrideC = cute::Stride<int64_t, cute::_1, int64_t>;
  using StrideD = StrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  using ThreadEpilogueOp = void;  // GemmUniversalAdapter names it; the work is operator() below
  struct SharedStorage {};
  using TensorStorage = SharedStorage;
  using Arguments = GemmRopeEpilogueArgs;
  using Params = GemmRopeEpilogueArgs;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& a) {
    const auto n = get<1>(shape);
    return a.out != nullptr && a.seq > 0 && a.heads > 0 && n == a.heads * kQkvHeadDim &&
           reinterpret_cast<uintptr_t>(a.bias) % 4 == 0 &&
           (kMode != RopeMode::kTable ||
            (a.cos != nullptr && a.sin != nullptr && reinterpret_cast<uintptr_t>(a.cos) % 4 == 0 &&
             reinterpret_cast<uintptr_t>(a.sin) % 4 == 0 && a.tab_plane_stride % 2 == 0 &&
             a.tab_batch_stride % 2 == 0 && a.tab_seq_stride % 2 == 0 && epi_table_offsets_fit(a.tab_plane_stride)));
  }

  CUTLASS_HOST_DEVICE explicit RopeStoreEpilogue(Params const& params, SharedStorage const& = SharedStorage())
      : p_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  // The tile in four phases, so that no global load waits behind a store: a load issued after a store
  // the compiler cannot prove disjoint is ordered after it, and an epilogue that interleaved them was a
  // chain of L2 round trips per channel group (fourteenth session, call 1: 10-40 us per tile).
  //   1. bias for the whole tile, all loads in flight together;
  //   2. y = bf16(acc + bias), packed two channels per register (the accumulators die here);
  //   then per row (two per thread and 64-row wgmma atom): 3. kTable: the row's cos/sin, all loads in
  //   flight together;
  //   4. RoPE and the stores. (Both rows' tables at once spilled 56 B in the 128 x 256 kernel.)
  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK, BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma, ResidueMNK,
                                 int thread_idx, char*) {
    // MM 64 x TileN wgmma atoms along M per consumer warpgroup: the fragment is ((2, 2, TileN / 8), MM, 1);
    // MM = 1 on the cooperative 128-row and the ping-pong 64-row tiles, 2 on the ping-pong 128-row tile
    // (atom mi holds rows + 64 mi).
    static_assert(rank(FrgLayout{}) == 3 && rank<0>(FrgLayout{}) == 3, "unexpected accumulator fragment");
    constexpr int MM = decltype(size<1>(acc))::value;
    static_assert((MM == 1 || MM == 2) && decltype(size<2>(acc))::value == 1,
                  "one or two wgmma atoms along M, one along N, per warpgroup");
    static_assert(decltype(size<0, 0>(acc))::value == 2 && decltype(size<0, 1>(acc))::value == 2 &&
                      decltype(size<0, 2>(acc))::value == TileN / 8,
                  "wgmma 64xN accumulator: (2 columns, 2 row halves, N / 8 column groups)");
    static_assert(TileM == 64 || TileM == 128, "64 or 128 rows per tile");
    constexpr int H = kHeadsPerTile;
    constexpr int R = 2 * MM;  // rows per thread: row r is row half r % 2 of atom r / 2
    const int M = int(get<0>(problem_shape_mnkl));
    const auto* bias = static_cast<const __nv_bfloat16*>(p_.bias);
    const auto* cos_tab = static_cast<const __nv_bfloat16*>(p_.cos);
    const auto* sin_tab = static_cast<const __nv_bfloat16*>(p_.sin);

    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor tCcD = thr_mma.partition_C(make_identity_tensor(make_shape(Int<TileM>{}, Int<TileN>{})));
    auto at = [&](int v0, int r, int v2) { return make_coord(make_coord(v0, r % 2, v2), r / 2, 0); };

    const int m0 = int(get<0>(blk_coord_mnkl)) * TileM;
    const int head0 = int(get<1>(blk_coord_mnkl)) * H;
    // Channel of column group j (< 8) of head 0, v0 = 0: 8 j + 2 (lane % 4); its partner is group j + 8.
    auto chan = [&](int j) { return int(get<1>(tCcD(at(0, 0, j)))); };
    const int q = chan(0) / 2;  // lane % 4: the thread's place among the four lanes of a row

    int b[R], s[R];
    bool live[R];
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < R; ++r) {
      const int m = m0 + int(get<0>(tCcD(at(0, r, 0))));
      live[r] = m < M;
      b[r] = live[r] ? m / p_.seq : 0;
      s[r] = live[r] ? m - b[r] * p_.seq : 0;
    }

    // The table offset of each channel pair this thread holds, first and second half (plane * stride +
    // channel; d and d + 1 share a plane: even section boundaries, host): the same for all its rows.
    int tab_off[8][2];  // < 2^31: epi_table_offsets_fit
    if constexpr (kMode == RopeMode::kTable) {
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 8; ++j) {
        const int d = chan(j);
        const int shift = 2 * (d % 16);
        const int plane1 = (p_.plane_bits[j / 2] >> shift) & 3;
        const int plane2 = (p_.plane_bits[kHalf / 16 + j / 2] >> shift) & 3;
        tab_off[j][0] = plane1 * int(p_.tab_plane_stride) + d;
        tab_off[j][1] = plane2 * int(p_.tab_plane_stride) + d + kHalf;
      }
    }

    // A row's cos/sin (kTable): 32 words, all loads in flight together. Row r + 1's are issued before
    // row r's RoPE and stores, so that their round trip overlaps row r's work.
    auto load_tab = [&](int r, uint32_t (&t)[8][4]) {
      if constexpr (kMode == RopeMode::kTable) {
        const int64_t row = b[r] * p_.tab_batch_stride + s[r] * p_.tab_seq_stride;
        const __nv_bfloat16* cos_row = cos_tab + row;
        const __nv_bfloat16* sin_row = sin_tab + row;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 8; ++j) {
          t[j][0] = __ldg(reinterpret_cast<const unsigned int*>(cos_row + tab_off[j][0]));
          t[j][1] = __ldg(reinterpret_cast<const unsigned int*>(sin_row + tab_off[j][0]));
          t[j][2] = __ldg(reinterpret_cast<const unsigned int*>(cos_row + tab_off[j][1]));
          t[j][3] = __ldg(reinterpret_cast<const unsigned int*>(sin_row + tab_off[j][1]));
        }
      }
    };

    // 1. Loads: bias of every column this thread holds.
    uint32_t bias_raw[H][8][2];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < H; ++h)
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 8; ++j) {
        const bool ok = bias != nullptr && head0 + h < p_.heads;
        const __nv_bfloat16* bh = bias + (head0 + h) * kQkvHeadDim + chan(j);
        bias_raw[h][j][0] = ok ? __ldg(reinterpret_cast<const unsigned int*>(bh)) : 0u;
        bias_raw[h][j][1] = ok ? __ldg(reinterpret_cast<const unsigned int*>(bh + kHalf)) : 0u;
      }

    // 2. y = bf16(acc + bias): F.linear's one rounding after the bias add.
    __nv_bfloat162 y[R][H][8][2];
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < R; ++r)
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < H; ++h)
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 8; ++j)
          CUTLASS_PRAGMA_UNROLL
          for (int half = 0; half < 2; ++half) {
            const int v2 = h * 16 + j + half * 8;
            const float2 bb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bias_raw[h][j][half]));
            y[r][h][j][half] = __floats2bfloat162_rn(__fadd_rn(acc(at(0, r, v2)), bb.x),
                                                     __fadd_rn(acc(at(1, r, v2)), bb.y));
          }

    // One row ahead on the tiles with two rows per thread (the cooperative 128 x 256 and the ping-pong
    // 64 x 256 ones); the 128 x 128 ping-pong tile's four rows spilled 184 B with it, and its epilogue
    // runs under the other warpgroup's mainloop anyway.
    constexpr bool kAhead = R <= 2;
    uint32_t tab_next[8][4];
    if (kAhead) load_tab(0, tab_next);  // after the accumulators die: issued with the bias, they spilled

    // 4. RoPE (the reference's three roundings) and the head-major stores.
    const int64_t head_stride = int64_t(p_.seq) * kQkvHeadDim;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < R; ++r) {
      // Skipped only when no row of the warp is live (the shuffles below need every lane; the rows after
      // it are dead too); a dead row among live ones reads row (0, 0) and stores nothing.
      if (!__any_sync(0xffffffffu, live[r])) continue;
      __nv_bfloat16* out_row =
          static_cast<__nv_bfloat16*>(p_.out) + (int64_t(b[r]) * p_.heads * p_.seq + s[r]) * kQkvHeadDim;
      // 3. kTable: this row's cos/sin (loaded a row ahead where kAhead), then the next row's loads.
      uint32_t tab[8][4];
      if (!kAhead) load_tab(r, tab_next);
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 8; ++j)
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < 4; ++k) tab[j][k] = tab_next[j][k];
      if (kAhead && r + 1 < R) load_tab(r + 1, tab_next);
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < H; ++h) {
        const int head = head0 + h;
        if (head >= p_.heads) break;  // uniform across the warp
        uint32_t o[2][8];             // [half][j]: channels 8 j + 2 q, + 1 of the first / second half
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 8; ++j) {
          const uint32_t y1 = *reinterpret_cast<const uint32_t*>(&y[r][h][j][0]);
          const uint32_t y2 = *reinterpret_cast<const uint32_t*>(&y[r][h][j][1]);
          if constexpr (kMode == RopeMode::kTable) {  // rotate-half: first half reads -x[c + 64], second x[c - 64]
            o[0][j] = qkv::rope_combine2(y1, y2, tab[j][0], tab[j][1], /*minus=*/true);
            o[1][j] = qkv::rope_combine2(y2, y1, tab[j][2], tab[j][3], /*minus=*/false);
          } else {
            o[0][j] = y1;
            o[1][j] = y2;
          }
        }
        // 16-byte stores: the four lanes of a row hold channel pairs 2 q of groups j..j+3; after a 4 x 4
        // transpose across them, lane q holds all 8 channels of group j + q.
        CUTLASS_PRAGMA_UNROLL
        for (int half = 0; half < 2; ++half)
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < 2; ++k) {
            uint32_t w[4] = {o[half][4 * k], o[half][4 * k + 1], o[half][4 * k + 2], o[half][4 * k + 3]};
            quad_transpose(w, q);
            if (live[r])
              *reinterpret_cast<uint4*>(out_row + head * head_stride + half * kHalf + (4 * k + q) * 8) =
                  make_uint4(w[0], w[1], w[2], w[3]);
          }
      }
    }
  }

 private:
  Params p_;
};

// The GEMM: CUTLASS's persistent TMA warp-specialized kernel with the epilogue above, cooperative (both
// consumer warpgroups on one 128-row tile, the epilogue between two mainloops) or ping-pong (a 64-row
// tile per warpgroup, one warpgroup's epilogue under the other's mainloop).
template <RopeMode kMode, int TileM, int TileN, int ClusterM, bool kCoop>
struct Sm90GemmRopeEpi {
  using Element = cutlass::bfloat16_t;
  static constexpr int kAlignment = 16 / sizeof(Element);
  using TileShape = Shape<Int<TileM>, Int<TileN>, _64>;
  using ClusterShape = Shape<Int<ClusterM>, _1, _1>;
  using CollectiveEpilogue =
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<RopeStoreEpilogue<kMode, TileM, TileN>>;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlignment, Element,
      cutlass::layout::ColumnMajor, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cute::conditional_t<kCoop, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                          cutlass::gemm::KernelTmaWarpSpecializedPingpong>>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  static_assert(GemmKernel::SharedStorageSize <= kSm90MaxSmemBytes, "does not fit in 227 KB of shared memory");

  static typename Gemm::Arguments make_arguments(const GemmRopeEpiParams& p) {
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    const GemmParams& g = p.gemm;
    StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(g.m, g.k, 1));
    StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(g.n, g.k, 1));
    cute::get<0>(stride_a) = g.lda;
    cute::get<0>(stride_b) = g.ldb;
    cutlass::KernelHardwareInfo hw_info{g.device, g.sm_count};
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {g.m, g.n, g.k, 1},
                                  {static_cast<const Element*>(g.a), stride_a, static_cast<const Element*>(g.b), stride_b},
                                  p.epi,
                                  hw_info};
    set_tile_order(args.scheduler);
    return args;
  }

  static size_t workspace_bytes(const GemmRopeEpiParams& p) { return Gemm::get_workspace_size(make_arguments(p)); }

  static GemmStatus run(const GemmRopeEpiParams& p, void* workspace, size_t workspace_size) {
    auto args = make_arguments(p);
    if (Gemm::get_workspace_size(args) > workspace_size) return GemmStatus::kWorkspaceTooSmall;
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return GemmStatus::kNotSupported;
    return launch_gemm_kernel<GemmKernel>(args, p.gemm.device, p.gemm.stream, workspace);
  }
};

// One tile's modes behind one entry (the mode is a run-time property of the group).
template <int TileM, int TileN, int ClusterM, bool kCoop>
struct GemmRopeEpiTile {
  template <RopeMode kMode>
  using K = Sm90GemmRopeEpi<kMode, TileM, TileN, ClusterM, kCoop>;

  static size_t workspace_bytes(const GemmRopeEpiParams& p) {
    switch (p.mode) {
      case RopeMode::kNone: return K<RopeMode::kNone>::workspace_bytes(p);
      case RopeMode::kTable: return K<RopeMode::kTable>::workspace_bytes(p);
      default: return 0;
    }
  }
  static GemmStatus run(const GemmRopeEpiParams& p, void* workspace, size_t bytes) {
    switch (p.mode) {
      case RopeMode::kNone: return K<RopeMode::kNone>::run(p, workspace, bytes);
      case RopeMode::kTable: return K<RopeMode::kTable>::run(p, workspace, bytes);
      default: return GemmStatus::kNotSupported;
    }
  }
};

}  // namespace gemm_epi
}  // namespace vlattn
