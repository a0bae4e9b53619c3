// sm_90a bf16 projection GEMM: D[M,N] = A[M,K] . B[N,K]^T (+ bias[N]), fp32 accumulation,
// rounded once to bf16 after the bias add (the rounding PyTorch's F.linear does).
//
// Assembled from CUTLASS 3.x collectives: TMA loads into a multistage smem pipeline, a producer
// warp and one or two consumer warpgroups issuing wgmma, a TMA-store epilogue with the bias
// broadcast fused (EVT). A and B are both K-major (activations [M,K] row-major, PyTorch Linear
// weights [N,K] row-major), so this is the "TN" GEMM that needs no transposes anywhere.
//
// Each instantiation is one named config (python/vlattn/gemm_configs.py); setup.py generates one
// translation unit per config so builds parallelize and one config's compile error names itself.
#pragma once

// CuTe's wgmma selector (cute/arch/mma_sm90.hpp, ss_op_selector) only knows the N sizes 256, 192, 128,
// 96, 64, 32, 16 and 8 unless this is defined: a 144-wide tile then runs nine 64x16 wgmmas per k-step
// instead of one 64x144, 2.3x slower (thirtieth session: the wave-fitted widths 112/144/208 measured
// 42-73 us for one wave where 128x128 takes 25). With it the selector takes the largest multiple of 8
// that divides the tile's N; for the power-of-two and 192-wide tiles that is the same choice as before.
// It must come before any CuTe header: the static_assert in Sm90Gemm catches a TU where it came late.
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED 1
#endif

#include <algorithm>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "kernels/gemm_config.h"
#include "kernels/splitk_reduce.h"
#include "launch/cutlass_launch.h"
#include "launch/gemm_params.h"
#include "launch/host_trace.h"
#include "launch/pdl.h"
#include "launch/smem_attr.h"

namespace vlattn {

// The persistent scheduler's tile order from the development knobs (gemm_tile_order_from_env).
template <class SchedulerArgs>
void set_tile_order(SchedulerArgs& scheduler) {
  const GemmTileOrder order = gemm_tile_order_from_env();
  using Raster = decltype(scheduler.raster_order);
  scheduler.raster_order = order.raster == 1 ? Raster::AlongM : order.raster == 2 ? Raster::AlongN : Raster::Heuristic;
  scheduler.max_swizzle_size = order.swizzle;
}

// What GemmUniversalAdapter::initialize + run do, with the dynamic shared memory attribute set once
// per device (launch/smem_attr.h) instead of on every call, launched by launch_cutlass_kernel
// (launch/cutlass_launch.h: one cudaLaunchKernelEx, no per-call driver attribute). With
// CUTLASS_ENABLE_GDC_FOR_SM90 (defined by the instantiating TU) the kernel waits on its predecessor
// grid before touching memory, so it may be launched with PDL (launch/pdl.h). The caller has checked
// the workspace size and can_implement.
template <class GemmKernel>
GemmStatus launch_gemm_kernel(typename GemmKernel::Arguments const& args, int device, cudaStream_t stream,
                              void* workspace) {
  if (!max_dynamic_smem_once<cutlass::device_kernel<GemmKernel>>(device, GemmKernel::SharedStorageSize))
    return GemmStatus::kInitFailed;
  VLATTN_HOST_MARK("gemm.args");
  if (GemmKernel::initialize_workspace(args, workspace, stream, nullptr) != cutlass::Status::kSuccess)
    return GemmStatus::kInitFailed;
  VLATTN_HOST_MARK("gemm.init_ws");
  typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, workspace);
  VLATTN_HOST_MARK("gemm.params");
#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
  const bool pdl = pdl_enabled();
#else
  const bool pdl = false;
#endif
  if (launch_cutlass_kernel<GemmKernel>(params, stream, pdl) != cudaSuccess) return GemmStatus::kLaunchFailed;
  VLATTN_HOST_MARK("gemm.launch");
  return GemmStatus::kSuccess;
}

template <class Cfg>
struct Sm90Gemm {
  using Element = cutlass::bfloat16_t;
  using ElementAccumulator = float;
  using ElementCompute = float;
  // Not swapped: A = activations [M, K], B = weight [N, K] seen as K x N column-major, D = [M, N].
  // Swapped (Cfg::kSwapAB): A = weight [N, K], B = activations [M, K] seen as K x M column-major, and
  // the kernel's [N, M] output column-major, which is the same memory as [M, N] row-major.
  static constexpr bool kSwap = Cfg::kSwapAB;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cute::conditional_t<kSwap, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  // 16-byte accesses: what TMA requires of every row stride and base address.
  static constexpr int kAlignment = 16 / sizeof(Element);

  using TileShape = cute::Shape<cute::Int<Cfg::kTileM>, cute::Int<Cfg::kTileN>, cute::Int<Cfg::kTileK>>;
  using ClusterShape = cute::Shape<cute::Int<Cfg::kClusterM>, cute::Int<Cfg::kClusterN>, cute::_1>;
  static constexpr bool kCoop = Cfg::kSchedule == Schedule::kCooperative;
  using MainloopSchedule = cute::conditional_t<kCoop, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<kCoop, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                               cutlass::epilogue::TmaWarpSpecialized>;
  using Scheduler = cute::conditional_t<Cfg::kTileSched == TileSched::kStreamK,
                                        cutlass::gemm::StreamKScheduler, cutlass::gemm::PersistentScheduler>;

  // Parallel split-K (TileSched::kParallelSplitK): the kernel runs batched over L = p.splits slices of K, each
  // slice's fp32 accumulator stored as is to the workspace ([L, M, N] row-major, no bias, no rounding); then
  // kernels/splitk_reduce.h adds the slices in order, adds the bias and rounds once to bf16.
  static constexpr bool kParallel = Cfg::kTileSched == TileSched::kParallelSplitK;
  using ElementD = cute::conditional_t<kParallel, float, Element>;
  static constexpr int kAlignmentD = 16 / sizeof(ElementD);

  // D = round_bf16(1 * acc + bias[n]); no C operand is read (ElementC = void). The bias runs along the
  // weight's rows: the kernel's N, or its M when swapped.
  template <template <class, class, class, class, class, int, cutlass::FloatRoundStyle> class BiasOp>
  using BiasFusion = BiasOp<Element, ElementCompute, Element, Element, ElementCompute, kAlignment,
                            cutlass::FloatRoundStyle::round_to_nearest>;
  using PartialFusion = cutlass::epilogue::fusion::LinearCombination<float, ElementCompute, void, ElementCompute,
                                                                     cutlass::FloatRoundStyle::round_to_nearest>;
  using Fusion = cute::conditional_t<
      kParallel, PartialFusion,
      cute::conditional_t<kSwap, BiasFusion<cutlass::epilogue::fusion::LinCombPerRowBias>,
                          BiasFusion<cutlass::epilogue::fusion::LinCombPerColBias>>>;

  // CUTLASS's subtile (128 x 32 cooperative, 64 x 32 ping-pong for bf16) or Cfg::kEpiN columns.
  using EpilogueTile = cute::conditional_t<
      Cfg::kEpiN == 0, cutlass::epilogue::collective::EpilogueTileAuto,
      cute::Shape<cute::Int<kCoop ? 128 : 64>, cute::Int<(Cfg::kEpiN > 0 ? Cfg::kEpiN : 32)>>>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      EpilogueTile, ElementAccumulator, ElementCompute,
      void, LayoutD, kAlignmentD, ElementD, LayoutD, kAlignmentD, EpilogueSchedule, Fusion>::CollectiveOp;

  using StageCount = cute::conditional_t<
      Cfg::kStages == 0,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::collective::StageCount<(Cfg::kStages > 0 ? Cfg::kStages : 1)>>;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlignment, Element, LayoutB,
      kAlignment, ElementAccumulator, TileShape, ClusterShape, StageCount, MainloopSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static_assert(GemmKernel::SharedStorageSize <= kSm90MaxSmemBytes,
                "config does not fit in Hopper's 227 KB of shared memory");
  // One wgmma covers the tile's whole N per warpgroup (see CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED above):
  // a narrower atom is legal but re-reads A from shared memory once per atom.
  static_assert(cute::size<1>(typename CollectiveMainloop::TiledMma::AtomShape_MNK{}) == Cfg::kTileN,
                "wgmma atom narrower than the tile's N: CuTe's extended MMA shapes are not enabled in this TU");

  // Parallel split-K: the K slice of each of the p.splits batches (K must divide evenly into 16-byte rows:
  // splits_fit), and the bytes of fp32 partials at the workspace's start (256-byte aligned, CUTLASS's after).
  static int slice_k(const GemmParams& p) { return kParallel ? p.k / std::max(p.splits, 1) : p.k; }
  static bool splits_fit(const GemmParams& p) {
    return p.splits >= 2 && p.splits <= kMaxGemmSplits && p.k % p.splits == 0 && (p.k / p.splits) % 8 == 0;
  }
  static size_t partial_bytes(const GemmParams& p) {
    if constexpr (!kParallel) return 0;
    return (size_t(p.splits) * size_t(p.m) * size_t(p.n) * sizeof(float) + 255) / 256 * 256;
  }

  static typename Gemm::Arguments make_arguments(const GemmParams& p, void* partials = nullptr) {
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    using StrideD = typename GemmKernel::StrideD;
    // The kernel's M x N: the weight's rows x the tokens when swapped.
    const int km = kSwap ? p.n : p.m, kn = kSwap ? p.m : p.n;
    const int kk = slice_k(p), batches = kParallel ? p.splits : 1;
    StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(km, kk, batches));
    StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(kn, kk, batches));
    StrideD stride_d = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(km, kn, batches));
    // Leading dimensions from the caller: views with padded rows work without a copy. D's is the stride
    // between tokens: mode 0 row-major, mode 1 when the kernel's [N, M] output is column-major. The
    // parallel split-K partials are packed [L, M, N], and batch l of A and B starts at column l * kk of
    // the same rows (TMA clips each slice at kk, so no slice reads its neighbour's columns).
    cute::get<0>(stride_a) = kSwap ? p.ldb : p.lda;
    cute::get<0>(stride_b) = kSwap ? p.lda : p.ldb;
    if constexpr (kParallel) {
      cute::get<2>(stride_a) = kk;
      cute::get<2>(stride_b) = kk;
    } else {
      cute::get<kSwap ? 1 : 0>(stride_d) = p.ldd;
    }
    ElementD* d = kParallel ? static_cast<ElementD*>(partials) : static_cast<ElementD*>(p.d);

    cutlass::KernelHardwareInfo hw_info{p.device, p.sm_count};
    typename Gemm::Arguments args{kParallel ? cutlass::gemm::GemmUniversalMode::kBatched
                                            : cutlass::gemm::GemmUniversalMode::kGemm,
                                  {km, kn, kk, batches},
                                  {static_cast<const Element*>(kSwap ? p.b : p.a), stride_a,
                                   static_cast<const Element*>(kSwap ? p.a : p.b), stride_b},
                                  {{}, nullptr, stride_d, d, stride_d},
                                  hw_info};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    if constexpr (!kParallel)
      args.epilogue.thread.bias_ptr = static_cast<const Element*>(p.bias);  // nullptr reads as zero
    set_tile_order(args.scheduler);
    if constexpr (Cfg::kTileSched == TileSched::kStreamK) {
      // Deterministic fix-up order: two runs on the same inputs give the same bits.
      using Reduction = decltype(args.scheduler.reduction_mode);
      args.scheduler.reduction_mode = Reduction::Deterministic;
      if (p.splits > 1) {  // plain split-K: every output tile's K range cut into p.splits equal parts
        using Decomposition = decltype(args.scheduler.decomposition_mode);
        args.scheduler.splits = p.splits;
        args.scheduler.decomposition_mode = Decomposition::SplitK;
      }
    }
    return args;
  }

  static size_t workspace_bytes(const GemmParams& p) {
    if constexpr (kParallel) {
      if (!splits_fit(p)) return 0;  // run refuses it
    }
    return partial_bytes(p) + Gemm::get_workspace_size(make_arguments(p));
  }

  static GemmStatus run(const GemmParams& p, void* workspace, size_t workspace_size) {
    if constexpr (kParallel) {
      // A parallel split-K config always splits, into slices of whole 16-byte rows.
      if (!splits_fit(p)) return GemmStatus::kSplitsDoNotFit;
      const size_t partials = partial_bytes(p);
      auto args = make_arguments(p, workspace);
      if (workspace == nullptr || partials + Gemm::get_workspace_size(args) > workspace_size)
        return GemmStatus::kWorkspaceTooSmall;
      void* rest = static_cast<char*>(workspace) + partials;
      if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return GemmStatus::kNotSupported;
      const GemmStatus s = launch_gemm_kernel<GemmKernel>(args, p.device, p.stream, rest);
      if (s != GemmStatus::kSuccess) return s;
      return launch_splitk_reduce(static_cast<const float*>(workspace), p.splits, p.m, p.n, p.bias, p.d, p.ldd,
                                  p.stream) == cudaSuccess
                 ? GemmStatus::kSuccess
                 : GemmStatus::kLaunchFailed;
    } else {
      // Only the stream-K scheduler splits K; a persistent config asked to split is refused, not ignored.
      if (p.splits != 1 && (Cfg::kTileSched != TileSched::kStreamK || p.splits < 1 || p.splits > kMaxGemmSplits))
        return GemmStatus::kNotSupported;
      auto args = make_arguments(p);
      if (Gemm::get_workspace_size(args) > workspace_size) return GemmStatus::kWorkspaceTooSmall;
      if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return GemmStatus::kNotSupported;
      return launch_gemm_kernel<GemmKernel>(args, p.device, p.stream, workspace);
    }
  }
};

}  // namespace vlattn
