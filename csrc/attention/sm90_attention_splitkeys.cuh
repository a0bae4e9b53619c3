// The split-key attention kernel for short launches on an idle machine (design: docs/design/attention_sm90.md
// § 26), part of the sm_90a attention (included by sm90_attention.cuh before its host launcher).
//
// Where the 128-row grid fills few SMs (007 B1 S128: 28 CTAs on 132 SMs) a unit's time is one consumer warp's
// dependent chain (Q K^T, the softmax, P V, the epilogue: ~1700 instructions at under one eligible warp per
// scheduler, § 18), not the tensor cores. 64-row units alone do not shorten it: each consumer warpgroup already
// owns 64 rows. Here a CTA owns (query head, 64-row q-block, batch); both consumer warpgroups hold the same
// 64 Q rows and each takes half of the keys (at most 256 in all):
//   kWgKeys = 64:  at most 128 keys, one 128-key K / V tile; warpgroup w takes its keys 64w .. 64w + 63;
//   kWgKeys = 128: at most 256 keys, two tiles; warpgroup w takes tile w.
// Each runs one online-softmax step over its keys (S, max, exp, sum, P V), then the two halves meet in shared
// memory: each writes its row max and row sum and the other warpgroup's 64 columns of its unnormalized O
// (fp32, in the accumulator's own register order: both warpgroups' threads hold the same (row, column) pairs),
// and after one barrier finalizes its own 64 columns,
//   m = max(m0, m1), O = O0 e^(m0 - m) + O1 e^(m1 - m), l = l0 e^(m0 - m) + l1 e^(m1 - m), O / l to bf16.
// A row's sum is taken in two parts and combined in fp32, as the tail split does for its cut units: within the
// numerics contract, but the last bf16 bit may differ from the unsplit kernels (so no bitwise A/B with them;
// tests/test_attention.py checks it against the references).
#pragma once

// (Included inside namespace vlattn::attn_sm90, after the kernel helpers it uses.)

constexpr int kSplitRows = 64;  // query rows per unit: one wgmma M, shared by both consumer warpgroups
using TileQ64 = Shape<Int<kSplitRows>, Int<C::kHeadDim>>;
using SmemLayoutQ64 = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, TileQ64{}));
constexpr uint32_t kQ64Bytes = kSplitRows * C::kHeadDim * sizeof(Element);
constexpr int kSplitMaxKeys = 2 * C::kBlockN;  // 256: two 128-key tiles, the resident kernel's reach
static_assert(kSplitMaxKeys == attn_rules::kSplitKeysMaxKeys, "the rule and the kernel agree on the reach");

inline auto make_tma_q64(const Element* q, int s, int h, int b, SlabStrides st) {
  return make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(q), q_layout(s, h, b, st)), SmemLayoutQ64{},
                       TileQ64{}, _1{});
}
using TmaQ64 = decltype(make_tma_q64(nullptr, 1, 1, 1, SlabStrides{1, 1, 1}));

struct SplitKeysParams : KernelArgs {
  TmaQ64 tma_q64;
  TmaK<128> tma_k;
  TmaV<128> tma_v;
};

// The exchange: per destination warpgroup, the 32 fp32 O values a thread hands over (element e of thread t at
// [e][t]: a warp's 32 lanes write 32 consecutive words) and per row its max and its sum.
constexpr int kSplitXValues = 32;  // this thread's O values in the other warpgroup's 64 columns (of 64)
struct SplitKeysSharedStorage {
  alignas(1024) Element q[cosize_v<SmemLayoutQ64>];  // Q, then the staged bf16 O tile
  alignas(1024) Element k[cosize_v<KeyTile<128>::SmemLayoutK>];
  alignas(1024) Element v[cosize_v<KeyTile<128>::SmemLayoutV>];
  alignas(16) float xo[2][kSplitXValues][128];  // [to warpgroup][value][thread]
  alignas(16) float xm[2][2][128];              // [from warpgroup][row r][thread]: row max (scaled scores)
  alignas(16) float xl[2][2][128];              // [from warpgroup][row r][thread]: row sum (quad-reduced)
  alignas(8) uint64_t q_full;
  alignas(8) uint64_t k_full[2];
  alignas(8) uint64_t v_full[2];
};
constexpr int kSplitKeysSmemBytes = int(sizeof(SplitKeysSharedStorage));
static_assert(kSplitKeysSmemBytes <= kMaxSmemBytes, "shared memory budget exceeded (split keys)");

constexpr uint32_t kSplitCombineBarrier = 4;        // both consumer warpgroups: the exchange
constexpr uint32_t kSplitStoreBarrierBase = 5;      // + consumer warpgroup: its staged half before the stores

// The staged O tile's byte addresses: q_tile_byte<kSplitRows> (SmemLayoutQ64: 64-column halves 64 x 128 bytes
// apart, 128-byte rows, the 128-byte swizzle).
static_assert(std::is_same_v<std::remove_cv_t<decltype(SmemLayoutQ64{}.layout_a())>, Swizzle<3, 4, 3>> &&
                  SmemLayoutQ64{}.layout_b()(0, 64) * 2 == q_tile_linear_byte<kSplitRows>(0, 64) &&
                  SmemLayoutQ64{}.layout_b()(9, 5) * 2 == q_tile_linear_byte<kSplitRows>(9, 5) &&
                  SmemLayoutQ64{}.layout_b()(63, 127) * 2 == q_tile_linear_byte<kSplitRows>(63, 127),
              "q_tile_byte<64> must address SmemLayoutQ64 (a 128-byte swizzle over 128-byte rows, 64-column halves)");

// The (64, kWgKeys) S tile's MMA: one warpgroup, N = the warpgroup's keys.
template <int kWgKeys>
struct SplitQkAtom;
template <>
struct SplitQkAtom<64> { using type = SM90::GMMA::MMA_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>; };
template <>
struct SplitQkAtom<128> { using type = QkAtom<128>::type; };

// kWgKeys: keys per consumer warpgroup (64: Sk <= 128; 128: Sk <= 256). kMasked: launched with a mask tensor.
template <int kWgKeys, bool kMasked>
__global__ void __launch_bounds__(C::kThreads, 1) split_keys_kernel(CUTE_GRID_CONSTANT SplitKeysParams const kp) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kWgKeys == 64 || kWgKeys == 128, "64 or 128 keys per consumer warpgroup");
  using KT = KeyTile<128>;
  constexpr int kKeyTiles = kWgKeys == 64 ? 1 : 2;  // 128-key K / V tiles loaded
  extern __shared__ __align__(1024) char smem_buf[];
  SplitKeysSharedStorage& ss = *reinterpret_cast<SplitKeysSharedStorage*>(smem_buf);

  const int warp_group = threadIdx.x / 128;
  // Unit = blockIdx.x: heads fastest (the G heads of a KV head side by side share its K / V through L2), then
  // the 64-row q-blocks last first, then the batches.
  const int m_blocks = ceil_div(kp.seqlen_q, int(kSplitRows));
  const int u = int(blockIdx.x);
  const int head = u % kp.heads_q;
  const int rest = u / kp.heads_q;
  const int m_block = m_blocks - 1 - rest % m_blocks;
  const int batch = rest / m_blocks;
  const int head_kv = head / kp.group;

  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&ss.q_full, 1);
    CUTE_UNROLL
    for (int t = 0; t < 2; ++t) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.k_full[t], 1);
      cutlass::arch::ClusterTransactionBarrier::init(&ss.v_full[t], 1);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  pdl_enter();  // launch/pdl.h: no global memory access before this

  if (warp_group == 0) {
    // ---------------------------------------------------------------- producer (one thread)
    cutlass::arch::warpgroup_reg_dealloc<C::kProducerRegs>();
    if (threadIdx.x == 0) {
      Tensor sQ = make_tensor(make_smem_ptr(ss.q), SmemLayoutQ64{});
      Tensor mQ = kp.tma_q64.get_tma_tensor(make_shape(kp.seqlen_q, int(C::kHeadDim), kp.heads_q, kp.batch));
      Tensor gQ = local_tile(mQ(_, _, head, batch), TileQ64{}, make_coord(m_block, 0));
      auto tQ = tma_partition(kp.tma_q64, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.q_full, kQ64Bytes);
      copy(kp.tma_q64.with(ss.q_full), get<0>(tQ), get<1>(tQ));
      // Every tile the kernel is built for, in bounds or not (TMA fills keys >= Sk with zeros and still counts
      // the box's bytes): each is waited on by a consumer warpgroup before the CTA can exit.
      load_kv_tiles<KT>(kp, ss.k, ss.v, ss.k_full, ss.v_full, head_kv, batch, kKeyTiles);
    }
  } else {
    // ---------------------------------------------------------------- consumers
    cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
    const int t = threadIdx.x % 128;         // thread in its warpgroup
    const int consumer_wg = warp_group - 1;  // 0 or 1: keys [kWgKeys * wg, kWgKeys * wg + kWgKeys)
    const int key_tile = kWgKeys == 128 ? consumer_wg : 0;
    const int key_half = kWgKeys == 64 ? consumer_wg : 0;  // 64-key half of tile 0
    const int key0 = consumer_wg * kWgKeys;

    using MmaQK = decltype(make_tiled_mma(typename SplitQkAtom<kWgKeys>::type{}));
    using MmaPV = decltype(make_tiled_mma(SM90::GMMA::MMA_64x128x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}));
    MmaQK mma_qk;
    MmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(t);
    auto thr_pv = mma_pv.get_thread_slice(t);

    Tensor sQ = make_tensor(make_smem_ptr(ss.q), SmemLayoutQ64{});
    Tensor sK = make_tensor(make_smem_ptr(ss.k), typename KT::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.v), typename KT::SmemLayoutV{});
    // This warpgroup's keys: rows [64 key_half, ..) of K tile key_tile, columns of the V tile likewise.
    Tensor sKw = local_tile(sK(_, _, key_tile), Shape<Int<kWgKeys>, Int<C::kHeadDim>>{}, make_coord(key_half, 0));
    Tensor sVw = local_tile(sV(_, _, key_tile), Shape<Int<C::kHeadDim>, Int<kWgKeys>>{}, make_coord(0, key_half));
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);
    Tensor tSrK = thr_qk.partition_fragment_B(sKw);
    Tensor tOrV = thr_pv.partition_fragment_B(sVw);
    Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kSplitRows>, Int<kWgKeys>>{});
    Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kSplitRows>, Int<C::kHeadDim>>{});
    Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_pv, Shape<Int<kSplitRows>, Int<kWgKeys>>{}));
    static_assert(decltype(size(tSrS))::value == kWgKeys / 2 && decltype(size(tOrP))::value == kWgKeys / 2 &&
                      decltype(size(tOrO))::value == 64,
                  "unexpected per-thread fragment sizes");

    // This thread's two rows (r = 0, 1: 8 apart) and first key column, from the accumulator's coordinates.
    Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kSplitRows>, Int<kWgKeys>>{}));
    const int first_row = m_block * kSplitRows;
    const int col0 = get<1>(tScS(acc_idx(0, 0, 0)));
    int row[2];
    const uint16_t* mask_row[2] = {nullptr, nullptr};
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f}, rescale[2];
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      row[r] = first_row + get<0>(tScS(acc_idx(0, r, 0)));
      if (kMasked && row[r] < kp.seqlen_q)
        mask_row[r] = kp.mask + int64_t(batch) * kp.mask_batch_stride + int64_t(row[r]) * kp.mask_row_stride;
    }

    // This thread's mask values, loaded before Q and K land: their latency overlaps the TMA loads instead of
    // following Q K^T (each tile's values were per-element loads inside the softmax until the fifty-eighth session).
    MaskPairRegs<kWgKeys / 8> mask_pairs;
    if constexpr (kMasked) mask_pairs.load(mask_row, key0 + col0, kp.seqlen_k);

    cutlass::arch::ClusterTransactionBarrier::wait(&ss.q_full, 0);
    cutlass::arch::ClusterTransactionBarrier::wait(&ss.k_full[key_tile], 0);
    issue_qk_gemm(mma_qk, tSrQ, tSrK, tSrS);
    clear(tOrO);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    // The per-key checks where a key of this warpgroup's range may be past Sk or past the row (causal); the lean
    // unmasked form otherwise (scale > 0: the max commutes with the multiply).
    const bool checks = kMasked || kp.causal || !kp.fold_scale || key0 + kWgKeys > kp.seqlen_k;
    if constexpr (kMasked)
      softmax_tile<true, kMaskRegs>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, true, &mask_pairs);
    else if (checks)
      softmax_tile<true>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);
    else
      softmax_tile<false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);
    scores_to_p(tSrS, tOrP);
    cutlass::arch::ClusterTransactionBarrier::wait(&ss.v_full[key_tile], 0);
    issue_pv_gemm(mma_pv, tOrP, tOrV, tOrO);
    // The row sums while P V runs.
    float total[2];
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) total[r] = quad_sum(l[r]);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);

    // ---- the exchange: the other warpgroup's 64 columns (column groups j of the other half) and this
    // warpgroup's row max and sum; then each finalizes its own 64 columns.
    constexpr int kHalfGroups = kOColGroups / 2;  // 8 column groups of 8 = 64 columns
    const int other = 1 - consumer_wg;
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      CUTE_UNROLL
      for (int jj = 0; jj < kHalfGroups; ++jj) {
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) {
          // A select, not a run-time register index (which would put O in local memory).
          const float lo = tOrO(acc_idx(c, r, jj)), hi = tOrO(acc_idx(c, r, kHalfGroups + jj));
          ss.xo[other][c + 2 * r + 4 * jj][t] = other == 0 ? lo : hi;
        }
      }
      ss.xm[consumer_wg][r][t] = m[r];
      ss.xl[consumer_wg][r][t] = total[r];
    }
    // Both warpgroups' exchange writes, and both warpgroups' last reads of Q (their Q K^T completed above), come
    // before anything after this barrier: the staged O below overwrites Q.
    cutlass::arch::NamedBarrier::sync(256, kSplitCombineBarrier);
    float inv_l[2], scale_mine[2], scale_other[2];
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float m_other = ss.xm[other][r][t];
      const float l_other = ss.xl[other][r][t];
      const float mx = fmaxf(m[r], m_other);
      // A row with no live key in either half (both maxima -inf): both scales 0, O = 0 (as inverse_row_sums).
      const float m_use = mx == kNegInf ? 0.f : mx;
      scale_mine[r] = fast_exp2((m[r] - m_use) * kLog2e);
      scale_other[r] = fast_exp2((m_other - m_use) * kLog2e);
      const float sum = total[r] * scale_mine[r] + l_other * scale_other[r];
      inv_l[r] = sum > 0.f ? 1.f / sum : 0.f;
    }
    // Stage this warpgroup's 64 columns (its half of the tile) as bf16 in the Q tile, then store them.
    Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kSplitRows>, Int<C::kHeadDim>>{}));
    const uint32_t s_tile = cute::cast_smem_ptr_to_uint(ss.q);
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      CUTE_UNROLL
      for (int jj = 0; jj < kHalfGroups; ++jj) {
        const int lo = acc_idx(0, r, jj), hi = acc_idx(0, r, kHalfGroups + jj);
        const float mine0 = consumer_wg == 0 ? tOrO(lo) : tOrO(hi);
        const float mine1 = consumer_wg == 0 ? tOrO(lo + 1) : tOrO(hi + 1);
        const float o0 = mine0 * scale_mine[r] + ss.xo[consumer_wg][2 * r + 4 * jj][t] * scale_other[r];
        const float o1 = mine1 * scale_mine[r] + ss.xo[consumer_wg][1 + 2 * r + 4 * jj][t] * scale_other[r];
        const __nv_bfloat162 v = __floats2bfloat162_rn(o0 * inv_l[r], o1 * inv_l[r]);
        // Element (row, column) of the staged tile: this thread's pair in the warpgroup's own 64 columns.
        const uint32_t addr = s_tile + q_tile_byte<kSplitRows>(get<0>(tOcO(lo)), get<1>(tOcO(lo)) + 64 * consumer_wg);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(reinterpret_cast<const uint32_t&>(v)));
      }
    }
    cutlass::arch::NamedBarrier::sync(128, kSplitStoreBarrierBase + consumer_wg);
    // This warpgroup's half: 64 rows x 128 bytes, 16 bytes per lane, 8 lanes per row, 16 rows per pass.
    constexpr int kChunk = 16 / sizeof(Element);  // 8 elements
    const int chunk = t % 8;
    const int64_t o_row_stride = int64_t(kp.heads_q) * C::kHeadDim;
    CUTE_UNROLL
    for (int pass = 0; pass < kSplitRows / 16; ++pass) {
      const int r_local = pass * 16 + t / 8;
      const int q_row = first_row + r_local;
      if (q_row < kp.seqlen_q) {
        const int col = consumer_wg * 64 + chunk * kChunk;
        uint4 val;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(val.x), "=r"(val.y), "=r"(val.z), "=r"(val.w)
                     : "r"(s_tile + q_tile_byte<kSplitRows>(r_local, col)));
        Element* dst = kp.o + (int64_t(batch) * kp.seqlen_q + q_row) * o_row_stride + int64_t(head) * C::kHeadDim + col;
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(val.x), "r"(val.y), "r"(val.z),
                     "r"(val.w));
      }
    }
  }
#endif  // sm_90a
}

// One build's launch: its shared-memory opt-in (once per device), then the kernel under PDL.
template <int kWgKeys, bool kMasked>
inline AttentionStatus run_split_keys(const SplitKeysParams& kp, const AttentionParams& p, long long ctas) {
  auto* kernel = split_keys_kernel<kWgKeys, kMasked>;
  if (!max_dynamic_smem_once<split_keys_kernel<kWgKeys, kMasked>>(p.device, kSplitKeysSmemBytes))
    return AttentionStatus::kInitFailed;
  return launch_pdl(kernel, dim3(unsigned(ctas)), dim3(C::kThreads), kSplitKeysSmemBytes, p.stream, 0, kp) ==
                 cudaSuccess
             ? AttentionStatus::kSuccess
             : AttentionStatus::kLaunchFailed;
}

// One CTA per (query head, 64-row q-block, batch); attn_rules::split_keys_plan decided the launch. The grid and
// the key count are checked before any tensor map is encoded. Builds: 64 keys per warpgroup when one 128-key tile
// holds them all, 128 otherwise; masked or not.
inline AttentionStatus launch_split_keys(const KernelArgs& args, const AttentionParams& p, long long ctas) {
  if (ctas < 1 || ctas > INT_MAX || p.seqlen_k > kSplitMaxKeys) return AttentionStatus::kInvalidArgument;
  const SplitKeysParams kp{
      args,
      make_tma_q64(static_cast<const Element*>(p.q), p.seqlen_q, p.heads_q, p.batch,
                   slab_strides(p.q_strides, p.heads_q, p.seqlen_q)),
      make_tma_k<128>(static_cast<const Element*>(p.k), p.seqlen_k, p.heads_kv, p.batch,
                      slab_strides(p.k_strides, p.heads_kv, p.seqlen_k)),
      make_tma_v<128>(static_cast<const Element*>(p.v), p.seqlen_k, p.heads_kv, p.batch,
                      slab_strides(p.v_strides, p.heads_kv, p.seqlen_k))};
  const bool masked = p.mask != nullptr;
  const bool one_tile = p.seqlen_k <= C::kBlockN;
  return one_tile ? (masked ? run_split_keys<64, true>(kp, p, ctas) : run_split_keys<64, false>(kp, p, ctas))
                  : (masked ? run_split_keys<128, true>(kp, p, ctas) : run_split_keys<128, false>(kp, p, ctas));
}
