// sm_90a QKV projection of every group in one launch (qkv/gemm_rope_epi.h, "stacked"): the per-group
// RoPE-epilogue GEMM (qkv/sm90_gemm_rope_epi.cuh) over N = the groups' widths one after another.
//
// Two thin layers over that kernel's pieces, inside CUTLASS's persistent warp-specialized kernel:
// - StackedBMainloop wraps the CUTLASS TMA + wgmma collective. Its Params hold the inner collective's Params
//   once per group (the same A descriptor each time, the group's weight as B); the producer picks the tile's
//   group from its column and loads through that group's descriptors, the tile column made local to the group.
//   The consumers' mma does not read descriptors. One instantiation of the inner load serves every group.
// - StackedRopeStoreEpilogue picks the same group and runs the per-group epilogue's tile code
//   (rope_store_tile) with that group's arguments, with table RoPE or none by the group.
#pragma once

#include <climits>

#include "qkv/sm90_gemm_rope_epi.cuh"

namespace vlattn {
namespace gemm_epi {

// The tile column's group: tile_begin ascending, unused slots INT32_MAX.
CUTLASS_HOST_DEVICE int stacked_group(const int (&tile_begin)[kGemmRopeStackMax], int tile_n) {
  static_assert(kGemmRopeStackMax == 3, "two comparisons pick one of three groups");
  return (tile_n >= tile_begin[1] ? 1 : 0) + (tile_n >= tile_begin[2] ? 1 : 0);
}

template <class Inner>
struct StackedBMainloop : Inner {
  static constexpr int G = kGemmRopeStackMax;
  static constexpr int kTileN = int(cute::size<1>(typename Inner::TileShape{}));
  using typename Inner::MainloopPipeline;
  using typename Inner::PipelineState;
  using typename Inner::TensorStorage;

  struct Arguments {
    typename Inner::Arguments group[G];  // A (x) in each; B the group's weight
    int n[G] = {};                       // the group's columns (multiples of kTileN)
    int groups = 0;
  };
  struct Params {
    typename Inner::Params group[G];
    int tile_begin[G];
    int n[G];
    int m, k, l;
    uint32_t tma_transaction_bytes;  // the kernel sets its pipeline's transaction bytes from it (A + B tile)
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& shape, Arguments const& a, void* workspace) {
    auto mnkl = append<4>(shape, 1);
    const int M = int(get<0>(mnkl)), K = int(get<2>(mnkl)), L = int(get<3>(mnkl));
    Params p{};
    int begin = 0;
    for (int g = 0; g < G; ++g) {
      const bool used = g < a.groups;
      const int gi = used ? g : 0;  // an unused slot repeats group 0's descriptors; its tile_begin is never reached
      p.group[g] = Inner::to_underlying_arguments(make_shape(M, a.n[gi], K, L), a.group[gi], workspace);
      p.n[g] = a.n[gi];
      p.tile_begin[g] = used ? begin / kTileN : INT_MAX;
      if (used) begin += a.n[g];
    }
    p.m = M;
    p.k = K;
    p.l = L;
    p.tma_transaction_bytes = p.group[0].tma_transaction_bytes;
    return p;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& a) {
    auto mnkl = append<4>(shape, 1);
    if (a.groups < 1 || a.groups > G) return false;
    int64_t total = 0;
    for (int g = 0; g < a.groups; ++g) {
      if (a.n[g] <= 0 || a.n[g] % kTileN != 0) return false;
      if (!Inner::can_implement(make_shape(int(get<0>(mnkl)), a.n[g], int(get<2>(mnkl)), int(get<3>(mnkl))),
                                a.group[g]))
        return false;
      total += a.n[g];
    }
    return total == int64_t(get<1>(mnkl));
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    for (int g = 0; g < G; ++g) Inner::prefetch_tma_descriptors(p.group[g]);
  }

  // The kernel reads only the tiled shapes of these (tile counts along M, N and K): the whole N's.
  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& shape, Params const& p) const {
    return Inner::load_init(shape, p.group[0]);
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& p, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx, uint32_t block_rank_in_cluster,
                           TensorStorage& shared_tensors) {
    const int tile_n = int(get<1>(blk_coord));
    const int g = stacked_group(p.tile_begin, tile_n);
    auto group_inputs = Inner::load_init(make_shape(p.m, p.n[g], p.k, p.l), p.group[g]);
    Inner::load(p.group[g], pipeline, smem_pipe_write, cute::make_tuple(get<0>(load_inputs), get<1>(group_inputs)),
                make_coord(get<0>(blk_coord), tile_n - p.tile_begin[g], get<2>(blk_coord), get<3>(blk_coord)),
                k_tile_iter, k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const& p) {
    Inner::mma(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors, p.group[0]);
  }
};

template <int TileM, int TileN>
class StackedRopeStoreEpilogue : public RegisterEpilogueBase<GemmRopeStackedEpilogueArgs> {
  static_assert(TileN % kQkvHeadDim == 0, "a tile covers whole heads");
  static constexpr int kTilesPerHead = 1;

 public:
  using Base = RegisterEpilogueBase<GemmRopeStackedEpilogueArgs>;
  using typename Base::Arguments;
  using typename Base::Params;
  using typename Base::SharedStorage;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& a) {
    if (a.groups < 1 || a.groups > kGemmRopeStackMax || a.tile_begin[0] != 0) return false;
    int64_t tiles = 0;
    for (int g = 0; g < kGemmRopeStackMax; ++g) {
      if (g >= a.groups) {
        if (a.tile_begin[g] != INT_MAX) return false;
        continue;
      }
      const int64_t n = int64_t(a.group[g].heads) * kQkvHeadDim;
      if (n % TileN != 0 || a.tile_begin[g] != tiles || !rope_epilogue_args_ok(a.group[g], n, a.table[g] != 0))
        return false;
      tiles += n / TileN;
    }
    return tiles * TileN == int64_t(get<1>(shape));
  }

  // params is the kernel's parameter (grid constant): the group is picked by index there, per tile.
  CUTLASS_HOST_DEVICE explicit StackedRopeStoreEpilogue(Params const& params, SharedStorage const& = SharedStorage())
      : p_(&params) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK, BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma, ResidueMNK,
                                 int thread_idx, char*) {
    const int tile_n = int(get<1>(blk_coord_mnkl));
    const int g = stacked_group(p_->tile_begin, tile_n);
    const int M = int(get<0>(problem_shape_mnkl)), m0 = int(get<0>(blk_coord_mnkl)) * TileM;
    const int head0 = (tile_n - p_->tile_begin[g]) * (TileN / kQkvHeadDim);
    if (p_->table[g])
      rope_store_tile<RopeMode::kTable, TileM, TileN>(p_->group[g], M, m0, head0, acc, tiled_mma, thread_idx);
    else
      rope_store_tile<RopeMode::kNone, TileM, TileN>(p_->group[g], M, m0, head0, acc, tiled_mma, thread_idx);
  }

 private:
  Params const* p_;
};

template <int TileM, int TileN, int ClusterM, bool kCoop>
struct Sm90GemmRopeStacked {
  using Element = cutlass::bfloat16_t;
  // The per-group kernel's mainloop (its epilogue has no shared memory either: the same stage count).
  using Inner = typename Sm90GemmRopeEpi<RopeMode::kNone, TileM, TileN, ClusterM, kCoop>::CollectiveMainloop;
  using CollectiveMainloop = StackedBMainloop<Inner>;
  using CollectiveEpilogue =
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<StackedRopeStoreEpilogue<TileM, TileN>>;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  static_assert(GemmKernel::SharedStorageSize <= kSm90MaxSmemBytes, "does not fit in 227 KB of shared memory");

  static bool make_arguments(const GemmRopeStackedParams& p, typename GemmKernel::Arguments* out) {
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    const GemmParams& g = p.gemm;
    if (p.groups < 1 || p.groups > kGemmRopeStackMax) return false;
    StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(g.m, g.k, 1));
    cute::get<0>(stride_a) = g.lda;
    typename CollectiveMainloop::Arguments mainloop;
    GemmRopeStackedEpilogueArgs epi;
    int n_total = 0;
    for (int i = 0; i < kGemmRopeStackMax; ++i) epi.tile_begin[i] = INT_MAX;
    for (int i = 0; i < p.groups; ++i) {
      const int n = p.epi[i].heads * kQkvHeadDim;
      StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(n, g.k, 1));
      cute::get<0>(stride_b) = p.ldb[i];
      mainloop.group[i] = {static_cast<const Element*>(g.a), stride_a, static_cast<const Element*>(p.b[i]), stride_b};
      mainloop.n[i] = n;
      epi.group[i] = p.epi[i];
      epi.table[i] = p.mode[i] == RopeMode::kTable ? 1 : 0;
      epi.tile_begin[i] = n_total / TileN;
      n_total += n;
      if (p.mode[i] != RopeMode::kTable && p.mode[i] != RopeMode::kNone) return false;
    }
    mainloop.groups = p.groups;
    epi.groups = p.groups;
    cutlass::KernelHardwareInfo hw_info{g.device, g.sm_count};
    *out = typename GemmKernel::Arguments{cutlass::gemm::GemmUniversalMode::kGemm,
                                          {g.m, n_total, g.k, 1},
                                          mainloop,
                                          epi,
                                          hw_info};
    set_tile_order(out->scheduler);
    return true;
  }

  static size_t workspace_bytes(const GemmRopeStackedParams& p) {
    typename GemmKernel::Arguments args;
    return make_arguments(p, &args) ? GemmKernel::get_workspace_size(args) : 0;
  }

  static GemmStatus run(const GemmRopeStackedParams& p, void* workspace, size_t workspace_size) {
    typename GemmKernel::Arguments args;
    if (!make_arguments(p, &args)) return GemmStatus::kNotSupported;
    if (GemmKernel::get_workspace_size(args) > workspace_size) return GemmStatus::kWorkspaceTooSmall;
    if (!GemmKernel::can_implement(args)) return GemmStatus::kNotSupported;
    return launch_gemm_kernel<GemmKernel>(args, p.gemm.device, p.gemm.stream, workspace);
  }
};

}  // namespace gemm_epi
}  // namespace vlattn
