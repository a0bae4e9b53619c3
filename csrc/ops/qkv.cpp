// vlattn::mrope_qkv / vlattn::vision_qkv: tensor checks -> QkvParams -> the fused sm_90a kernel
// (csrc/qkv/). Outputs are fresh head-major tensors q [B, Hq, S, 128], k and v [B, Hkv, S, 128]
// (contiguous), allocated by PyTorch's caching allocator; for the layers (mrope_qkv_ex / vision_qkv_ex
// with v_token_major) v may instead be the token-major view of its GEMM's rows (QkvOutputs::token_major),
// which the attention reads through its strides.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Optional.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/rope.h"
#include "launch/dev_switch.h"
#include "launch/gemm_params.h"
#include "launch/host_trace.h"
#include "ops/check_strings.h"
#include "ops/ops.h"
#include "ops/scratch.h"
#include "qkv/gemm_rope_epi.h"
#include "qkv/qkv_grouped.h"
#include "qkv/qkv_params.h"

namespace vlattn {

namespace {

// Numbers in messages go through std::to_string (check_strings.h says why).
using check_strings::aligned16;
using check_strings::dims_str;
using check_strings::num;

void check_on(const char* op, const char* name, const at::Tensor& t, const at::Tensor& ref, at::ScalarType dtype) {
  TORCH_CHECK(t.scalar_type() == dtype, op, ": ", name, " must be ", c10::toString(dtype), "; got ", t.scalar_type());
  TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " must be on ", ref.device(), "; got ", t.device());
}

// X [B, S, K]: rows must collapse to one evenly strided dimension with unit column stride.
int64_t check_activations(const char* op, const char* name, const at::Tensor& x, int64_t k) {
  TORCH_CHECK(x.dim() == 3, op, ": ", name, " must be 3-D [B, S, hidden]; got ", dims_str(x.sizes()));
  TORCH_CHECK(x.size(2) == k, op, ": ", name, " must have hidden size ", num(k), " (the weights' K); got ",
              dims_str(x.sizes()));
  if (x.size(0) == 0 || x.size(1) == 0) return k;  // no rows: nothing is read, any strides will do
  const bool rows_collapse = x.stride(2) == 1 && (x.size(0) == 1 || x.stride(0) == x.size(1) * x.stride(1));
  TORCH_CHECK(rows_collapse, op, ": ", name, " must have unit stride in its last dim and batch rows that follow ",
              "each other; got strides ", dims_str(x.strides()), " (call .contiguous() first)");
  const int64_t ld = x.size(1) == 1 ? (x.size(0) == 1 ? k : x.stride(0)) : x.stride(1);
  TORCH_CHECK(ld % 8 == 0 && aligned16(x), op, ": ", name,
              " rows must start at 16-byte aligned addresses (row stride a multiple of 8; TMA); got row stride ",
              num(ld));
  return ld;
}

QkvGroup make_group(const char* op, const char* wname, const at::Tensor& w, const char* bname,
                    const c10::optional<at::Tensor>& bias, const at::Tensor& ref, int64_t k, RopeMode rope) {
  check_on(op, wname, w, ref, at::kBFloat16);
  TORCH_CHECK(w.dim() == 2 && w.size(1) == k && w.size(0) % kQkvHeadDim == 0 && w.size(0) > 0, op, ": ", wname,
              " must be [heads * 128, ", num(k), "]; got ", dims_str(w.sizes()));
  TORCH_CHECK(w.stride(1) == 1 && w.stride(0) % 8 == 0 && aligned16(w), op, ": ", wname,
              " must have unit column stride, a row stride that is a multiple of 8 and a 16-byte aligned start; got "
              "strides ", dims_str(w.strides()));
  QkvGroup g;
  g.weight = w.data_ptr();
  g.ldw = w.stride(0);
  g.heads = static_cast<int>(w.size(0) / kQkvHeadDim);
  if (bias.has_value()) {
    const at::Tensor& b = *bias;
    check_on(op, bname, b, ref, at::kBFloat16);
    TORCH_CHECK(b.dim() == 1 && b.size(0) == w.size(0) && (b.stride(0) == 1 || b.size(0) == 1), op, ": ", bname,
                " must be a contiguous 1-D [", num(w.size(0)), "] tensor; got sizes ", dims_str(b.sizes()), " strides ",
                dims_str(b.strides()));
    g.bias = b.data_ptr();
  }
  g.rope = rope;  // g.out: set by QkvOutputs::materialize
  return g;
}

// Head counts from the weights: q [Hq * 128, K], k and v [Hkv * 128, K], Hq a multiple of Hkv.
std::pair<int64_t, int64_t> check_heads(const char* op, const char* qn, const at::Tensor& q, const char* kn,
                                        const at::Tensor& k, const char* vn, const at::Tensor& v) {
  TORCH_CHECK(k.dim() == 2 && q.size(0) % kQkvHeadDim == 0 && k.size(0) % kQkvHeadDim == 0, op, ": ", qn, " and ", kn,
              " must have heads * 128 rows; got ", dims_str(q.sizes()), " and ", dims_str(k.sizes()));
  const int64_t hq = q.size(0) / kQkvHeadDim, hkv = k.size(0) / kQkvHeadDim;
  TORCH_CHECK(hkv > 0 && hq % hkv == 0, op, ": query heads (", num(hq), ") must be a multiple of key/value heads (",
              num(hkv), ")");
  TORCH_CHECK(v.sizes() == k.sizes(), op, ": ", vn, " must have ", kn, "'s shape ", dims_str(k.sizes()), "; got ",
              dims_str(v.sizes()));
  return {hq, hkv};
}

// The activation rows of one launch: X [batch, seq, K] (row stride already checked into p.ldx).
void set_rows(QkvParams& p, const at::Tensor& x, int64_t k) {
  p.x = x.data_ptr();
  p.m = static_cast<int>(x.size(0) * x.size(1));
  p.k = static_cast<int>(k);
  p.batch = static_cast<int>(x.size(0));
  p.seq = static_cast<int>(x.size(1));
}

// The op's head-major outputs [B, heads, S, 128], allocated when a kernel first needs them: the fused
// kernel at its launch, the two-pass paths only after their projection GEMMs went out, so that the
// allocations' host time (1-2 us each on the H200 machine, bench/NOTES.md eleventh session) does not
// come before the first kernel. materialize() sets each group's out pointer; the op calls it again
// before returning (M = 0 launches none).
struct QkvOutputs {
  struct Slot {
    at::Tensor* tensor;
    QkvGroup* group;
    int64_t heads, seq;  // an output is made once its tensor is defined
  };
  Slot slots[3];  // q, k, v
  at::TensorOptions options;
  int64_t batch;
  bool v_token_major = false;  // the layers' v as a view of its GEMM's output (mrope_qkv_ex)

  // q [B, Hq, Sq, 128] for group gq, k and v [B, Hkv, Skv, 128] for gk and gv.
  QkvOutputs(const at::TensorOptions& opts, int64_t batch, at::Tensor* q, QkvGroup* gq, int64_t hq, int64_t sq,
             at::Tensor* k, QkvGroup* gk, at::Tensor* v, QkvGroup* gv, int64_t hkv, int64_t skv)
      : slots{{q, gq, hq, sq}, {k, gk, hkv, skv}, {v, gv, hkv, skv}}, options(opts), batch(batch) {
    // VLATTN_QKV_EAGER_OUTPUTS=1 (read once): allocate all three up front, as before the eleventh
    // session (development A/B of the deferral).
    static const bool eager = [] {
      const char* env = std::getenv("VLATTN_QKV_EAGER_OUTPUTS");
      return env != nullptr && env[0] == '1';
    }();
    if (eager) materialize();
  }
  // The outputs of launch p's groups (all of them when p is null).
  void materialize(const QkvParams* p = nullptr) {
    bool made = false;
    for (Slot& s : slots) {
      if (s.tensor->defined() || (p != nullptr && (s.group < p->groups || s.group >= p->groups + p->num_groups)))
        continue;
      *s.tensor = scratch_empty({batch, s.heads, s.seq, kQkvHeadDim}, options);
      s.group->out = s.tensor->data_ptr();
      made = true;
    }
    if (made) VLATTN_HOST_MARK("qkv.outputs");
  }
  // Whether group g's projection is written token-major, straight by its GEMM: the v slot's group
  // (no RoPE) when the caller takes v as a view.
  bool token_major(const QkvGroup* g) const {
    return v_token_major && g == slots[2].group && g->rope == RopeMode::kNone && !slots[2].tensor->defined();
  }
  // Makes v token-major: [B, Hkv, S, 128] over the rows of one [B * S, Hkv * 128] block (one strided
  // allocation: the view of a row block and its transpose were two more dispatcher calls); returns the
  // rows' start and sets *ld to their stride (elements).
  void* make_token_major_v(int64_t* ld) {
    Slot& s = slots[2];
    *ld = s.heads * kQkvHeadDim;
    *s.tensor = scratch_empty_strided({batch, s.heads, s.seq, kQkvHeadDim},
                                      {s.seq * *ld, kQkvHeadDim, *ld, 1}, options);
    VLATTN_HOST_MARK("qkv.v_token_major");
    return s.tensor->data_ptr();
  }
};

// Named configs: "m128", "m64" (persistent ping-pong), "splitk2" / "splitk3" / "splitk4" (K split over
// a cluster), "splitk2d" / "splitk3d" / "splitk4d" (the same with a 6-stage ring), "m256k1".."m256k4"
// (256-row tiles, K split over 1..4 CTAs), "c256" (head-pair tiles), "m128mc" (m128 in 2-CTA
// clusters along M with the weight tile multicast), "gemm" (not fused: the CUTLASS GEMMs of
// vlattn.linear, then a RoPE + layout pass; see QkvConfig::kGemmRope). "" or "auto" picks by the
// number of 128-row tiles against the SM count (rule measured on the H200: bench/NOTES.md, run 7).
// bias_aligned: every group's bias starts at a 16-byte aligned address, which the two-pass config
// needs (the CUTLASS epilogue reads the bias with 16-byte loads; the fused kernel has no such need).
QkvConfig pick_config(c10::string_view config, const char* op, int64_t m, int64_t heads, int sm_count,
                      bool even_groups, bool bias_aligned) {
  static const std::pair<const char*, QkvConfig> kNamed[] = {
      {"m128", QkvConfig::kM128},       {"m64", QkvConfig::kM64},         {"splitk2", QkvConfig::kSplitK2},
      {"splitk3", QkvConfig::kSplitK3}, {"splitk4", QkvConfig::kSplitK4}, {"splitk2d", QkvConfig::kSplitK2D},
      {"splitk3d", QkvConfig::kSplitK3D}, {"splitk4d", QkvConfig::kSplitK4D}, {"m256k1", QkvConfig::kM256K1},
      {"m256k2", QkvConfig::kM256K2},   {"m256k3", QkvConfig::kM256K3},   {"m256k4", QkvConfig::kM256K4},
      {"c256", QkvConfig::kC256},       {"m128mc", QkvConfig::kM128Mc},   {"gemm", QkvConfig::kGemmRope},
      {"grouped128", QkvConfig::kGrouped128}, {"grouped64", QkvConfig::kGrouped64}};
  for (const auto& [name, cfg] : kNamed) {
    if (config != name) continue;
    TORCH_CHECK(cfg != QkvConfig::kGemmRope || bias_aligned, op,
                ": config 'gemm' needs biases that start at 16-byte aligned addresses");
    return cfg;
  }
  if (!(config.empty() || config == "auto")) {
    std::string names = "'', 'auto', 'grouped'";
    for (const auto& named : kNamed) names += std::string(", '") + named.first + "'";
    TORCH_CHECK(false, op, ": config must be one of ", names, "; got '", std::string(config), "'");
  }
  // The automatic choice takes the two-pass "gemm" config from kQkvGemmMinRows rows of the launch on
  // (qkv_config.h); VLATTN_QKV_GEMM_MIN_M=<rows> moves the threshold, 0 turns it off (a dev switch).
  const int64_t gemm_min_m = dev_switch(DevSwitch::kQkvGemmMinM);
  if (gemm_min_m > 0 && m >= gemm_min_m && bias_aligned) return QkvConfig::kGemmRope;
  return qkv_auto_config(m, heads, sm_count, even_groups);
}

// The last group's GEMM of the two-pass config runs on a second stream, concurrently with the
// others, where qkv_gemm_side_stream says so (VLATTN_QKV_GEMM_STREAMS: 1 the rule, 0 never, 2 always; a dev
// switch; 3 neither: launch_gemm_rope's grouped tail everywhere). At 1024-2048 rows the K and V projections were
// 64 tiles of 64x128 each, ~15 us of mostly idle SMs apiece, and Q's 128x256 tiles left 20 SMs free (H200, seventh
// session): side by side they shared the machine instead of running back to back. 007 takes the grouped tail
// there now (qkv_gemm_tail_grouped). pair: the launch is two equal-width groups (034's K and V).
bool gemm_side_stream(int64_t m, bool pair) {
  const int64_t mode = dev_switch(DevSwitch::kQkvGemmStreams);
  return mode == 0 || mode == 3 ? false : mode == 2 ? true : qkv_gemm_side_stream(m, pair);
}

// 007's grouped plan (qkv_op_plan) below this many rows: kQkvGroupedMaxRows, or VLATTN_QKV_GROUPED_MAX_M (a
// dev switch; 2048 the rule before the grouped tail). From there to 2047 rows launch_gemm_rope takes the grouped
// tail (qkv_gemm_tail_grouped).
int64_t grouped_max_rows() {
  return dev_switch(DevSwitch::kQkvGroupedMaxM);
}

// Equal-width groups side by side (034's K and V on the vision tokens) are picked as a pair: the wave
// model counts both GEMMs' tiles on the one machine (gemm_analytic_pick's `concurrent`). Picked alone,
// 64x64 tiles won K and V at 392 rows (one wave each) and then ran as two waves side by side: 034 B2
// Lq128 +9.7% (bench/NOTES.md, tenth session). VLATTN_QKV_PAIR_WAVES=0 picks each alone (a dev switch).
bool gemm_pair_waves_enabled() {
  return dev_switch_on(DevSwitch::kQkvPairWaves);
}

// A plain GEMM that runs alone (not one of a side-by-side pair) takes the committed tuned table's entry for
// its shape where there is one, as vlattn.linear and the O projection do (gemm_pick; the table is built in
// from python/vlattn/data/gemm_tuned_h200.json), else the wave model. First case: 007 B32 S541's v, 17312 x
// 512 x 3584, on the swapped 128 x 176 tile (3.0 waves) instead of the rule's 128 x 256 pair (2.06 waves).
// VLATTN_QKV_TUNED=0 keeps the wave model everywhere (a dev switch, for the A/B).
bool gemm_tuned_enabled() {
  return dev_switch_on(DevSwitch::kQkvTuned);
}

// Fork/join events, one pair per device and host thread, created on first use and reused: recording
// an event again is legal once the host has enqueued the wait on it. Per thread, because two threads
// sharing one pair could each wait on the other's record.
// The second stream itself: a stream from c10's pool on every call (round-robin over its 32 streams per
// device). Keeping one per thread instead (an A/B switch until the thirty-fourth session) changed nothing:
// only a process's first call allocates, either way (bench/NOTES.md twenty-fifth session).
// Never the caller's stream: callers run on that same pool too (torch.cuda.Stream(), and torch.cuda.graph's
// capture stream, are pool streams), so once in 32 calls the round-robin handed out the caller's own stream
// and the two GEMMs ran back to back. In the bench's full run that call was 034 B8 Lq128's graph capture: its
// replay read 203-208 us against 164-168 with the GEMMs side by side (fifty-sixth session). The pool's next
// stream is another one.
struct ForkJoin {
  cudaEvent_t fork = nullptr, join = nullptr;
  c10::cuda::CUDAStream side_stream(int device, cudaStream_t current) {
    c10::cuda::CUDAStream s = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device));
    if (s.stream() == current) s = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device));
    return s;
  }
  ForkJoin() = default;
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;
  ~ForkJoin() {  // at thread exit; errors (a torn-down context at process exit) are ignored
    if (fork != nullptr) (void)cudaEventDestroy(fork);
    if (join != nullptr) (void)cudaEventDestroy(join);
  }
};
ForkJoin& fork_join_events(int device) {
  constexpr int kMaxDevices = 64;
  thread_local ForkJoin events[kMaxDevices];
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "vlattn: device index ", num(device), " out of range");
  ForkJoin& e = events[device];
  if (e.fork == nullptr) {
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e.fork, cudaEventDisableTiming));
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e.join, cudaEventDisableTiming));
  }
  return e;
}

// The two-pass configs' intermediate: one bf16 y [M, all heads * 128] per launch from the caching
// allocator, group g's projection in its columns from `ptr[g]` on, every row `ld` apart (the RoPE
// pass's y / ldy arguments). bytes(): its size rounded up to 256 (so that blocks placed after it in one
// allocation stay 256-byte aligned); at(base) places it.
struct ProjectionY {
  void* ptr[kQkvMaxGroups] = {};
  int64_t ldy[kQkvMaxGroups] = {};
  int64_t ld = 0;
};

int64_t projection_y_bytes(const QkvParams& p) {
  int64_t ld = 0;
  for (int g = 0; g < p.num_groups; ++g) ld += int64_t(p.groups[g].heads) * kQkvHeadDim;
  return (int64_t(p.m) * ld * 2 + 255) / 256 * 256;
}

ProjectionY projection_y_at(const QkvParams& p, void* base) {
  ProjectionY out;
  for (int g = 0; g < p.num_groups; ++g) out.ld += int64_t(p.groups[g].heads) * kQkvHeadDim;
  auto* col = static_cast<at::BFloat16*>(base);
  for (int g = 0; g < p.num_groups; ++g) {
    out.ptr[g] = col;
    out.ldy[g] = out.ld;
    col += int64_t(p.groups[g].heads) * kQkvHeadDim;
  }
  return out;
}

at::Tensor byte_block(const at::Tensor& like, int64_t bytes) { return scratch_bytes(like.options(), bytes); }

// Group g of launch p as a problem of the grouped GEMM (qkv_grouped.h), its output at d with row stride ldd.
GroupedProblem grouped_problem(const QkvParams& p, int g, void* d, int64_t ldd) {
  GroupedProblem q;
  q.a = p.x;
  q.lda = p.ldx;
  q.b = p.groups[g].weight;
  q.ldb = p.groups[g].ldw;
  q.bias = p.groups[g].bias;
  q.d = d;
  q.ldd = ldd;
  q.m = p.m;
  q.n = p.groups[g].heads * kQkvHeadDim;
  q.k = p.k;
  return q;
}

// Config kGemmRope: each group's projection on a CUTLASS GEMM (bias in its epilogue) into its columns
// of one bf16 workspace y [M, all heads * 128] from the caching allocator, then one RoPE + head-major
// store kernel. With two or more groups, the last group's GEMM is issued first, on a pool stream that
// forks from and joins back to the caller's stream (CUDA-graph capture follows both). y belongs to the
// caller's stream and needs no record_stream: the side stream uses it only before the join, and
// everything the caller's stream does after the call, reuse of y's block included, is ordered after
// the join. The side GEMM's own workspace is allocated on the side stream (run_gemm frees it on
// return, while that GEMM may still run), so only later side-stream work can reuse it. Groups that take
// the GEMM with the RoPE epilogue (gemm_epi_mode, qkv_gemm_epi_tile) skip y and the pass: they write the
// head-major outputs, allocated on the caller's stream before the fork (the same ordering argument).
// A launch whose GEMMs have run and whose RoPE pass is still to come (launch_rope_passes): y and the
// block holding it, kept alive until the pass is launched.
// When some of the launch's groups ran with the RoPE in their GEMM epilogue, the pass covers only the
// others: `reduced` is set and `rest` holds those (their out pointers set), and params() is what the
// pass gets. Otherwise (every launch of the grouped path, which leaves `rest` empty) the pass gets p
// itself: its outputs may only be allocated by launch_rope_passes. The flag is not derivable from the
// group counts: an empty `rest` means "not used" there. (The fourteenth session's review had removed
// it; the GPU suite caught every grouped-path pass launching with no groups.)
struct PendingRope {
  QkvParams* p = nullptr;
  ProjectionY y;
  at::Tensor block;
  bool reduced = false;
  QkvParams rest;
  const QkvParams* params() const { return reduced ? &rest : p; }
};

// p restricted to the groups not marked in `skip` (a RoPE pass's `rest`); index[g] is group g's index in it.
QkvParams groups_except(const QkvParams& p, const bool* skip, int* index) {
  QkvParams rest = p;
  rest.num_groups = 0;
  for (int g = 0; g < p.num_groups; ++g) {
    if (skip[g]) continue;
    index[g] = rest.num_groups;
    rest.groups[rest.num_groups++] = p.groups[g];
  }
  return rest;
}

// The op-level all-GEMMs plan (qkv_op_plan kGemmAll: 034's two launches below 2048 rows each) runs both
// launches' GEMMs first and then one RoPE pass for both: the text's pass no longer sits between the Q
// and the K GEMM, and one launch is saved. H200, 2026-12-01 (bench/NOTES.md thirteenth session call 3,
// graph replay): 034 B2 Lq128 92.7 -> 86.6 us, B2 Lq256 116.8 -> 112.2, B1 Lq512 121.6 -> 117.2, the
// rest within 1%. VLATTN_QKV_ROPE_MERGE=0 (a dev switch) gives each launch a pass after its GEMMs.
bool rope_merge_enabled() { return dev_switch_on(DevSwitch::kQkvRopeMerge); }

// The RoPE passes of n <= 2 launches in one kernel (the outputs are allocated first).
void launch_rope_passes(const char* op, PendingRope* pend, int n, QkvOutputs& outs) {
  const QkvParams* ps[2] = {};
  const void* const* ys[2] = {};
  const int64_t* lds[2] = {};
  for (int i = 0; i < n; ++i) {
    outs.materialize(pend[i].p);
    ps[i] = pend[i].params();
    TORCH_CHECK(ps[i]->num_groups >= 1 && ps[i]->m >= 1, op, ": internal error: RoPE pass ", i, " of ", n,
                " has ", ps[i]->num_groups, " groups and ", num(ps[i]->m), " rows");
    ys[i] = pend[i].y.ptr;
    lds[i] = pend[i].y.ldy;
  }
  // VLATTN_QKV_ROPE_TABLE (a dev switch): 0 = the pass computes cos/sin itself, 1 (default) = a table
  // first when qkv_rope_table_pays, 2 = always a table (where a launch has a position mode).
  const int table_mode = static_cast<int>(dev_switch(DevSwitch::kQkvRopeTable));
  int64_t rows = 0;
  for (int i = 0; i < n; ++i) rows += ps[i]->m;
  const bool table = table_mode >= 2 || (table_mode == 1 && qkv_rope_table_pays(rows));
  const size_t table_bytes = table ? qkv_rope_table_bytes(ps, n) : 0;
  at::Tensor table_ws;  // caching allocator, on the caller's stream, freed when the op returns
  if (table_bytes > 0)
    table_ws = scratch_bytes(outs.options, static_cast<int64_t>(table_bytes));
  // VLATTN_QKV_PASS_WIDTH (a dev switch, an A/B): 0 (default) = rope_pass_heads_per_block's rule, N > 0 =
  // runs of N heads per block (rounded up to a multiple of 4); same bits.
  const int64_t width = dev_switch(DevSwitch::kQkvPassWidth);
  const int pass_width = width > 0 ? static_cast<int>(std::min<int64_t>(width, 1 << 20)) : 0;
  RECORD_USER_SCOPE("vlattn.qkv.rope_pass");
  const cudaError_t err = qkv_rope_rows_sm90(ps, ys, lds, n, table_bytes > 0 ? table_ws.data_ptr() : nullptr,
                                             table_bytes, pass_width);
  VLATTN_HOST_MARK("qkv.rope_pass");
  TORCH_CHECK(err == cudaSuccess, op, ": RoPE pass launch failed: ", cudaGetErrorString(err));
}

// VLATTN_QKV_GEMM_EPI (a dev switch): 0 = every group of config "gemm" through y and the RoPE pass; 1
// (default) = the measured rule qkv_gemm_epi_tile for launches whose groups all take the epilogue
// GEMM (qkv/gemm_rope_epi.h); 2 = every group that can take it, from kQkvGemmMinRows rows, on 64 x 256
// ping-pong tiles (A/B); 3 = as 2 on 128 x 256 cooperative tiles (A/B); 4 = as 2 on 128 x 128 ping-pong
// tiles (A/B); 5 = the rule, with the 128 x 256 cooperative tile where it picks the 128 x 128 ping-pong one
// (from 8192 rows; an A/B of the tile alone, where 3 also changes which groups take the epilogue). H100, sixty-seventh
// session (bench/NOTES.md): one process per arm read the cooperative tile 5-6% faster per large layer, two in-process
// A/Bs -3.5 to +2.1% on 007 and +2 to +4.6% slower on 034: the rule stays.
int gemm_epi_mode() {
  const int64_t mode = dev_switch(DevSwitch::kQkvGemmEpi);
  return mode == 0 || mode == 2 || mode == 3 || mode == 4 || mode == 5 ? static_cast<int>(mode) : 1;
}

// VLATTN_QKV_EPI_POS1D (a dev switch, default on): a group with 1-D position RoPE (034's q) can take the
// epilogue GEMM too. Its cos/sin are computed first into a table [cos m x 128 | sin m x 128]
// (qkv_rope_table_sm90: the pass's own table kernel, the same bits), which the epilogue reads as table
// RoPE with one plane; the y round trip and the q half of the RoPE pass go away.
// =2 (an A/B): such a launch takes the 128 x 256 cooperative tile wherever the rule picks the 128 x 128
// ping-pong one (034's q from 8192 rows: the graph timeline read it 47 us faster on B64 Lq256's q, but the
// layers did not follow, bench/NOTES.md thirty-first session call 4; the rule stays).
bool epi_pos1d_enabled() { return dev_switch_on(DevSwitch::kQkvEpiPos1D); }
bool epi_pos1d_coop() { return dev_switch(DevSwitch::kQkvEpiPos1D) == 2; }

// Whether group g's projection can take the epilogue GEMM: table RoPE (full-head rotate-half), 1-D
// positions through a table (epi_pos1d_enabled; the launch's only position mode) or none, 4-byte aligned
// bias and tables (channel pairs are read as bf16x2), even table strides, and every even channel in the
// same mrope plane as the next one.
bool epi_supported(const QkvParams& p, const QkvGroup& g) {
  if (reinterpret_cast<uintptr_t>(g.bias) % 4 != 0 || p.seq <= 0) return false;
  if (g.rope == RopeMode::kPos1D) return epi_pos1d_enabled() && rope_table_mode(p) == RopeMode::kPos1D;
  if (g.rope != RopeMode::kNone && g.rope != RopeMode::kTable) return false;
  if (g.rope == RopeMode::kTable) {
    const QkvRope& r = p.rope;
    if (reinterpret_cast<uintptr_t>(r.cos) % 4 != 0 || reinterpret_cast<uintptr_t>(r.sin) % 4 != 0) return false;
    if (r.tab_plane_stride % 2 != 0 || r.tab_batch_stride % 2 != 0 || r.tab_seq_stride % 2 != 0) return false;
    if (!epi_table_offsets_fit(r.tab_plane_stride)) return false;
    for (int c = 0; c < kQkvHeadDim; c += 2)
      if (r.plane_of_channel[c] != r.plane_of_channel[c + 1]) return false;
  }
  return true;
}

// pos_table: the launch's 1-D cos/sin table (qkv_rope_table_sm90) for a kPos1D group, read as table
// RoPE whose three planes are one: row m = b * seq + s of cos at pos_table + 128 m, of sin 128 m later.
GemmRopeEpiParams epi_params(const QkvParams& p, const QkvGroup& g, const GemmParams& gp, const void* pos_table) {
  GemmRopeEpiParams e;
  e.gemm = gp;
  e.mode = g.rope;
  e.epi.bias = g.bias;
  e.epi.out = g.out;
  e.epi.heads = g.heads;
  e.epi.seq = p.seq;
  if (g.rope == RopeMode::kPos1D) {
    e.mode = RopeMode::kTable;
    const auto* cos = static_cast<const uint16_t*>(pos_table);  // bf16
    e.epi.cos = cos;
    e.epi.sin = cos + int64_t(p.m) * kQkvHeadDim;
    e.epi.tab_plane_stride = 0;
    e.epi.tab_batch_stride = int64_t(p.seq) * kQkvHeadDim;
    e.epi.tab_seq_stride = kQkvHeadDim;
    return e;  // plane_bits all 0
  }
  if (g.rope == RopeMode::kTable) {
    e.epi.cos = p.rope.cos;
    e.epi.sin = p.rope.sin;
    e.epi.tab_plane_stride = p.rope.tab_plane_stride;
    e.epi.tab_batch_stride = p.rope.tab_batch_stride;
    e.epi.tab_seq_stride = p.rope.tab_seq_stride;
    for (int c = 0; c < kQkvHeadDim; ++c)
      e.epi.plane_bits[c / 16] |= uint32_t(p.rope.plane_of_channel[c] & 3) << (2 * (c % 16));
  }
  return e;
}

GemmStatus run_gemm_epi(const GemmRopeEpiParams& e, QkvEpiTile tile, const at::TensorOptions& like) {
  const bool coop = tile == QkvEpiTile::kCoop128x256, pp128 = tile == QkvEpiTile::kPingPong128x128;
  const size_t ws_bytes = coop    ? gemm_rope_epi_workspace_coop(e)
                          : pp128 ? gemm_rope_epi_workspace_pp128(e)
                                  : gemm_rope_epi_workspace(e);
  at::Tensor workspace;  // from the caching allocator (the current stream's): capturable
  if (ws_bytes > 0) workspace = scratch_bytes(like, static_cast<int64_t>(ws_bytes));
  RECORD_USER_SCOPE("vlattn.gemm_epi.run");
  void* ws = ws_bytes ? workspace.data_ptr() : nullptr;
  return coop    ? gemm_rope_epi_run_coop(e, ws, ws_bytes)
         : pp128 ? gemm_rope_epi_run_pp128(e, ws, ws_bytes)
                 : gemm_rope_epi_run(e, ws, ws_bytes);
}

// With `defer`, the RoPE pass is left to the caller (launch_rope_passes), which gets y in *defer; returns
// whether a pass was left there (false: every group's RoPE ran in its GEMM epilogue).
bool launch_gemm_rope(const char* op, QkvParams& p, const at::Tensor& x, QkvOutputs& outs,
                      PendingRope* defer = nullptr) {
  // Groups on the epilogue GEMM write their outputs directly (allocated first); the others, `rest`,
  // go through y and the RoPE pass. y holds rest's groups only.
  // The tile: the measured rule, or the one an A/B forces (2: ping-pong, 3: cooperative).
  const int mode = gemm_epi_mode();
  QkvEpiTile tile = mode == 0   ? QkvEpiTile::kNone
                    : mode == 2 ? QkvEpiTile::kPingPong64x256
                    : mode == 3 ? QkvEpiTile::kCoop128x256
                    : mode == 4 ? QkvEpiTile::kPingPong128x128
                                : qkv_gemm_epi_tile(p.m);
  const bool rule = mode == 1 || mode == 5;
  if (tile == QkvEpiTile::kPingPong128x128 &&
      (mode == 5 || (mode == 1 && epi_pos1d_coop() && rope_table_mode(p) == RopeMode::kPos1D)))
    tile = QkvEpiTile::kCoop128x256;
  bool epi[kQkvMaxGroups] = {};
  int n_epi = 0;
  for (int g = 0; g < p.num_groups; ++g) {
    epi[g] = tile != QkvEpiTile::kNone && p.m >= kQkvGemmMinRows && epi_supported(p, p.groups[g]);
    n_epi += epi[g] ? 1 : 0;
  }
  if (rule && n_epi < p.num_groups) {  // the rule: all of the launch's groups or none
    for (bool& e : epi) e = false;
    n_epi = 0;
  }
  // 1-D positions on the epilogue GEMM: their cos/sin table first, on the caller's stream before any
  // fork (the caching allocator's block, freed on return: later work on this stream is ordered after).
  at::Tensor pos_table;
  for (int g = 0; g < p.num_groups && !pos_table.defined(); ++g) {
    if (!epi[g] || p.groups[g].rope != RopeMode::kPos1D) continue;
    const QkvParams* ps[1] = {&p};
    const size_t bytes = qkv_rope_table_bytes(ps, 1);
    pos_table = scratch_bytes(x.options(), static_cast<int64_t>(bytes));
    const cudaError_t err = qkv_rope_table_sm90(p, pos_table.data_ptr(), bytes);
    VLATTN_HOST_MARK("qkv.gemm_rope.pos_table");
    TORCH_CHECK(err == cudaSuccess, op, ": RoPE table launch failed: ", cudaGetErrorString(err));
  }
  // A token-major v (the layers, QkvOutputs::v_token_major) is its plain GEMM's output: no y, no pass.
  bool direct[kQkvMaxGroups] = {};
  void* direct_out = nullptr;
  int64_t direct_ld = 0;
  for (int g = 0; g < p.num_groups; ++g) {
    if (epi[g] || !outs.token_major(&p.groups[g])) continue;
    direct[g] = true;
    direct_out = outs.make_token_major_v(&direct_ld);
  }
  // The pass gets `rest` (copied below) when some groups skip it: their outputs first.
  if (n_epi > 0 || direct_out != nullptr) outs.materialize(&p);
  bool skip[kQkvMaxGroups] = {};
  for (int g = 0; g < p.num_groups; ++g) skip[g] = epi[g] || direct[g];
  int rest_index[kQkvMaxGroups] = {};  // group g's index in rest
  const QkvParams rest = groups_except(p, skip, rest_index);
  at::Tensor y_block;
  ProjectionY y;
  if (rest.num_groups > 0) {
    y_block = byte_block(x, projection_y_bytes(rest));
    y = projection_y_at(rest, y_block.data_ptr());
  }
  VLATTN_HOST_MARK("qkv.gemm_rope.y");
  const int device = x.get_device();
  // The grouped tail (qkv_gemm_tail_grouped; VLATTN_QKV_GEMM_STREAMS=3 everywhere): the first group's GEMM
  // alone on its tuned tile, then every other group in one grouped GEMM launch after it, on the caller's
  // stream (007 at 1024 rows: Q one wave of 128 x 224 tiles, then K and V as 96 tiles of 64 x 192, instead of
  // the grouped plan's 200 tiles of 128 x 192 in two waves). Only where the grouped GEMM takes the groups
  // (biases all given or all None, 16-byte aligned pointers and strides) and no group is on the RoPE-epilogue
  // GEMM; else the side-stream rule (with 3: one stream).
  GroupedGemmParams tail;
  GroupedTile tail_tile = GroupedTile::k64x192;
  size_t tail_bytes = 0;
  const int64_t streams_mode = dev_switch(DevSwitch::kQkvGemmStreams);
  const bool tail_wanted =
      streams_mode == 3 || (streams_mode == 1 && qkv_gemm_tail_grouped(p.m, p.num_groups, grouped_max_rows()));
  if (tail_wanted && p.num_groups >= 2 && n_epi == 0 && p.num_groups - 1 <= kGroupedMaxProblems) {
    tail.device = device;
    tail.sm_count = p.sm_count;
    tail.stream = p.stream;
    int64_t rows_cols[kGroupedMaxProblems][2] = {};
    for (int g = 1; g < p.num_groups; ++g) {
      GroupedProblem& q = tail.prob[tail.count];
      q = grouped_problem(p, g, direct[g] ? direct_out : y.ptr[rest_index[g]], direct[g] ? direct_ld : y.ld);
      rows_cols[tail.count][0] = q.m;
      rows_cols[tail.count][1] = q.n;
      ++tail.count;
    }
    tail_tile = grouped_tile_for(rows_cols, tail.count, tail.sm_count) == QkvConfig::kGrouped64 ? GroupedTile::k64x192
                                                                                                : GroupedTile::k128x192;
    tail_bytes = grouped_gemm_workspace_bytes(tail, tail_tile);  // 0 where the grouped GEMM refuses the groups
  }
  const bool tail_grouped = tail_bytes > 0;
  const bool two_equal = p.num_groups == 2 && p.groups[0].heads == p.groups[1].heads;
  const bool side = !tail_grouped && p.num_groups >= 2 && gemm_side_stream(p.m, two_equal);
  c10::optional<c10::cuda::CUDAStream> side_stream;
  if (side) {
    ForkJoin& ev = fork_join_events(device);
    side_stream = ev.side_stream(device, p.stream);
    C10_CUDA_CHECK(cudaEventRecord(ev.fork, p.stream));
    C10_CUDA_CHECK(cudaStreamWaitEvent(side_stream->stream(), ev.fork, 0));
  }
  // Two equal-width groups run side by side: their GEMMs share the machine (gemm_pair_waves_enabled).
  const bool pair = side && two_equal;
  const int concurrent = pair && gemm_pair_waves_enabled() ? 2 : 1;
  for (int i = 0; i < (tail_grouped ? 1 : p.num_groups); ++i) {
    // The side stream's group goes first so that it starts with the others, not after them. (Launching it
    // last, for an earlier first launch, measured the same: bench/NOTES.md twenty-fifth session.)
    const int g = side ? (i == 0 ? p.num_groups - 1 : i - 1) : i;
    const bool on_side = side && g == p.num_groups - 1;
    const QkvGroup& grp = p.groups[g];
    const int64_t n = int64_t(grp.heads) * kQkvHeadDim;
    GemmParams gp;
    gp.a = p.x;
    gp.b = grp.weight;
    gp.bias = grp.bias;
    gp.d = epi[g] ? nullptr : direct[g] ? direct_out : y.ptr[rest_index[g]];
    gp.m = p.m;
    gp.n = static_cast<int>(n);
    gp.k = p.k;
    gp.lda = p.ldx;
    gp.ldb = grp.ldw;
    gp.ldd = direct[g] ? direct_ld : y.ld;
    gp.device = device;
    gp.sm_count = p.sm_count;
    gp.stream = on_side ? side_stream->stream() : p.stream;
    // The side stream current while the GEMM's workspace is allocated: it is then the side stream's
    // block, which the allocator hands out again only to work ordered after this GEMM.
    c10::cuda::OptionalCUDAStreamGuard on;
    if (on_side) on.reset_stream(*side_stream);
    if (epi[g]) {
      const GemmStatus status =
          run_gemm_epi(epi_params(p, grp, gp, pos_table.defined() ? pos_table.data_ptr() : nullptr), tile, x.options());
      VLATTN_HOST_MARK("qkv.gemm_rope.gemm_epi");
      TORCH_CHECK(status == GemmStatus::kSuccess, op, ": projection GEMM with the RoPE epilogue failed for M=",
                  num(p.m), " N=", num(n), " K=", num(p.k), ": ", gemm_status_string(status));
      continue;
    }
    // The tuned table alone, else vlattn.linear's wave model (gemm_pick); a stream-K-only build runs its
    // first config.
    int splits = 1;
    const GemmKernelEntry* entry =
        gemm_pick(p.m, n, p.k, p.sm_count, concurrent, gemm_tuned_enabled(), &splits, "qkv");
    gp.splits = splits;
    if (entry == nullptr) {
      int count = 0;
      const GemmKernelEntry* all = gemm_registry(&count);
      entry = count > 0 ? &all[0] : nullptr;
    }
    TORCH_CHECK(entry != nullptr, op, ": config 'gemm' needs the GEMM configs, and this build has none");
    const GemmStatus status = run_gemm(*entry, gp, x.options());
    VLATTN_HOST_MARK("qkv.gemm_rope.gemm");
    TORCH_CHECK(status == GemmStatus::kSuccess, op, ": projection GEMM (config ", entry->name, ") failed for M=",
                num(p.m), " N=", num(n), " K=", num(p.k), ": ", gemm_status_string(status));
  }
  if (tail_grouped) {  // the caching allocator's block, freed on return: later work on this stream is ordered after
    const at::Tensor block = byte_block(x, static_cast<int64_t>(tail_bytes));
    const cudaError_t err = grouped_gemm_sm90(tail, tail_tile, block.data_ptr(), tail_bytes);
    VLATTN_HOST_MARK("qkv.gemm_rope.tail_grouped");
    TORCH_CHECK(err == cudaSuccess, op, ": grouped projection GEMM of groups 2..", num(p.num_groups), " failed: ",
                cudaGetErrorString(err));
  }
  if (side) {
    ForkJoin& ev = fork_join_events(device);
    C10_CUDA_CHECK(cudaEventRecord(ev.join, side_stream->stream()));
    C10_CUDA_CHECK(cudaStreamWaitEvent(p.stream, ev.join, 0));
  }
  if (rest.num_groups == 0) return false;  // every group's RoPE ran in its GEMM (or it had none: v)
  PendingRope pend{&p, y, y_block, rest.num_groups < p.num_groups, rest};
  if (defer != nullptr) {
    *defer = pend;
    return true;
  }
  launch_rope_passes(op, &pend, 1, outs);
  return false;
}

// Config kGrouped128 / kGrouped64: the projections of all launches (007: one input, three groups;
// 034: the text's Q and the vision tokens' K and V) as one CUTLASS grouped GEMM (qkv_grouped.h) into
// one bf16 y [M, all heads * 128] per launch, then each launch's RoPE pass as in kGemmRope. The
// grouped kernel reads its problem list from a workspace that a one-block kernel fills first (both
// on the caller's stream; the workspace and y are the caller's stream's blocks, freed on return and
// reused only by work ordered after these kernels).
void launch_grouped(const char* op, QkvParams* const* ps, const at::Tensor* xs, int n, QkvConfig cfg,
                    QkvOutputs& outs) {
  GroupedGemmParams gp;
  gp.device = xs[0].get_device();
  gp.sm_count = ps[0]->sm_count;
  gp.stream = ps[0]->stream;
  // One allocation for every launch's y and the GEMM's workspace: y placed from offset 0 first (the
  // problems' alignment checks only see offsets that are multiples of 256), moved onto the block once
  // the workspace size is known.
  ProjectionY y[2];
  int64_t y_offset[2] = {}, y_bytes = 0;
  int first_problem[2] = {};
  int64_t rows_cols[kGroupedMaxProblems][2] = {};
  TORCH_CHECK(n >= 1 && n <= 2, op, ": internal error: ", num(n), " launches for the grouped GEMM");
  for (int i = 0; i < n; ++i) {
    const QkvParams& p = *ps[i];
    first_problem[i] = gp.count;
    if (p.m == 0) continue;
    y_offset[i] = y_bytes;
    y[i] = projection_y_at(p, reinterpret_cast<void*>(static_cast<uintptr_t>(y_bytes) + 256));
    y_bytes += projection_y_bytes(p);
    for (int g = 0; g < p.num_groups; ++g) {
      TORCH_CHECK(gp.count < kGroupedMaxProblems, op, ": the grouped GEMM takes at most ", num(kGroupedMaxProblems),
                  " projections");
      const GroupedProblem& q = gp.prob[gp.count] = grouped_problem(p, g, y[i].ptr[g], y[i].ld);
      rows_cols[gp.count][0] = q.m;
      rows_cols[gp.count][1] = q.n;
      ++gp.count;
    }
  }
  if (gp.count == 0) return;
  // A token-major v (QkvOutputs::v_token_major) is written by its problem straight into v's rows; y keeps
  // its columns unused, and the pass below skips the group. Only for one launch (007): with both of
  // 034's inputs in the grouped GEMM (its 5184-row workloads) it measured 0.1-1.3% slower per layer, in
  // every round of an in-process A/B (bench/NOTES.md twenty-sixth session call 4), where 007 B1 S1024
  // gained 1.8%.
  int direct_group[2] = {-1, -1};
  if (n == 1 && ps[0]->m > 0) {
    for (int g = 0; g < ps[0]->num_groups; ++g) {
      if (!outs.token_major(&ps[0]->groups[g])) continue;
      int64_t ld = 0;
      gp.prob[first_problem[0] + g].d = outs.make_token_major_v(&ld);
      gp.prob[first_problem[0] + g].ldd = ld;
      direct_group[0] = g;
    }
  }
  for (int i = 0; i < gp.count; ++i) {
    TORCH_CHECK((gp.prob[i].bias != nullptr) == (gp.prob[0].bias != nullptr), op,
                ": the grouped configs need the biases to all be given or all be None");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(gp.prob[i].bias) % 16 == 0, op,
                ": the grouped configs need biases that start at 16-byte aligned addresses");
  }
  if (cfg != QkvConfig::kGrouped128 && cfg != QkvConfig::kGrouped64)
    cfg = grouped_tile_for(rows_cols, gp.count, gp.sm_count);
  const GroupedTile tile = cfg == QkvConfig::kGrouped64 ? GroupedTile::k64x192 : GroupedTile::k128x192;
  const size_t bytes = grouped_gemm_workspace_bytes(gp, tile);
  TORCH_CHECK(bytes > 0, op, ": the grouped GEMM cannot take these projections (", num(gp.count),
              " problems, K=", num(gp.prob[0].k), ")");
  const at::Tensor block = byte_block(xs[0], y_bytes + static_cast<int64_t>(bytes));
  char* base = static_cast<char*>(block.data_ptr());
  for (int i = 0; i < n; ++i) {
    const QkvParams& p = *ps[i];
    if (p.m == 0) continue;
    y[i] = projection_y_at(p, base + y_offset[i]);
    for (int g = 0; g < p.num_groups; ++g)
      if (g != direct_group[i]) gp.prob[first_problem[i] + g].d = y[i].ptr[g];
  }
  VLATTN_HOST_MARK("qkv.grouped.alloc");
  cudaError_t err = grouped_gemm_sm90(gp, tile, base + y_bytes, bytes);
  TORCH_CHECK(err == cudaSuccess, op, ": grouped projection GEMM failed: ", cudaGetErrorString(err));
  // One pass per launch: merged into one kernel they measured 0.5-0.9% slower on the grouped shapes
  // (H200, bench/NOTES.md thirteenth session call 3) and again 1.7-2.9% slower in every round
  // (twenty-eighth session call 1), unlike the all-GEMMs plan's.
  for (int i = 0; i < n; ++i) {
    if (ps[i]->m == 0) continue;
    PendingRope pend{ps[i], y[i], at::Tensor()};  // y lives in `block`
    if (direct_group[i] >= 0) {  // the pass covers the other groups: their outputs first (PendingRope)
      outs.materialize(ps[i]);
      bool skip[kQkvMaxGroups] = {};
      skip[direct_group[i]] = true;
      int index[kQkvMaxGroups] = {};
      pend.reduced = true;
      pend.rest = groups_except(*ps[i], skip, index);
      for (int g = 0; g < ps[i]->num_groups; ++g) {
        if (skip[g]) continue;
        pend.y.ptr[index[g]] = y[i].ptr[g];
        pend.y.ldy[index[g]] = y[i].ldy[g];
      }
      if (pend.rest.num_groups == 0) continue;
    }
    launch_rope_passes(op, &pend, 1, outs);
  }
}

// "grouped" (tile by wave count), "grouped128", "grouped64": the grouped path for every launch of
// the op. Returns kM128 (unused) when config names no grouped path.
QkvConfig grouped_config(c10::string_view config, bool* grouped) {
  *grouped = true;
  if (config == "grouped") return QkvConfig::kGemmRope;  // any non-grouped value: the tile is picked later
  if (config == "grouped128") return QkvConfig::kGrouped128;
  if (config == "grouped64") return QkvConfig::kGrouped64;
  *grouped = false;
  return QkvConfig::kM128;
}

void launch(const char* op, QkvParams& p, const at::Tensor& x, c10::string_view config, QkvOutputs& outs) {
  int64_t heads = 0;
  bool even_groups = true, bias_aligned = true;
  for (int g = 0; g < p.num_groups; ++g) {
    heads += p.groups[g].heads;
    even_groups = even_groups && p.groups[g].heads % 2 == 0;
    bias_aligned = bias_aligned && reinterpret_cast<uintptr_t>(p.groups[g].bias) % 16 == 0;
  }
  const QkvConfig cfg = pick_config(config, op, p.m, heads, p.sm_count, even_groups, bias_aligned);
  if (p.m == 0) return;
  if (cfg == QkvConfig::kGemmRope) {
    launch_gemm_rope(op, p, x, outs);
    return;
  }
  outs.materialize(&p);
  // The grouped names never get here: launch_all sends them to launch_grouped for every launch.
  const cudaError_t err = qkv_rope_sm90(p, cfg);
  VLATTN_HOST_MARK("qkv.fused");
  if (err == cudaErrorNotSupported) {  // the kernel's host side refused the shape (qkv/qkv_sm90.cu)
    std::string group_heads;
    for (int g = 0; g < p.num_groups; ++g) group_heads += (g ? "/" : "") + num(p.groups[g].heads);
    TORCH_CHECK(false, op, ": config '", std::string(config.empty() ? "(automatic)" : config), "' cannot run M=",
                num(p.m), ", K=", num(p.k), " with heads per group ", group_heads,
                " (c256 needs an even head count in every group and at most one wave of head-pair tiles; "
                "splitk<N> needs at least N k-tiles of 64; every config at most 2^30 tiles)");
  }
  TORCH_CHECK(err == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(err));
}

// VLATTN_QKV_PLAN=0 (a dev switch) turns the op-level plan (qkv_op_plan) off: each launch by itself.
bool op_plan_enabled() {
  return dev_switch_on(DevSwitch::kQkvPlan);
}

// 007's grouped plan from this many rows (qkv_op_plan): kQkvGroupedMinRows, or VLATTN_QKV_GROUPED_MIN_M
// (a dev switch) for an A/B.
int64_t grouped_min_rows() {
  return dev_switch(DevSwitch::kQkvGroupedMinM);
}

// qkv_op_plan for these launches, restricted to what the biases allow: the grouped GEMM needs them
// all given or all None, both two-pass paths 16-byte aligned starts.
QkvPlan plan_for(QkvParams* const* ps, int n) {
  int64_t rows[2] = {};
  int64_t rows_cols[kGroupedMaxProblems][2] = {};
  int count = 0;
  bool aligned = true, all_or_none = true;
  const bool first_bias = ps[0]->groups[0].bias != nullptr;
  for (int i = 0; i < n && i < 2; ++i) {
    rows[i] = ps[i]->m;
    for (int g = 0; g < ps[i]->num_groups && count < kGroupedMaxProblems; ++g, ++count) {
      rows_cols[count][0] = ps[i]->m;
      rows_cols[count][1] = int64_t(ps[i]->groups[g].heads) * kQkvHeadDim;
      aligned = aligned && reinterpret_cast<uintptr_t>(ps[i]->groups[g].bias) % 16 == 0;
      all_or_none = all_or_none && (ps[i]->groups[g].bias != nullptr) == first_bias;
    }
  }
  const QkvPlan plan = qkv_op_plan(rows, n, rows_cols, count, ps[0]->sm_count, grouped_min_rows(), grouped_max_rows());
  if (!aligned || (plan == QkvPlan::kGrouped && !all_or_none)) return QkvPlan::kPerLaunch;
  return plan;
}

// The op's launches (007: one; 034: the text's Q, then the vision tokens' K and V) on the current
// stream of xs[0]'s device.
void launch_all(const char* op, QkvParams* const* ps, const at::Tensor* xs, int n, c10::string_view config,
                QkvOutputs& outs) {
  const c10::cuda::CUDAGuard guard(xs[0].device());
  const int sm_count = at::cuda::getDeviceProperties(xs[0].get_device())->multiProcessorCount;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(xs[0].get_device()).stream();
  for (int i = 0; i < n; ++i) {
    ps[i]->sm_count = sm_count;
    ps[i]->stream = stream;
  }
  bool grouped = false;
  const QkvConfig gcfg = grouped_config(config, &grouped);
  if (grouped) return launch_grouped(op, ps, xs, n, gcfg, outs);
  if ((config.empty() || config == "auto") && op_plan_enabled()) {
    const QkvPlan plan = plan_for(ps, n);
    if (plan == QkvPlan::kGrouped) return launch_grouped(op, ps, xs, n, grouped_plan_tile(n, ps[0]->m), outs);
    if (plan == QkvPlan::kGemmAll) {
      // Merged: every launch's GEMMs, then one RoPE pass for all; otherwise a pass after each.
      TORCH_CHECK(n <= 2, op, ": internal error: ", num(n), " launches");
      const bool merge = rope_merge_enabled();
      PendingRope pend[2];
      int pending = 0;
      for (int i = 0; i < n; ++i)
        if (ps[i]->m > 0 && launch_gemm_rope(op, *ps[i], xs[i], outs, merge ? &pend[pending] : nullptr)) ++pending;
      if (pending > 0) launch_rope_passes(op, pend, pending, outs);
      return;
    }
  }
  for (int i = 0; i < n; ++i) launch(op, *ps[i], xs[i], config, outs);
}

void check_sizes_fit(const char* op, int64_t m, int64_t k) {
  TORCH_CHECK(m <= std::numeric_limits<int>::max() / 2 && k <= std::numeric_limits<int>::max() && k > 0, op,
              ": rows and hidden size must be positive 32-bit values; got M=", num(m), " K=", num(k));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> mrope_qkv_ex(
    const at::Tensor& x, const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    const at::Tensor& cos, const at::Tensor& sin, c10::IntArrayRef mrope_section, c10::string_view config,
    bool v_token_major) {
  const char* op = "vlattn.mrope_qkv";
  TORCH_CHECK(x.is_cuda(), op, ": the native backend needs CUDA tensors; got ", x.device());
  check_on(op, "hidden_states", x, x, at::kBFloat16);
  TORCH_CHECK(q_weight.dim() == 2, op, ": q_weight must be 2-D; got ", dims_str(q_weight.sizes()));
  const int64_t k = q_weight.size(1);
  QkvParams p;
  p.ldx = check_activations(op, "hidden_states", x, k);
  check_sm90_device(op, x);
  const int64_t batch = x.size(0), seq = x.size(1), m = batch * seq;
  check_sizes_fit(op, m, k);

  const auto [hq, hkv] = check_heads(op, "q_weight", q_weight, "k_weight", k_weight, "v_weight", v_weight);

  for (auto [name, t] : {std::pair<const char*, const at::Tensor*>{"cos", &cos}, {"sin", &sin}}) {
    check_on(op, name, *t, x, at::kBFloat16);
    TORCH_CHECK(t->dim() == 4 && t->size(0) == 3 && t->size(1) == batch && t->size(2) == seq &&
                    t->size(3) == kQkvHeadDim,
                op, ": ", name, " must be [3, B, S, 128] = [3, ", num(batch), ", ", num(seq), ", 128]; got ",
                dims_str(t->sizes()));
  }
  // The kernels read table rows with unit stride and one set of strides for both tables: any other view of
  // [3, B, S, 128] (an expanded batch, a strided last dim) is copied once.
  const bool tables_as_given = cos.stride(3) == 1 && cos.strides() == sin.strides();
  const at::Tensor cos_t = tables_as_given ? cos : cos.contiguous();
  const at::Tensor sin_t = tables_as_given ? sin : sin.contiguous();
  int64_t total = 0;
  for (int64_t s : mrope_section) {
    TORCH_CHECK(s > 0, op, ": mrope_section entries must be positive; got ", dims_str(mrope_section));
    total += s;
  }
  TORCH_CHECK(total == kQkvHeadDim && mrope_section.size() <= 16, op,
              ": mrope_section must sum to head_dim = 128 (at most 16 chunks); got ", dims_str(mrope_section));

  VLATTN_HOST_MARK("qkv.checked");
  set_rows(p, x, k);
  p.num_groups = 3;
  p.groups[0] = make_group(op, "q_weight", q_weight, "q_bias", q_bias, x, k, RopeMode::kTable);
  p.groups[1] = make_group(op, "k_weight", k_weight, "k_bias", k_bias, x, k, RopeMode::kTable);
  p.groups[2] = make_group(op, "v_weight", v_weight, "v_bias", v_bias, x, k, RopeMode::kNone);
  at::Tensor q, kk, v;
  QkvOutputs outs(x.options(), batch, &q, &p.groups[0], hq, seq, &kk, &p.groups[1], &v, &p.groups[2], hkv, seq);
  outs.v_token_major = v_token_major;
  p.rope.cos = cos_t.data_ptr();
  p.rope.sin = sin_t.data_ptr();
  p.rope.tab_plane_stride = cos_t.stride(0);
  p.rope.tab_batch_stride = cos_t.stride(1);
  p.rope.tab_seq_stride = cos_t.stride(2);
  int sections[16];
  for (size_t i = 0; i < mrope_section.size(); ++i) sections[i] = static_cast<int>(mrope_section[i]);
  for (int c = 0; c < kQkvHeadDim; ++c)
    p.rope.plane_of_channel[c] = static_cast<int8_t>(rope::mrope_plane(c, sections, static_cast<int>(mrope_section.size())));
  // 16-byte table reads: every 8-channel chunk within one plane (both the seed's and HF's splits) and
  // 16-byte aligned rows of both tables.
  bool vec16 = reinterpret_cast<uintptr_t>(p.rope.cos) % 16 == 0 && reinterpret_cast<uintptr_t>(p.rope.sin) % 16 == 0 &&
               p.rope.tab_plane_stride % 8 == 0 && p.rope.tab_batch_stride % 8 == 0 && p.rope.tab_seq_stride % 8 == 0;
  for (int c = 0; c < kQkvHeadDim && vec16; ++c) vec16 = p.rope.plane_of_channel[c] == p.rope.plane_of_channel[c & ~7];
  p.rope.tab_vec16 = vec16;
  QkvParams* launches[1] = {&p};
  RECORD_USER_SCOPE("vlattn.qkv.launch");
  launch_all(op, launches, &x, 1, config, outs);
  outs.materialize();
  return {q, kk, v};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> mrope_qkv(
    const at::Tensor& x, const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    const at::Tensor& cos, const at::Tensor& sin, c10::IntArrayRef mrope_section, c10::string_view config) {
  return mrope_qkv_ex(x, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos, sin, mrope_section, config, false);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vision_qkv_ex(
    const at::Tensor& lang, const at::Tensor& vision, const at::Tensor& position_ids, const at::Tensor& grid_thw,
    const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    double rope_theta, c10::IntArrayRef thw_split, c10::string_view config, bool v_token_major) {
  const char* op = "vlattn.vision_qkv";
  TORCH_CHECK(lang.is_cuda(), op, ": the native backend needs CUDA tensors; got ", lang.device());
  check_on(op, "language_hidden_states", lang, lang, at::kBFloat16);
  check_on(op, "vision_hidden_states", vision, lang, at::kBFloat16);
  TORCH_CHECK(q_weight.dim() == 2, op, ": q_proj_weight must be 2-D; got ", dims_str(q_weight.sizes()));
  const int64_t k = q_weight.size(1);
  QkvParams pq, pkv;
  pq.ldx = check_activations(op, "language_hidden_states", lang, k);
  pkv.ldx = check_activations(op, "vision_hidden_states", vision, k);
  check_sm90_device(op, lang);
  const int64_t batch = lang.size(0), lq = lang.size(1), lv = vision.size(1);
  TORCH_CHECK(vision.size(0) == batch, op, ": vision_hidden_states must have batch ", num(batch), "; got ",
              dims_str(vision.sizes()));
  check_sizes_fit(op, batch * lq, k);
  check_sizes_fit(op, batch * lv, k);
  const auto [hq, hkv] =
      check_heads(op, "q_proj_weight", q_weight, "k_proj_weight", k_weight, "v_proj_weight", v_weight);

  check_on(op, "language_position_ids", position_ids, lang, at::kLong);
  TORCH_CHECK(position_ids.dim() == 2 && position_ids.size(0) == batch && position_ids.size(1) == lq, op,
              ": language_position_ids must be [B, Lq] = [", num(batch), ", ", num(lq), "]; got ",
              dims_str(position_ids.sizes()));
  check_on(op, "vision_grid_thw", grid_thw, lang, at::kLong);
  TORCH_CHECK(grid_thw.dim() == 3 && grid_thw.size(0) == batch && grid_thw.size(1) == lv && grid_thw.size(2) == 3, op,
              ": vision_grid_thw must be [B, Lv, 3] = [", num(batch), ", ", num(lv), ", 3]; got ",
              dims_str(grid_thw.sizes()));
  TORCH_CHECK(thw_split.size() == 3, op, ": thw_split must have 3 entries (t, h, w); got ", dims_str(thw_split));
  int64_t total = 0;
  for (int64_t s : thw_split) {
    TORCH_CHECK(s > 0 && s % 2 == 0, op, ": thw_split entries must be positive and even; got ", dims_str(thw_split));
    total += s;
  }
  TORCH_CHECK(total == kQkvHeadDim, op, ": thw_split must sum to head_dim = 128; got ", dims_str(thw_split));
  TORCH_CHECK(std::isfinite(rope_theta) && rope_theta > 0, op, ": rope_theta must be positive and finite; got ",
              std::to_string(rope_theta));

  VLATTN_HOST_MARK("qkv.checked");

  set_rows(pq, lang, k);
  pq.num_groups = 1;
  pq.groups[0] = make_group(op, "q_proj_weight", q_weight, "q_proj_bias", q_bias, lang, k, RopeMode::kPos1D);
  pq.rope.pos = position_ids.data_ptr<int64_t>();
  pq.rope.pos_batch_stride = position_ids.stride(0);
  pq.rope.pos_seq_stride = position_ids.stride(1);
  pq.rope.theta = static_cast<float>(rope_theta);

  set_rows(pkv, vision, k);
  pkv.num_groups = 2;
  pkv.groups[0] = make_group(op, "k_proj_weight", k_weight, "k_proj_bias", k_bias, lang, k, RopeMode::kPos3D);
  pkv.groups[1] = make_group(op, "v_proj_weight", v_weight, "v_proj_bias", v_bias, lang, k, RopeMode::kNone);
  pkv.rope.pos = grid_thw.data_ptr<int64_t>();
  pkv.rope.pos_batch_stride = grid_thw.stride(0);
  pkv.rope.pos_seq_stride = grid_thw.stride(1);
  pkv.rope.pos_comp_stride = grid_thw.stride(2);
  pkv.rope.theta = static_cast<float>(rope_theta);
  for (int i = 0; i < 3; ++i) pkv.rope.split[i] = static_cast<int>(thw_split[i]);

  at::Tensor q, kk, v;
  QkvOutputs outs(lang.options(), batch, &q, &pq.groups[0], hq, lq, &kk, &pkv.groups[0], &v, &pkv.groups[1], hkv, lv);
  outs.v_token_major = v_token_major;
  QkvParams* launches[2] = {&pq, &pkv};
  const at::Tensor inputs[2] = {lang, vision};
  RECORD_USER_SCOPE("vlattn.qkv.launch");
  launch_all(op, launches, inputs, 2, config, outs);
  outs.materialize();
  return {q, kk, v};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vision_qkv(
    const at::Tensor& lang, const at::Tensor& vision, const at::Tensor& position_ids, const at::Tensor& grid_thw,
    const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    double rope_theta, c10::IntArrayRef thw_split, c10::string_view config) {
  return vision_qkv_ex(lang, vision, position_ids, grid_thw, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias,
                       rope_theta, thw_split, config, false);
}

}  // namespace vlattn

TORCH_LIBRARY_FRAGMENT(vlattn, m) {
  m.def(
      "mrope_qkv(Tensor hidden_states, Tensor q_weight, Tensor? q_bias, Tensor k_weight, Tensor? k_bias, "
      "Tensor v_weight, Tensor? v_bias, Tensor cos, Tensor sin, *, int[] mrope_section=[32, 48, 48], "
      "str config=\"\") -> (Tensor, Tensor, Tensor)");
  m.def(
      "vision_qkv(Tensor language_hidden_states, Tensor vision_hidden_states, Tensor language_position_ids, "
      "Tensor vision_grid_thw, Tensor q_proj_weight, Tensor? q_proj_bias, Tensor k_proj_weight, "
      "Tensor? k_proj_bias, Tensor v_proj_weight, Tensor? v_proj_bias, *, float rope_theta=10000.0, "
      "int[] thw_split=[42, 42, 44], str config=\"\") -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(vlattn, CUDA, m) {
  m.impl("mrope_qkv", &vlattn::mrope_qkv);
  m.impl("vision_qkv", &vlattn::vision_qkv);
}

// CPU tensors reach the same entry points and get "needs CUDA tensors" instead of the dispatcher's
// generic message.
TORCH_LIBRARY_IMPL(vlattn, CPU, m) {
  m.impl("mrope_qkv", &vlattn::mrope_qkv);
  m.impl("vision_qkv", &vlattn::vision_qkv);
}
