// Host launcher of the fused QKV projection (csrc/qkv/sm90_qkv_rope.cuh): builds one TMA tensor
// map for X and one per weight tensor (the callers' own tensors, every call), then launches one
// CTA per (head tile, row tile). No torch headers here (build notes #7).
#include "qkv/sm90_qkv_rope.cuh"

namespace vlattn {
namespace qkv {
namespace {

template <class T>
cudaError_t launch(const QkvParams& p) {
  using Element = typename T::Element;
  auto tma_a = make_tma_atom(
      SM90_TMA_LOAD{},
      make_tensor(make_gmem_ptr(static_cast<Element const*>(p.x)), make_shape(p.m, p.k), make_stride(p.ldx, Int<1>{})),
      typename T::SmemLayoutA{}(_, _, 0), Shape<Int<T::BM>, Int<T::BK>>{});
  auto make_b = [&](const QkvGroup& g) {
    return make_tma_atom(SM90_TMA_LOAD{},
                         make_tensor(make_gmem_ptr(static_cast<Element const*>(g.weight)),
                                     make_shape(g.heads * kQkvHeadDim, p.k), make_stride(g.ldw, Int<1>{})),
                         typename T::SmemLayoutB{}(_, _, 0), Shape<Int<T::BN>, Int<T::BK>>{});
  };
  using TmaA = decltype(tma_a);
  using TmaB = decltype(make_b(p.groups[0]));
  // Unused slots repeat group 0's map: never read, but always a valid descriptor.
  const QkvGroup& g1 = p.num_groups > 1 ? p.groups[1] : p.groups[0];
  const QkvGroup& g2 = p.num_groups > 2 ? p.groups[2] : p.groups[0];
  QkvKernelParams<TmaA, TmaB> kp{tma_a, {make_b(p.groups[0]), make_b(g1), make_b(g2)}, p, {0, 0, 0, 0}};
  int tiles = 0;
  for (int g = 0; g < kQkvMaxGroups; ++g) {
    kp.first_tile[g] = tiles;
    if (g < p.num_groups) tiles += p.groups[g].heads;
  }
  kp.first_tile[kQkvMaxGroups] = tiles;

  auto kernel = &qkv_rope_kernel<T, TmaA, TmaB>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::SmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(tiles, (p.m + T::BM - 1) / T::BM);
  kernel<<<grid, T::Threads, T::SmemBytes, p.stream>>>(kp);
  return cudaGetLastError();
}

}  // namespace
}  // namespace qkv

cudaError_t qkv_rope_sm90(const QkvParams& p, QkvConfig config) {
  if (p.num_groups < 1 || p.num_groups > kQkvMaxGroups || p.m < 1 || p.k < 1 || p.k % 8 || p.ldx % 8 ||
      p.batch * p.seq != p.m)
    return cudaErrorNotSupported;
  for (int g = 0; g < p.num_groups; ++g)
    if (p.groups[g].heads < 1 || p.groups[g].ldw % 8) return cudaErrorNotSupported;
  switch (config) {
    case QkvConfig::kM128: return qkv::launch<qkv::QkvTraits<128, 5>>(p);
    case QkvConfig::kM64: return qkv::launch<qkv::QkvTraits<64, 8>>(p);
  }
  return cudaErrorNotSupported;
}

}  // namespace vlattn
