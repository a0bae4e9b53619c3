// The K/V-resident attention kernel for short key sequences (at most two 128-key tiles), part of the
// sm_90a attention (included by sm90_attention.cuh before its host launcher; design:
// docs/design/attention_sm90.md §20).
//
// The per-unit kernel gives each (query head, 128-row q-block, batch) its own CTA. At 007's short
// sequences (S 128 and 256: one or two key tiles) that unit is ~2k tensor cycles of work behind a CTA
// launch, a prologue, the Q, K and V load latencies and an epilogue, one CTA per SM (its shared memory):
// 007 B32 S128's 896 units took ~60 us, ~9 us per unit, for ~1 us of MMA each (bench/NOTES.md).
//
// Here a CTA owns (batch, KV head, a chunk of that KV head's query heads): it loads the KV head's key
// tiles once (all of them: K and V of at most 256 keys, 128 KB, resident for the CTA's life), then runs
// the chunk's units (query head x 128-row q-block) one after another, their Q tiles through a ring of
// three stages (the unit whose epilogue stages O in its stage, the current one, the next one loading). The
// prologue, the K/V loads and the CTA launch are paid once per chunk instead of once per unit, and the
// consumers run the units as one stream of key tiles: a unit's last P V goes out with the next unit's first
// Q K^T, and its epilogue runs once that P V has landed (H200, attention alone: 007 B32 S128 60.7 -> 50.4 us
// with the units one after another, 47.8 this way; bench/NOTES.md thirty-fifth session).
//
// A unit's arithmetic is exactly the per-unit kernel's (same tiles in the same order, the same softmax
// variants, the same two consumer warpgroups of 64 rows with the same ping-pong turns): results are
// bitwise identical to it (tests/test_attention.py checks that), whatever the chunking.
#pragma once

// (Included inside namespace vlattn::attn_sm90, after the kernel helpers it uses.)

// Three Q stages: the unit whose epilogue stages its O in its stage, the current one, the next one loading.
constexpr int kResidentQStages = 3;
constexpr int kResidentKeyTiles = attn_rules::kResidentMaxKeyTiles;  // 2
static_assert(kResidentKeyTiles == C::kStages,
              "the resident K / V tiles reuse the 128-key ring layouts: one stage per key tile");

// The Q ring has the 128-key K ring's layout: (128 rows, 128 d, stages), K-major, 128B swizzle.
using SmemLayoutQRing = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                               make_shape(Int<C::kBlockM>{}, Int<C::kHeadDim>{},
                                                          Int<kResidentQStages>{})));

struct ResidentSharedStorage {
  alignas(1024) Element q[cosize_v<SmemLayoutQRing>];
  alignas(1024) Element k[cosize_v<KeyTile<128>::SmemLayoutK>];
  alignas(1024) Element v[cosize_v<KeyTile<128>::SmemLayoutV>];
  alignas(8) uint64_t q_full[kResidentQStages];   // transaction barrier of each Q stage's load
  alignas(8) uint64_t q_empty[kResidentQStages];  // both consumer warpgroups are done with the stage
  // Key tile t's K, and its V, have landed (once per CTA; two barriers, so that the first Q K^T does not wait for V).
  alignas(8) uint64_t k_full[kResidentKeyTiles];
  alignas(8) uint64_t v_full[kResidentKeyTiles];
};
constexpr int kResidentSmemBytes = int(sizeof(ResidentSharedStorage));
static_assert(kResidentSmemBytes <= kMaxSmemBytes, "shared memory budget exceeded (resident K / V)");
static_assert(cosize_v<SmemLayoutQRing> == kResidentQStages * cosize_v<SmemLayoutQ>,
              "a Q ring stage is one SmemLayoutQ tile");

// Units of one CTA: the chunk's query heads x the q-blocks, q-blocks fastest, last first (causal: the
// longest first; every unit of a CTA reads the same batch's mask rows).
struct ResidentCta {
  int batch, head_kv, head0, heads, m_blocks;
  CUTLASS_DEVICE int units() const { return heads * m_blocks; }
  CUTLASS_DEVICE int head(int i, int group) const { return head_kv * group + head0 + i / m_blocks; }
  CUTLASS_DEVICE int m_block(int i) const { return m_blocks - 1 - i % m_blocks; }
};
CUTLASS_DEVICE ResidentCta resident_cta(const KernelArgs& kp) {
  const int chunks = kp.resident_chunks;
  const int cta = int(blockIdx.x);
  const int chunk = cta % chunks, rest = cta / chunks;
  ResidentCta r;
  r.head_kv = rest % kp.heads_kv;
  r.batch = rest / kp.heads_kv;
  r.head0 = chunk * kp.resident_heads;
  r.heads = min(kp.resident_heads, kp.group - r.head0);
  r.m_blocks = ceil_div(kp.seqlen_q, int(C::kBlockM));
  return r;
}

// A unit's key tiles as TileWalker sees them, held in registers (at most two tiles: their kinds read once).
// The consumers build the next unit's while the current unit's first Q K^T runs, so the summary's loads
// (live rows, then kinds: two dependent L2 round trips) leave the unit's critical path (ncu, 007 B32 S128,
// bench/NOTES.md thirty-fifth session: ~8% of the kernel's stall samples waited on them at the unit's start).
struct ResidentTiles {
  int n_tiles = 0;
  int kind0 = kTileMixed, kind1 = kTileMixed;
  bool skip_dead = false;
  CUTLASS_DEVICE int kind(int n) const { return n == 0 ? kind0 : kind1; }
  CUTLASS_DEVICE bool causal_predicate(int kind_n) const { return kind_n == kTileCausal && skip_dead; }
  CUTLASS_DEVICE int next(int n) const {
    if (skip_dead)
      while (n < n_tiles && kind(n) == kTileDead) ++n;
    return n;
  }
};
CUTLASS_DEVICE ResidentTiles resident_tiles(const KernelArgs& kp, int batch, int m_block) {
  const TileWalker walk(kp, batch, m_block, unit_key_tiles<128>(kp, m_block));
  ResidentTiles t;
  t.n_tiles = walk.n_tiles;
  t.skip_dead = walk.skip_dead;
  if (t.n_tiles > 0) t.kind0 = walk.kind(0);
  if (t.n_tiles > 1) t.kind1 = walk.kind(1);
  return t;
}

// The producer's K and V loads of the short-sequence kernels (this file's and the split-key kernel,
// sm90_attention_splitkeys.cuh): key tiles [0, tiles) of (head_kv, batch) into the K and V tiles at k and v, K tile t
// on barrier k_full[t] and V tile t on v_full[t], so that a consumer's first Q K^T starts while V is in flight.
template <class KT, class Params>
CUTLASS_DEVICE void load_kv_tiles(const Params& kp, Element* k, Element* v, uint64_t* k_full, uint64_t* v_full,
                                  int head_kv, int batch, int tiles) {
  Tensor sK = make_tensor(make_smem_ptr(k), typename KT::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(v), typename KT::SmemLayoutV{});
  Tensor mK = kp.tma_k.get_tma_tensor(make_shape(kp.seqlen_k, int(C::kHeadDim), kp.heads_kv, kp.batch));
  Tensor mV = kp.tma_v.get_tma_tensor(make_shape(int(C::kHeadDim), kp.seqlen_k, kp.heads_kv, kp.batch));
  Tensor gK = local_tile(mK(_, _, head_kv, batch), typename KT::TileK{}, make_coord(_, 0));  // (128, 128, n)
  Tensor gV = local_tile(mV(_, _, head_kv, batch), typename KT::TileV{}, make_coord(0, _));  // (128, 128, n)
  auto tK = tma_partition(kp.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto tV = tma_partition(kp.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
  for (int t = 0; t < tiles; ++t) {
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&k_full[t], KT::kKBytes);
    copy(kp.tma_k.with(k_full[t]), get<0>(tK)(_, t), get<1>(tK)(_, t));
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&v_full[t], KT::kVBytes);
    copy(kp.tma_v.with(v_full[t]), get<0>(tV)(_, t), get<1>(tV)(_, t));
  }
}

// kMasked: launched with a mask tensor (its CAUSAL / ZERO summary tiles take the lean softmax variants,
// as attention_kernel's kLean / kCausalTiles builds do); false: no mask (the causal flag or nothing).
template <bool kMasked>
__global__ void __launch_bounds__(C::kThreads, 1) kv_resident_kernel(CUTE_GRID_CONSTANT KernelParams<128> const kp) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using KT = KeyTile<128>;
  extern __shared__ __align__(1024) char smem_buf[];
  ResidentSharedStorage& ss = *reinterpret_cast<ResidentSharedStorage*>(smem_buf);

  const int warp_group = threadIdx.x / 128;
  const ResidentCta cta = resident_cta(kp);
  const int units = cta.units();

  if (threadIdx.x == 0) {
    CUTE_UNROLL
    for (int s = 0; s < kResidentQStages; ++s) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.q_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&ss.q_empty[s], 128 * C::kNumConsumerWarpgroups);
    }
    CUTE_UNROLL
    for (int t = 0; t < kResidentKeyTiles; ++t) {
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
      Tensor sQ = make_tensor(make_smem_ptr(ss.q), SmemLayoutQRing{});
      Tensor mQ = kp.tma_q.get_tma_tensor(make_shape(kp.seqlen_q, int(C::kHeadDim), kp.heads_q, kp.batch));
      auto load_q = [&](int i) {
        const int slot = i % kResidentQStages;
        Tensor gQ = local_tile(mQ(_, _, cta.head(i, kp.group), cta.batch), TileQ{}, make_coord(cta.m_block(i), 0));
        auto tQ = tma_partition(kp.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
        cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.q_full[slot], kQBytes);
        copy(kp.tma_q.with(ss.q_full[slot]), get<0>(tQ), get<1>(tQ)(_, slot));
      };
      // The first unit's Q, then every key tile (its K and its V each on a barrier of their own: the first
      // Q K^T starts when Q and K have landed, V's 32 KB still in flight), then the other units' Q tiles as
      // the ring frees up.
      if (units > 0) load_q(0);
      const int key_tiles = ceil_div(kp.seqlen_k, int(C::kBlockN));
      load_kv_tiles<KT>(kp, ss.k, ss.v, ss.k_full, ss.v_full, cta.head_kv, cta.batch, key_tiles);
      // kp.tma_o_store: unit u's O, staged in its Q stage by the consumers' epilogue (which then released the stage),
      // goes out as two TMA boxes (its 64-column halves) from here, before the stage takes the Q of unit u + 3.
      // The wait for the boxes' shared-memory reads sits between that release and the next load into the stage,
      // which the unit after next needs only two units later.
      auto store_o = [&](int u) {
        const Element* tile = ss.q + (u % kResidentQStages) * cosize_v<SmemLayoutQ>;
        const int row = cta.m_block(u) * C::kBlockM, head = cta.head(u, kp.group);
        CUTE_UNROLL
        for (int half = 0; half < 2; ++half)
          SM90_TMA_STORE_4D::copy(&kp.tma_o, tile + half * (C::kBlockM * 64), half * 64, row, head, cta.batch);
        tma_store_arrive();
      };
#pragma unroll 1
      for (int i = 1; i < units; ++i) {
        if (i >= kResidentQStages) {
          cutlass::arch::ClusterBarrier::wait(&ss.q_empty[i % kResidentQStages], (i / kResidentQStages - 1) & 1);
          if (kp.tma_o_store) {
            store_o(i - kResidentQStages);
            tma_store_wait<0>();
          }
        }
        load_q(i);
      }
      if (kp.tma_o_store) {
        // The last (up to) three units: their stages are released by the consumers' last epilogues.
#pragma unroll 1
        for (int u = max(0, units - kResidentQStages); u < units; ++u) {
          cutlass::arch::ClusterBarrier::wait(&ss.q_empty[u % kResidentQStages], (u / kResidentQStages) & 1);
          store_o(u);
        }
        tma_store_wait<0>();  // the boxes' shared-memory reads, before the CTA exits
      }
      // Every key tile loaded above has landed before the CTA exits: a tile no unit visits (the causal flag with
      // Sq <= 128 < Sk, or a DEAD tile every unit skips) is never waited on by a consumer, and a TMA write still
      // in flight into this CTA's shared memory after it exits could land in the next CTA's on this SM.
      for (int t = 0; t < key_tiles; ++t) {
        cutlass::arch::ClusterTransactionBarrier::wait(&ss.k_full[t], 0);
        cutlass::arch::ClusterTransactionBarrier::wait(&ss.v_full[t], 0);
      }
    }
  } else {
    // ---------------------------------------------------------------- consumers
    // One rotated loop over the CTA's (unit, key tile) pairs: S of the next tile and P V of the current one are
    // issued together whether or not the next tile belongs to the next unit, so a unit's last P V runs under the
    // next unit's first Q K^T and softmax, and the unit's epilogue (O / l, staged through its Q stage, 16-byte
    // stores) follows once that P V has landed, before the next unit's first P is converted. Every wgmma sits
    // on every trip of the loop (C7513, tests/test_codegen.py). A unit's arithmetic is unchanged: same tiles,
    // same softmax variants, same order; only when its epilogue runs moved.
    cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
    const int ct = threadIdx.x - 128;        // 0..255 across both consumer warpgroups
    const int consumer_wg = warp_group - 1;  // 0 or 1: rows [64*wg, 64*wg + 64) of each unit's tile

    typename KT::TiledMmaQK mma_qk;
    typename KT::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(ct);
    auto thr_pv = mma_pv.get_thread_slice(ct);
    const bool tail = (kp.seqlen_k % C::kBlockN) != 0;
    const int64_t o_row_stride = int64_t(kp.heads_q) * C::kHeadDim;

    auto turn_wait = [&]() { cutlass::arch::NamedBarrier::sync(256, kTurnBarrierBase + consumer_wg); };
    auto turn_pass = [&](bool last) {
      if (!(last && consumer_wg == 1)) cutlass::arch::NamedBarrier::arrive(256, kTurnBarrierBase + (1 - consumer_wg));
    };

    Tensor tSrQ = thr_qk.partition_fragment_A(make_tensor(make_smem_ptr(ss.q), SmemLayoutQRing{}));  // (.., 8, stages)
    Tensor tSrK = thr_qk.partition_fragment_B(make_tensor(make_smem_ptr(ss.k), typename KT::SmemLayoutK{}));
    Tensor tOrV = thr_pv.partition_fragment_B(make_tensor(make_smem_ptr(ss.v), typename KT::SmemLayoutV{}));
    Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<C::kBlockM>, Int<C::kBlockN>>{});
    Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<C::kBlockM>, Int<C::kHeadDim>>{});
    Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_pv, Shape<Int<C::kBlockM>, Int<C::kBlockN>>{}));
    static_assert(decltype(size(tSrS))::value == 64 && decltype(size(tOrP))::value == 64 &&
                      decltype(size(tOrO))::value == 64,
                  "unexpected per-thread fragment sizes");

    // The current unit (its Q K^T, softmax and P V are in flight) ...
    int i = 0, slot = 0, head = 0, first_row = 0, n_tiles = 0;
    int row[2];
    const uint16_t* mask_row[2] = {nullptr, nullptr};
    float m[2], l[2];
    ResidentTiles walk;
    ResidentTiles next_tiles = units > 0 ? resident_tiles(kp, cta.batch, cta.m_block(0)) : ResidentTiles{};
    // Every unit of a CTA has the CTA's batch, so a unit's walk depends on its q-block only. With at most two
    // q-blocks (007's S 128 / 256) the first head's units compute them and every later unit selects one (unit
    // u's q-block is m_blocks - 1 - u % m_blocks): walk_first for even positions, walk_second for odd ones. More
    // q-blocks (a long Sq over <= 256 keys) compute each unit's walk, as before. Same walks, same bits; the
    // summary's two dependent L2 loads and the walk's ~150 instructions leave all units but the first two.
    const bool cache_walks = kp.walk_cache && cta.m_blocks <= 2;
    ResidentTiles walk_first = next_tiles, walk_second;
    // ... and the one whose epilogue is pending (its last P V issued with the current unit's first Q K^T).
    int epi_slot = 0, epi_head = 0, epi_first_row = 0;
    float inv_l[2] = {0.f, 0.f};

    auto begin_unit = [&](int u) {
      i = u;
      slot = u % kResidentQStages;
      head = cta.head(u, kp.group);
      first_row = cta.m_block(u) * C::kBlockM;
      walk = next_tiles;
      n_tiles = walk.n_tiles;
      int ct_u = ct;
      asm volatile("" : "+r"(ct_u));
      Tensor tScS = mma_qk.get_thread_slice(ct_u).partition_C(make_identity_tensor(Shape<Int<C::kBlockM>, Int<C::kBlockN>>{}));
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        row[r] = first_row + get<0>(tScS(acc_idx(0, r, 0)));
        mask_row[r] = nullptr;
        if (kMasked && kp.mask != nullptr && row[r] < kp.seqlen_q)
          mask_row[r] = kp.mask + int64_t(cta.batch) * kp.mask_batch_stride + int64_t(row[r]) * kp.mask_row_stride;
        m[r] = kNegInf;
        l[r] = 0.f;
      }
      cutlass::arch::ClusterTransactionBarrier::wait(&ss.q_full[slot], (u / kResidentQStages) & 1);
    };
    auto prefetch_next = [&]() {
      const int u = i + 1;
      if (u >= units) return;
      if (!cache_walks || u < cta.m_blocks) {
        next_tiles = resident_tiles(kp, cta.batch, cta.m_block(u));
        if (u == 1) walk_second = next_tiles;
      } else {
        next_tiles = (u % cta.m_blocks == 0) ? walk_first : walk_second;
      }
    };
    auto issue_qk = [&](int q_slot, int n) { issue_qk_gemm(mma_qk, tSrQ(_, _, _, q_slot), tSrK(_, _, _, n), tSrS); };
    // p_low: the softmax of the tile whose P V this issues left P's upper 64 keys at exactly 0 (see softmax);
    // their four k-blocks add nothing to O and are not issued. Warpgroup-uniform, like every wgmma's issue.
    bool p_low = false;
    auto issue_pv = [&](int n) {
      if (p_low)
        issue_pv_gemm<C::kBlockN / 32>(mma_pv, tOrP, tOrV(_, _, _, n), tOrO);
      else
        issue_pv_gemm(mma_pv, tOrP, tOrV(_, _, _, n), tOrO);
    };
    float rescale[2];
    // attention_kernel's softmax step for 128-key tiles without staged masks (its kLean / kCausalTiles
    // builds when kMasked): the same variant for the same tile, hence the same bits.
    auto softmax = [&](int n) {
      int ct_u = ct;
      asm volatile("" : "+r"(ct_u));
      const int col0 = get<1>(mma_qk.get_thread_slice(ct_u).partition_C(
          make_identity_tensor(Shape<Int<C::kBlockM>, Int<C::kBlockN>>{}))(acc_idx(0, 0, 0)));
      const int key0 = n * C::kBlockN;
      const bool last_tail = tail && n == n_tiles - 1;
      const bool causal_diag = kp.causal && key0 + C::kBlockN - 1 > first_row;
      p_low = false;
      if constexpr (kMasked) {
        const int kind = walk.kind(n);
        const bool load_mask = kind != kTileZero;
        if (walk.causal_predicate(kind)) {
          // A CAUSAL tile is the unit's diagonal tile (key0 == first_row: keys past every row of the block are
          // a DEAD tile, keys before it ZERO). Consumer warpgroup 0 holds rows first_row .. first_row + 63, for
          // which every key from first_row + 64 on is past the row: -inf, p = 0. Its softmax covers the lower
          // 64 keys only and its P V their four k-blocks (same bits for finite V: the whole tile's 0 x inf would
          // be NaN in these rows, the lower keys alone leave them finite). canonical_warp_group_idx() is
          // warp-uniform to the compiler (a test of consumer_wg compiled to divergent-branch code).
          if (kp.diag_half && cutlass::canonical_warp_group_idx() == 1 && key0 == first_row) {
            softmax_tile<true, kMaskGlobal, true, true, true, kColGroups / 2>(tSrS, rescale, m, l, row, col0, key0, kp,
                                                                              mask_row, false);
            p_low = true;
          } else {
            softmax_tile<true, kMaskGlobal, true, true, true>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row,
                                                              false);
          }
        } else if (kp.lean_zero && (!load_mask || kp.mask == nullptr) && !last_tail && !causal_diag) {
          softmax_tile<true, kMaskGlobal, false, false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);
        } else {
          softmax_tile<true>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, load_mask);
        }
      } else {
        if (causal_diag || !kp.fold_scale || last_tail)
          softmax_tile<true>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);
        else
          softmax_tile<false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);
      }
    };
    // The pending unit's epilogue: O / l staged as bf16 in this warpgroup's 64 rows of that unit's Q stage (no
    // wgmma reads them any more), 16-byte coalesced stores, then the stage back to the producer.
    auto epilogue = [&]() {
      int ct_u = ct, smem_off = 0;
      asm volatile("" : "+r"(ct_u), "+r"(smem_off));
      Tensor tOcO = mma_pv.get_thread_slice(ct_u).partition_C(
          make_identity_tensor(Shape<Int<C::kBlockM>, Int<C::kHeadDim>>{}));
      const uint32_t s_tile = cute::cast_smem_ptr_to_uint(ss.q + smem_off + epi_slot * cosize_v<SmemLayoutQ>);
      stage_o(tOrO, tOcO, inv_l, s_tile);
      if (kp.tma_o_store) {
        // The producer stores the staged tile with TMA once both warpgroups have released the stage: the stores
        // above reach the async proxy first (the release/acquire of q_empty orders them before the producer's wait).
        cutlass::arch::fence_view_async_shared();
        cutlass::arch::ClusterBarrier::arrive(&ss.q_empty[epi_slot]);
        return;
      }
      cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrierBase + consumer_wg);
      store_o_rows(s_tile, ct_u % 128, consumer_wg, kp, cta.batch, o_row_stride, [&](int r_local, int& q_row, int& head_out) {
        q_row = epi_first_row + r_local, head_out = epi_head;
      });
      // The stage's shared-memory reads above precede the producer's next TMA write into it (async proxy).
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::ClusterBarrier::arrive(&ss.q_empty[epi_slot]);
    };

    if (units > 0) {
      begin_unit(0);
      // The walk never skips every tile of a unit (a DEAD tile is skipped only when every row has a live key
      // elsewhere), so n < n_tiles here and after every begin_unit.
      int n = walk.next(0);
      clear(tOrO);
      if (consumer_wg == 1) cutlass::arch::NamedBarrier::arrive(256, kTurnBarrierBase + 0);
      cutlass::arch::ClusterTransactionBarrier::wait(&ss.k_full[n], 0);
      turn_wait();
      issue_qk(slot, n);
      turn_pass(false);
      prefetch_next();  // under the Q K^T
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      bool first = true;     // the current tile is its unit's first (no O to rescale)
      bool pending = false;  // a finished unit's last P V is in flight; its epilogue follows its landing
#pragma unroll 1
      while (true) {
        softmax(n);
        warpgroup_wait<0>();  // the P V issued with this tile's Q K^T (nothing in flight on the CTA's first tile)
        warpgroup_fence_operand(tOrO);
        warpgroup_fence_operand(tOrP);
        if (pending) {
          epilogue();
          clear(tOrO);
          pending = false;
        } else if (!first) {
          rescale_rows(tOrO, rescale);
        }
        scores_to_p(tSrS, tOrP);
        first = false;
        int next = walk.next(n + 1);
        if (next >= n_tiles) {
          // This unit's last tile: its P V goes out with the next unit's first Q K^T.
          inverse_row_sums(l, inv_l);
          epi_slot = slot, epi_head = head, epi_first_row = first_row;
          if (i + 1 >= units) break;
          begin_unit(i + 1);
          next = walk.next(0);
          first = true;
          pending = true;
        }
        cutlass::arch::ClusterTransactionBarrier::wait(&ss.k_full[next], 0);
        cutlass::arch::ClusterTransactionBarrier::wait(&ss.v_full[n], 0);  // passes at once after the CTA's first tiles
        turn_wait();
        issue_qk(slot, next);
        issue_pv(n);
        turn_pass(false);
        if (pending) prefetch_next();  // a new unit: the one after it, under this Q K^T
        warpgroup_wait<1>();
        warpgroup_fence_operand(tSrS);
        n = next;
      }
      cutlass::arch::ClusterTransactionBarrier::wait(&ss.v_full[n], 0);
      turn_wait();
      issue_pv(n);
      turn_pass(true);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      epilogue();
    }
  }
#endif  // sm_90a
}

// One CTA per (batch, KV head, chunk of attn_rules::ResidentPlan::heads query heads).
inline AttentionStatus launch_resident(KernelArgs args, const attn_rules::ResidentPlan& plan, const AttentionParams& p) {
  args.resident_heads = plan.heads;
  args.resident_chunks = plan.chunks;
  const KernelParams<128> kp{
      args,
      make_tma_k<128>(static_cast<const Element*>(p.k), p.seqlen_k, p.heads_kv, p.batch,
                      slab_strides(p.k_strides, p.heads_kv, p.seqlen_k)),
      make_tma_v<128>(static_cast<const Element*>(p.v), p.seqlen_k, p.heads_kv, p.batch,
                      slab_strides(p.v_strides, p.heads_kv, p.seqlen_k))};
  auto run = [&](auto kernel) {
    return launch_pdl(kernel, dim3(unsigned(plan.ctas)), dim3(C::kThreads), kResidentSmemBytes, p.stream, 0, kp) ==
                   cudaSuccess
               ? AttentionStatus::kSuccess
               : AttentionStatus::kLaunchFailed;
  };
  if (p.mask != nullptr) {
    if (!max_dynamic_smem_once<kv_resident_kernel<true>>(p.device, kResidentSmemBytes)) return AttentionStatus::kInitFailed;
    return run(kv_resident_kernel<true>);
  }
  if (!max_dynamic_smem_once<kv_resident_kernel<false>>(p.device, kResidentSmemBytes)) return AttentionStatus::kInitFailed;
  return run(kv_resident_kernel<false>);
}

