// sm_90a grouped projection GEMM (qkv_grouped.h): CUTLASS's ptr-array kernel over up to
// kGroupedMaxProblems problems, D_i = bf16(A_i . B_i^T + bias_i), each with its own M, N, pointers
// and row strides, in one persistent launch whose tile scheduler walks the tiles of all problems.
//
// Assembled from CUTLASS 3.x collectives (the grouped variants of the ones in kernels/sm90_gemm.cuh):
// TMA loads whose tensor maps the kernel rewrites in place when a CTA moves to another problem, a
// wgmma mainloop, and a TMA-store epilogue whose visitor tree adds the problem's bias, read through an
// array of per-problem pointers, before the one bf16 rounding (F.linear's: round(acc + bias)).
//
// The kernel reads the problem shapes, pointers and strides from device memory. fill_args writes them
// into the head of the caller's workspace from its kernel arguments, on the same stream, right before
// the GEMM; the GEMM is launched without programmatic dependent launch (CUTLASS 4.2's ptr-array
// kernels have no griddepcontrol.wait), so it starts after fill_args and everything before it.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "launch/cutlass_launch.h"
#include "launch/host_trace.h"
#include "launch/pdl.h"
#include "launch/smem_attr.h"
#include "qkv/qkv_grouped.h"

namespace vlattn {
namespace grouped {

using namespace cute;

template <int TileM, int TileN, bool Coop>
struct GroupedGemm {
  using Element = cutlass::bfloat16_t;
  using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (M, N, K) per problem
  using UnderlyingShape = typename ProblemShape::UnderlyingProblemShape;
  static constexpr int kAlignment = 16 / sizeof(Element);  // TMA: 16-byte rows and bases

  using TileShape = Shape<Int<TileM>, Int<TileN>, _64>;
  using ClusterShape = Shape<_1, _1, _1>;
  using MainloopSchedule = cute::conditional_t<Coop, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<Coop, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;

  // D = round_bf16(acc + bias_l[n]): the bias row of problem l through an array of pointers (a null
  // array reads as zeros; the dRow stride over l is 0 since each pointer is already the problem's).
  using Bias = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, Element*, float, Stride<_0, _1, int64_t>,
                                                           kAlignment>;
  using Fusion = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<cutlass::plus, Element, float, cutlass::FloatRoundStyle::round_to_nearest>,
      cutlass::epilogue::fusion::Sm90AccFetch, Bias>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor*, kAlignment,
      Element, cutlass::layout::RowMajor*, kAlignment, EpilogueSchedule, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor*, kAlignment, Element,
      cutlass::layout::ColumnMajor*, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using StrideA = typename GemmKernel::InternalStrideA;
  using StrideB = typename GemmKernel::InternalStrideB;
  using StrideD = typename GemmKernel::InternalStrideD;

  static_assert(GemmKernel::SharedStorageSize <= 227 * 1024, "config does not fit in 227 KB of shared memory");
  // Every operand is K- or N-contiguous with one dynamic row stride (mode 0) and a unit mode 1.
  static_assert(cute::is_static_v<decltype(get<1>(StrideA{}))> && cute::is_static_v<decltype(get<1>(StrideB{}))> &&
                    cute::is_static_v<decltype(get<1>(StrideD{}))>,
                "row strides only");

  // What the kernel reads from device memory, one slot per problem.
  struct DeviceArgs {
    UnderlyingShape shape[kGroupedMaxProblems];
    const Element* a[kGroupedMaxProblems];
    const Element* b[kGroupedMaxProblems];
    Element* d[kGroupedMaxProblems];
    const Element* bias[kGroupedMaxProblems];
    StrideA stride_a[kGroupedMaxProblems];
    StrideB stride_b[kGroupedMaxProblems];
    StrideD stride_d[kGroupedMaxProblems];
  };
  static constexpr size_t kArgsBytes = (sizeof(DeviceArgs) + 255) / 256 * 256;  // CUTLASS's part 256-B aligned

  static bool supported(const GroupedGemmParams& p) {
    if (p.count < 1 || p.count > kGroupedMaxProblems || p.sm_count < 1) return false;
    const bool with_bias = p.prob[0].bias != nullptr;
    for (int i = 0; i < p.count; ++i) {
      const GroupedProblem& q = p.prob[i];
      const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
      if (q.m < 1 || q.n < 1 || q.k < 1 || q.k % kAlignment || q.n % kAlignment) return false;
      if (!aligned(q.a) || !aligned(q.b) || !aligned(q.d) || q.a == nullptr || q.b == nullptr || q.d == nullptr)
        return false;
      if (q.lda % kAlignment || q.ldb % kAlignment || q.ldd % kAlignment || q.lda < q.k || q.ldb < q.k || q.ldd < q.n)
        return false;
      if ((q.bias != nullptr) != with_bias || !aligned(q.bias)) return false;
    }
    return true;
  }

  // Arguments pointing into the workspace's argument block (device addresses; the host shapes are
  // used by to_underlying_arguments only, which sizes the grid from them).
  static typename Gemm::Arguments make_arguments(const GroupedGemmParams& p, DeviceArgs* dev,
                                                 const UnderlyingShape* host_shapes) {
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {p.count, dev->shape, host_shapes};
    args.mainloop = {dev->a, dev->stride_a, dev->b, dev->stride_b};
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
    args.epilogue.ptr_D = dev->d;
    args.epilogue.dD = dev->stride_d;
    auto& bias_args = args.epilogue.thread.op_1;  // children (acc, bias), then the plus node
    bias_args.ptr_row = p.prob[0].bias != nullptr ? dev->bias : nullptr;
    bias_args.null_default = Element(0);
    bias_args.dRow = {_0{}, _1{}, int64_t(0)};
    args.hw_info = cutlass::KernelHardwareInfo{p.device, p.sm_count};
    return args;
  }

  static size_t workspace_bytes(const GroupedGemmParams& p) {
    if (!supported(p)) return 0;
    UnderlyingShape host_shapes[kGroupedMaxProblems];
    for (int i = 0; i < p.count; ++i) host_shapes[i] = {p.prob[i].m, p.prob[i].n, p.prob[i].k};
    auto args = make_arguments(p, reinterpret_cast<DeviceArgs*>(uintptr_t(256)), host_shapes);
    return kArgsBytes + Gemm::get_workspace_size(args);
  }

  static bool smem_attribute_once(int device) {
    return max_dynamic_smem_once<cutlass::device_kernel<GemmKernel>>(device, GemmKernel::SharedStorageSize);
  }

  static cudaError_t run(const GroupedGemmParams& p, void* workspace, size_t bytes);
};

// One block: thread i writes problem i's slot from the kernel arguments.
template <class G>
__global__ void fill_args(typename G::DeviceArgs* dev, GroupedGemmParams p) {
  pdl_enter();  // the workspace block may have been another kernel's until its predecessors finish
  const int i = threadIdx.x;
  if (i >= p.count) return;
  using Element = typename G::Element;
  const GroupedProblem& q = p.prob[i];
  dev->shape[i] = typename G::UnderlyingShape{q.m, q.n, q.k};
  dev->a[i] = static_cast<const Element*>(q.a);
  dev->b[i] = static_cast<const Element*>(q.b);
  dev->d[i] = static_cast<Element*>(q.d);
  dev->bias[i] = static_cast<const Element*>(q.bias);
  typename G::StrideA sa{};
  typename G::StrideB sb{};
  typename G::StrideD sd{};
  get<0>(sa) = q.lda;
  get<0>(sb) = q.ldb;
  get<0>(sd) = q.ldd;
  dev->stride_a[i] = sa;
  dev->stride_b[i] = sb;
  dev->stride_d[i] = sd;
}

template <int TileM, int TileN, bool Coop>
cudaError_t GroupedGemm<TileM, TileN, Coop>::run(const GroupedGemmParams& p, void* workspace, size_t bytes) {
  if (!supported(p)) return cudaErrorNotSupported;
  if (reinterpret_cast<uintptr_t>(workspace) % 256) return cudaErrorInvalidValue;
  auto* dev = static_cast<DeviceArgs*>(workspace);
  void* cutlass_ws = static_cast<char*>(workspace) + kArgsBytes;
  UnderlyingShape host_shapes[kGroupedMaxProblems];
  for (int i = 0; i < p.count; ++i) host_shapes[i] = {p.prob[i].m, p.prob[i].n, p.prob[i].k};
  auto args = make_arguments(p, dev, host_shapes);
  if (bytes < kArgsBytes + Gemm::get_workspace_size(args)) return cudaErrorInvalidValue;  // = workspace_bytes(p)
  if (!GemmKernel::can_implement(args)) return cudaErrorNotSupported;
  if (!smem_attribute_once(p.device)) return cudaErrorNotSupported;
  VLATTN_HOST_MARK("grouped.args");

  // The host work (tensor-map encodes in to_underlying_arguments) before the first launch: fill_args
  // and the GEMM then go out back to back (it cost 6-7 us of GPU idle time per call between them,
  // bench/NOTES.md eighth session).
  if (GemmKernel::initialize_workspace(args, cutlass_ws, p.stream, nullptr) != cutlass::Status::kSuccess)
    return cudaErrorUnknown;
  VLATTN_HOST_MARK("grouped.init_ws");
  typename Gemm::Params params = GemmKernel::to_underlying_arguments(args, cutlass_ws);
  VLATTN_HOST_MARK("grouped.params");
  cudaError_t err = launch_pdl(&fill_args<GroupedGemm>, dim3(1), dim3(32), 0, p.stream, 0, dev, p);
  VLATTN_HOST_MARK("grouped.fill_args");
  if (err != cudaSuccess) return err;
  // No PDL: the ptr-array kernel does not wait on its predecessor grid (see the top of this file).
  err = launch_cutlass_kernel<GemmKernel>(params, p.stream, false);
  if (err != cudaSuccess) return err;
  VLATTN_HOST_MARK("grouped.launch");
  return cudaSuccess;
}

}  // namespace grouped
}  // namespace vlattn
