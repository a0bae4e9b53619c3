// Host launcher of the fused QKV projection (csrc/qkv/sm90_qkv_rope.cuh): builds one TMA tensor
// map for X and one per weight tensor (the callers' own tensors, every call), then launches one
// CTA per (head tile, row tile). No torch headers here (build notes #7).
#include <algorithm>
#include <limits>
#include <type_traits>

#include "launch/host_trace.h"
#include "launch/pdl.h"
#include "launch/smem_attr.h"
#include "qkv/sm90_qkv_rope.cuh"

namespace vlattn {
namespace qkv {
namespace {

// The dynamic shared-memory limit, set once per device and kernel (launch/smem_attr.h), for the
// current device. Failing to set it is cudaFuncSetAttribute's cudaErrorInvalidValue (too many bytes).
template <auto kernel>
cudaError_t set_smem_once(int bytes) {
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  return max_dynamic_smem_once<kernel>(device, bytes) ? cudaSuccess : cudaErrorInvalidValue;
}

// Kernel parameters shared by every config: X's tensor map (one TileM x BK box per load), one weight
// map per group from make_b (unused slots repeat group 0's map, copied rather than encoded again: a
// tensor-map encode is host time on every call; never read, always a valid descriptor) and the
// prefix sums of the groups' heads. The caller sets num_tiles.
template <class T, class MakeB>
auto make_kernel_params(const QkvParams& p, MakeB&& make_b) {
  using Element = typename T::Element;
  auto tma_a = make_tma_atom(
      SM90_TMA_LOAD{},
      make_tensor(make_gmem_ptr(static_cast<Element const*>(p.x)), make_shape(p.m, p.k), make_stride(p.ldx, Int<1>{})),
      typename T::SmemLayoutA{}(_, _, 0), Shape<Int<T::TileM>, Int<T::BK>>{});
  using TmaB = decltype(make_b(p.groups[0]));
  const TmaB b0 = make_b(p.groups[0]);
  QkvKernelParams<decltype(tma_a), TmaB> kp{tma_a,
                                            {b0, p.num_groups > 1 ? make_b(p.groups[1]) : b0,
                                             p.num_groups > 2 ? make_b(p.groups[2]) : b0},
                                            p, {0, 0, 0, 0}, 0, 0};
  int heads = 0;
  for (int g = 0; g < kQkvMaxGroups; ++g) {
    kp.first_tile[g] = heads;
    if (g < p.num_groups) heads += p.groups[g].heads;
  }
  kp.first_tile[kQkvMaxGroups] = heads;
  kp.n_tiles = heads;
  return kp;
}

// The split-K kernels' development trace (qkv/qkv_trace.h), set by qkv_splitk_trace: the buffer goes into the
// kernel parameters of split-K launches made on `device` while it is set (a CUDA graph keeps what it captured).
struct SplitKTraceState {
  unsigned long long* buf = nullptr;
  int ctas = 0;
  int device = -1;
};
SplitKTraceState g_splitk_trace;

// splits == 0: the persistent ping-pong kernel; splits >= 1: the cluster split-K kernel.
template <class T>
cudaError_t launch(const QkvParams& p, int splits = 0) {
  using Element = typename T::Element;
  auto kp = make_kernel_params<T>(p, [&](const QkvGroup& g) {
    return make_tma_atom(SM90_TMA_LOAD{},
                         make_tensor(make_gmem_ptr(static_cast<Element const*>(g.weight)),
                                     make_shape(g.heads * kQkvHeadDim, p.k), make_stride(g.ldw, Int<1>{})),
                         typename T::SmemLayoutB{}(_, _, 0), Shape<Int<T::BN>, Int<T::BK>>{});
  });
  VLATTN_HOST_MARK("qkv.fused.params");
  using TmaA = decltype(kp.tma_a);
  using TmaB = std::remove_reference_t<decltype(kp.tma_b[0])>;
  const int heads = kp.n_tiles;
  const long long tiles = static_cast<long long>(heads) * ((p.m + T::TileM - 1) / T::TileM);
  if (tiles > (1LL << 30)) return cudaErrorNotSupported;
  kp.num_tiles = static_cast<int>(tiles);

  if constexpr (T::Coop) {
    for (int g = 0; g < p.num_groups; ++g)
      if (p.groups[g].heads % 2) return cudaErrorNotSupported;  // head pairs must not straddle groups
    constexpr auto kernel = &qkv_rope_coop_kernel<T, TmaA, TmaB>;
    cudaError_t err = set_smem_once<kernel>(T::SmemBytes);
    if (err != cudaSuccess) return err;
    const long long pair_tiles = tiles / 2;
    kp.num_tiles = static_cast<int>(pair_tiles);
    const int sms = p.sm_count > 0 ? p.sm_count : 132;
    if (T::SingleTile && pair_tiles > sms) return cudaErrorNotSupported;  // one CTA per tile, or nothing
    const dim3 grid(static_cast<unsigned>(pair_tiles < sms ? pair_tiles : sms));
    return launch_pdl(kernel, grid, dim3(T::Threads), T::SmemBytes, p.stream, 0, kp);
  } else if constexpr (T::SplitK) {
    if (splits < 1 || splits > T::MaxSplits || splits > (p.k + T::BK - 1) / T::BK) return cudaErrorNotSupported;
    const dim3 grid(static_cast<unsigned>(tiles * splits));
    if (g_splitk_trace.buf != nullptr) {  // development only: one cudaGetDevice per launch while a trace is set
      int device = -1;
      if (cudaGetDevice(&device) == cudaSuccess && device == g_splitk_trace.device) {
        // The traced twin: the same kernel with the stamps compiled in (sm90_qkv_rope.cuh).
        constexpr auto traced = &qkv_rope_splitk_kernel<T, TmaA, TmaB, true>;
        cudaError_t err = set_smem_once<traced>(T::SmemBytes);
        if (err != cudaSuccess) return err;
        kp.trace = g_splitk_trace.buf;
        kp.trace_ctas = g_splitk_trace.ctas;
        return launch_pdl(traced, grid, dim3(T::Threads), T::SmemBytes, p.stream, static_cast<unsigned>(splits), kp);
      }
    }
    constexpr auto kernel = &qkv_rope_splitk_kernel<T, TmaA, TmaB>;
    cudaError_t err = set_smem_once<kernel>(T::SmemBytes);
    if (err != cudaSuccess) return err;
    return launch_pdl(kernel, grid, dim3(T::Threads), T::SmemBytes, p.stream, static_cast<unsigned>(splits), kp);
  } else {
    constexpr auto kernel = &qkv_rope_kernel<T, TmaA, TmaB>;
    cudaError_t err = set_smem_once<kernel>(T::SmemBytes);
    if (err != cudaSuccess) return err;
    // Persistent: one CTA per SM at most (the shared memory allows no second one).
    const int sms = p.sm_count > 0 ? p.sm_count : 132;
    const dim3 grid(static_cast<unsigned>(tiles < sms ? tiles : sms));
    return launch_pdl(kernel, grid, dim3(T::Threads), T::SmemBytes, p.stream, 0, kp);
  }
}

// Co-resident clusters of the multicast kernel on this device (per device, queried once): the
// persistent grid must not exceed it, or the clusters beyond would run after the others as a
// second, mostly empty wave. 0 when the query fails (the caller then uses the SM count).
template <auto kernel>
int max_active_clusters_once(cudaLaunchConfig_t cfg) {
  constexpr int kMaxDevices = 64;
  static int cached[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (device < kMaxDevices && cached[device] > 0) return cached[device];
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // the query's error must not surface as the launch's
    return 0;
  }
  if (device < kMaxDevices) cached[device] = clusters;
  return clusters;
}

// Config m128mc: the ping-pong kernel in clusters of T::ClusterM CTAs along M, B multicast.
template <class T>
cudaError_t launch_mc(const QkvParams& p) {
  using Element = typename T::Element;
  // Each CTA's box is 1/ClusterM of the B tile (the atom splits the box along N).
  auto kp = make_kernel_params<T>(p, [&](const QkvGroup& g) {
    return make_tma_atom(SM90_TMA_LOAD_MULTICAST{},
                         make_tensor(make_gmem_ptr(static_cast<Element const*>(g.weight)),
                                     make_shape(g.heads * kQkvHeadDim, p.k), make_stride(g.ldw, Int<1>{})),
                         typename T::SmemLayoutB{}(_, _, 0), Shape<Int<T::BN>, Int<T::BK>>{}, Int<T::ClusterM>{});
  });
  using TmaA = decltype(kp.tma_a);
  using TmaB = std::remove_reference_t<decltype(kp.tma_b[0])>;
  const int heads = kp.n_tiles;
  // Pair tiles: (row pair, head); an odd row-tile count pads the last pair (see the kernel).
  const long long row_tiles = (p.m + T::TileM - 1) / T::TileM;
  const long long pair_tiles = static_cast<long long>(heads) * ((row_tiles + T::ClusterM - 1) / T::ClusterM);
  if (pair_tiles > (1LL << 30)) return cudaErrorNotSupported;
  kp.num_tiles = static_cast<int>(pair_tiles);

  constexpr auto kernel = &qkv_rope_mc_kernel<T, TmaA, TmaB>;
  cudaError_t err = set_smem_once<kernel>(T::SmemBytes);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(T::ClusterM);
  cfg.blockDim = dim3(T::Threads);
  cfg.dynamicSmemBytes = T::SmemBytes;
  cfg.stream = p.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = T::ClusterM;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // Persistent: at most one cluster per ClusterM SMs, and no more than fit at once.
  const int sms = p.sm_count > 0 ? p.sm_count : 132;
  long long clusters = sms / T::ClusterM;
  const int resident = max_active_clusters_once<kernel>(cfg);
  if (resident > 0 && resident < clusters) clusters = resident;
  if (pair_tiles < clusters) clusters = pair_tiles;
  if (clusters < 1) clusters = 1;
  return launch_pdl(kernel, dim3(static_cast<unsigned>(clusters * T::ClusterM)), dim3(T::Threads), T::SmemBytes,
                    p.stream, T::ClusterM, kp);
}

}  // namespace
}  // namespace qkv

template <int kModes, int kLaunches = 1>
static cudaError_t launch_rope_rows(dim3 grid, const qkv::RopeRowsLaunches& rl, cudaStream_t stream) {
  constexpr auto kernel = &qkv::qkv_rope_rows_kernel<kModes, kLaunches>;
  const cudaError_t err = qkv::set_smem_once<kernel>(qkv::kRopeRowsSmemBytes);
  if (err != cudaSuccess) return err;
  return launch_pdl(kernel, grid, dim3(qkv::kRopeRowsThreads), qkv::kRopeRowsSmemBytes, stream, 0, rl);
}

// One launch's pass: its parameters and its own (x, y) grid; false for an illegal problem.
static bool make_rope_rows(const QkvParams& p, const void* const* y, const int64_t* ldy, qkv::RopeRowsParams& rp,
                           unsigned& blocks_x, unsigned& blocks_y, int pass_width) {
  if (p.num_groups < 1 || p.num_groups > kQkvMaxGroups || p.m < 1 || p.batch * p.seq != p.m) return false;
  rp.p = p;
  int heads[kQkvMaxGroups] = {};
  for (int g = 0; g < kQkvMaxGroups; ++g) {
    rp.y[g] = g < p.num_groups ? static_cast<const __nv_bfloat16*>(y[g]) : nullptr;
    rp.ldy[g] = g < p.num_groups ? ldy[g] : 0;
    rp.heads_per_block[g] = qkv::kRopeRowsHeads;  // groups past num_groups: never read
    if (g < p.num_groups) {
      if (p.groups[g].heads < 1 || ldy[g] % 8 || ldy[g] < int64_t(p.groups[g].heads) * kQkvHeadDim ||
          ldy[g] > std::numeric_limits<int>::max() || y[g] == nullptr)
        return false;
      heads[g] = p.groups[g].heads;
    }
  }
  rope_pass_heads_per_block(p.m, heads, p.num_groups, p.sm_count, rp.heads_per_block, pass_width);  // qkv_config.h
  rp.chunk_first[0] = 0;
  for (int g = 0; g < kQkvMaxGroups; ++g)
    rp.chunk_first[g + 1] =
        rp.chunk_first[g] +
        (g < p.num_groups ? (p.groups[g].heads + rp.heads_per_block[g] - 1) / rp.heads_per_block[g] : 0);
  blocks_x = static_cast<unsigned>((p.m + qkv::kRopeRowsPerBlock - 1) / qkv::kRopeRowsPerBlock);
  blocks_y = static_cast<unsigned>(rp.chunk_first[p.num_groups]);
  return true;
}

static size_t rope_table_bytes_of(const QkvParams& p) {
  return rope_table_mode(p) == RopeMode::kNone || p.m < 1 ? 0 : size_t(p.m) * kQkvHeadDim * 2 * sizeof(__nv_bfloat16);
}

size_t qkv_rope_table_bytes(const QkvParams* const* ps, int n) {
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) bytes += rope_table_bytes_of(*ps[i]);
  return bytes;
}

// The cos/sin tables of n launches (qkv_rope_table_bytes) in one rope_table_kernel, in the caller's
// workspace (16-byte aligned; m x 512 bytes per launch keeps each table aligned); tabs[i] gets launch i's
// table or nullptr (no position mode).
static cudaError_t launch_rope_tables(const QkvParams* const* ps, int n, void* table, size_t table_bytes,
                                     __nv_bfloat16** tabs) {
  if (reinterpret_cast<uintptr_t>(table) % 16 != 0 || table_bytes < qkv_rope_table_bytes(ps, n))
    return cudaErrorInvalidValue;
  qkv::RopeTableLaunches tl{};
  auto* at = static_cast<__nv_bfloat16*>(table);
  unsigned blocks = 0;
  for (int i = 0; i < n; ++i) {
    tabs[i] = nullptr;
    const size_t bytes = rope_table_bytes_of(*ps[i]);
    if (bytes == 0) continue;
    tl.launch[i].rope = ps[i]->rope;
    tl.launch[i].mode = rope_table_mode(*ps[i]);
    tl.launch[i].m = ps[i]->m;
    tl.launch[i].seq = ps[i]->seq;
    tl.launch[i].tab = at;
    tabs[i] = at;
    at += bytes / sizeof(__nv_bfloat16);
    constexpr int kRows = qkv::kRopeTableThreads / kQkvHeadDim;
    blocks = std::max(blocks, static_cast<unsigned>((ps[i]->m + kRows - 1) / kRows));
  }
  if (blocks == 0) return cudaSuccess;
  // At most 8 blocks per SM (the kernel strides over the rows): 034 B64 Lq256's 16384 rows took 16.2 us
  // in 8192 blocks, each computing the 128 frequencies (powf) for its two rows.
  const unsigned cap = 8u * static_cast<unsigned>(ps[0]->sm_count > 0 ? ps[0]->sm_count : 132);
  blocks = std::min(blocks, cap);
  return launch_pdl(&qkv::rope_table_kernel, dim3(blocks, static_cast<unsigned>(n)), dim3(qkv::kRopeTableThreads),
                    0, ps[0]->stream, 0, tl);
}

cudaError_t qkv_rope_table_sm90(const QkvParams& p, void* table, size_t table_bytes) {
  if (p.m < 1 || p.seq < 1 || rope_table_mode(p) == RopeMode::kNone) return cudaErrorNotSupported;
  const QkvParams* ps[1] = {&p};
  __nv_bfloat16* tabs[1] = {};
  return launch_rope_tables(ps, 1, table, table_bytes, tabs);
}

cudaError_t qkv_rope_rows_sm90(const QkvParams* const* ps, const void* const* const* y, const int64_t* const* ldy,
                               int n, void* table, size_t table_bytes, int pass_width) {
  if (n < 1 || n > qkv::kRopeRowsMaxLaunches) return cudaErrorNotSupported;
  qkv::RopeRowsLaunches rl{};  // launches past n stay zero: no block reads them
  dim3 grid(1, 1, static_cast<unsigned>(n));
  int modes = 0;
  for (int i = 0; i < n; ++i) {
    if (!make_rope_rows(*ps[i], y[i], ldy[i], rl.launch[i], rl.blocks_x[i], rl.blocks_y[i], pass_width))
      return cudaErrorNotSupported;
    grid.x = std::max(grid.x, rl.blocks_x[i]);
    grid.y = std::max(grid.y, rl.blocks_y[i]);
    for (int g = 0; g < ps[i]->num_groups; ++g) modes |= 1 << int(ps[i]->groups[g].rope);
  }
  // The cos/sin tables first (qkv_rope_table_pays), which the pass then reads.
  if (table != nullptr) {
    __nv_bfloat16* tabs[qkv::kRopeRowsMaxLaunches] = {};
    const cudaError_t err = launch_rope_tables(ps, n, table, table_bytes, tabs);
    if (err != cudaSuccess) return err;
    for (int i = 0; i < n; ++i) rl.launch[i].tab = tabs[i];
  }
  // One instantiation per mode set the layers use (007: table + none; 034's launches apart: 1-D, and
  // t/h/w + none), one with every mode for anything else, and two launches (034's in one pass) always
  // with every mode.
  constexpr int kNone = 1 << int(RopeMode::kNone), kTable = 1 << int(RopeMode::kTable);
  constexpr int k1D = 1 << int(RopeMode::kPos1D), k3D = 1 << int(RopeMode::kPos3D);
  const cudaStream_t stream = ps[0]->stream;
  if (n == 2) return launch_rope_rows<kTable | k1D | k3D | kNone, 2>(grid, rl, stream);
  if ((modes & ~(kTable | kNone)) == 0) return launch_rope_rows<kTable | kNone>(grid, rl, stream);
  if ((modes & ~(k1D | kNone)) == 0) return launch_rope_rows<k1D | kNone>(grid, rl, stream);
  if ((modes & ~(k3D | kNone)) == 0) return launch_rope_rows<k3D | kNone>(grid, rl, stream);
  return launch_rope_rows<kTable | k1D | k3D | kNone>(grid, rl, stream);
}

cudaError_t qkv_rope_sm90(const QkvParams& p, QkvConfig config) {
  if (p.num_groups < 1 || p.num_groups > kQkvMaxGroups || p.m < 1 || p.k < 1 || p.k % 8 || p.ldx % 8 ||
      p.batch * p.seq != p.m)
    return cudaErrorNotSupported;
  for (int g = 0; g < p.num_groups; ++g)
    if (p.groups[g].heads < 1 || p.groups[g].ldw % 8) return cudaErrorNotSupported;
  switch (config) {
    case QkvConfig::kM128: return qkv::launch<qkv::QkvTraits<128, 4>>(p);
    case QkvConfig::kM64: return qkv::launch<qkv::QkvTraits<64, 6>>(p);
    case QkvConfig::kC256: {
      // One wave of head-pair tiles: one CTA per tile, the 4-stage ring with the staging tile over it.
      long long pairs = 0;
      for (int g = 0; g < p.num_groups; ++g) pairs += p.groups[g].heads / 2;
      pairs *= (p.m + 127) / 128;
      const int sms = p.sm_count > 0 ? p.sm_count : 132;
      return pairs <= sms ? qkv::launch<qkv::CoopTraits<4, true>>(p) : qkv::launch<qkv::CoopTraits<3>>(p);
    }
    case QkvConfig::kM128Mc: return qkv::launch_mc<qkv::McTraits<4>>(p);
    case QkvConfig::kSplitK2: return qkv::launch<qkv::SplitKTraits<128, 4>>(p, 2);
    case QkvConfig::kSplitK3: return qkv::launch<qkv::SplitKTraits<128, 4>>(p, 3);
    case QkvConfig::kSplitK4: return qkv::launch<qkv::SplitKTraits<128, 4>>(p, 4);
    case QkvConfig::kSplitK2D: return qkv::launch<qkv::SplitKTraits<128, 6>>(p, 2);
    case QkvConfig::kSplitK3D: return qkv::launch<qkv::SplitKTraits<128, 6>>(p, 3);
    case QkvConfig::kSplitK4D: return qkv::launch<qkv::SplitKTraits<128, 6>>(p, 4);
    case QkvConfig::kM256K1: return qkv::launch<qkv::SplitKTraits<256, 3>>(p, 1);
    case QkvConfig::kM256K2: return qkv::launch<qkv::SplitKTraits<256, 3>>(p, 2);
    case QkvConfig::kM256K3: return qkv::launch<qkv::SplitKTraits<256, 3>>(p, 3);
    case QkvConfig::kM256K4: return qkv::launch<qkv::SplitKTraits<256, 3>>(p, 4);
    case QkvConfig::kGemmRope:  // two passes: csrc/ops/qkv.cpp
    case QkvConfig::kGrouped128:
    case QkvConfig::kGrouped64: return cudaErrorNotSupported;  // the grouped GEMM: qkv_grouped.h
  }
  return cudaErrorNotSupported;
}

cudaError_t qkv_splitk_trace(unsigned long long* buf, int ctas) {
  if (ctas < 0 || (buf == nullptr) != (ctas == 0)) return cudaErrorInvalidValue;
  int device = -1;
  if (buf != nullptr) {
    const cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
  }
  qkv::g_splitk_trace = {buf, ctas, device};
  return cudaSuccess;
}

}  // namespace vlattn
