// vlattn::attention: tensor checks -> AttentionParams -> the sm_90a fused GQA attention kernel.
//
//   attention(Tensor q, Tensor k, Tensor v, Tensor? mask=None, *, bool causal=False, float? scale=None,
//             bool skip=True) -> Tensor
//
// q [B, Hq, Sq, 128], k/v [B, Hkv, Sk, 128] bf16 (Hq % Hkv == 0; query head h reads KV head
// h / (Hq / Hkv)), head_dim contiguous and the other strides multiples of 8 elements (TMA: e.g. a
// token-major [B, S, H, 128] buffer viewed as [B, H, S, 128], read without a copy); mask: optional additive bf16 [B or 1, 1, Sq, >= Sk] (only the first Sk columns are
// read; unit column stride, any other strides); causal: keys j > i get -inf (top-left aligned);
// scale: multiplier of the scores, default 128^-0.5. Returns o [B, Sq, Hq * 128] bf16 (token-major, the
// O projection's input), i.e. reference.attention(q, k, v, mask, ...).transpose(1, 2).reshape(B, Sq, -1).
// Deliberate difference from the reference: a row whose keys are all -inf gives 0 (reference: NaN).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>

#include "attention/attention_params.h"
#include "attention/attention_rules.h"  // attn_rules::LaunchPlan
#include "launch/host_trace.h"
#include "ops/check_strings.h"
#include "ops/ops.h"
#include "ops/scratch.h"

namespace vlattn {

namespace {

using check_strings::aligned16;
using check_strings::dims_str;
using check_strings::num;

constexpr const char* kOp = "vlattn.attention";

void check_qkv(const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kBFloat16, kOp, ": ", name, " must be bfloat16; got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 4, kOp, ": ", name, " must be 4-D [B, heads, seq, ", num(kAttnHeadDim), "]; got ",
              dims_str(t.sizes()));
  TORCH_CHECK(t.size(3) == kAttnHeadDim, kOp, ": ", name, " must have head_dim ", num(kAttnHeadDim),
              " (the only size the kernel is built for); got ", dims_str(t.sizes()));
  TORCH_CHECK(t.stride(3) == 1, kOp, ": ", name, " must have unit stride in head_dim; got sizes ",
              dims_str(t.sizes()), " strides ", dims_str(t.strides()), " (call .contiguous() first)");
  for (int d = 0; d < 3; ++d)  // TMA: byte strides multiples of 16 and below 2^40 (size-1 dims: any stride)
    TORCH_CHECK(t.size(d) <= 1 || (t.stride(d) > 0 && t.stride(d) % 8 == 0 && t.stride(d) < (int64_t(1) << 39)),
                kOp, ": ", name, "'s batch, head and seq strides must be positive multiples of 8 elements (16 ",
                "bytes, for TMA); got sizes ", dims_str(t.sizes()), " strides ", dims_str(t.strides()),
                " (call .contiguous() first)");
  TORCH_CHECK(t.numel() == 0 || aligned16(t), kOp, ": ", name,
              " must start at a 16-byte aligned address (TMA); got a view at element offset ", num(t.storage_offset()));
  TORCH_CHECK(t.size(0) <= std::numeric_limits<int>::max() && t.size(1) <= std::numeric_limits<int>::max() &&
                  t.size(2) <= std::numeric_limits<int>::max(),
              kOp, ": ", name, " dims must fit in 32 bits; got ", dims_str(t.sizes()));
}

// The kernel's {batch, head, seq} element strides of t: a dimension of size 1 gets the stride it would
// have in a contiguous tensor (PyTorch reports any value there; TMA needs a multiple of 16 bytes).
void kernel_strides(const at::Tensor& t, int64_t (&out)[3]) {
  const int64_t natural[3] = {t.size(1) * t.size(2) * kAttnHeadDim, t.size(2) * kAttnHeadDim, kAttnHeadDim};
  for (int d = 0; d < 3; ++d) out[d] = t.size(d) <= 1 ? natural[d] : t.stride(d);
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const c10::optional<at::Tensor>& mask, bool causal, c10::optional<double> scale, bool skip) {
  // A user's mask may come from the kernel just before this call (even one of ours that triggers its
  // dependents before finishing): the pre-pass reads it only after its wait.
  return attention_in_layer(q, k, v, mask, causal, scale, skip, false);
}

at::Tensor attention_in_layer(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const c10::optional<at::Tensor>& mask, bool causal, c10::optional<double> scale,
                              bool skip, bool mask_settled) {
  check_qkv("q", q);
  check_qkv("k", k);
  check_qkv("v", v);
  const int64_t batch = q.size(0), heads_q = q.size(1), seqlen_q = q.size(2);
  const int64_t heads_kv = k.size(1), seqlen_k = k.size(2);
  TORCH_CHECK(k.size(0) == batch, kOp, ": k must have the batch size of q (", num(batch), "); got k ",
              dims_str(k.sizes()));
  TORCH_CHECK(v.sizes() == k.sizes(), kOp, ": v must have the shape of k ", dims_str(k.sizes()), "; got ",
              dims_str(v.sizes()));
  TORCH_CHECK(heads_kv >= 1 || batch == 0, kOp, ": k must have at least one head; got ", dims_str(k.sizes()));
  TORCH_CHECK(heads_kv == 0 || heads_q % heads_kv == 0, kOp, ": q's head count (", num(heads_q),
              ") must be a multiple of k's head count (", num(heads_kv), ")");
  for (auto [name, t] : {std::pair<const char*, const at::Tensor*>{"k", &k}, {"v", &v}})
    TORCH_CHECK(t->device() == q.device(), kOp, ": ", name, " must be on ", q.device(), " like q; got ", t->device());

  int64_t mask_batch_stride = 0, mask_row_stride = 0;
  if (mask.has_value()) {
    const at::Tensor& m = *mask;
    TORCH_CHECK(m.scalar_type() == at::kBFloat16, kOp, ": mask must be bfloat16 (additive, like q); got ",
                m.scalar_type());
    TORCH_CHECK(m.device() == q.device(), kOp, ": mask must be on ", q.device(), " like q; got ", m.device());
    TORCH_CHECK(m.dim() == 4 && (m.size(0) == batch || m.size(0) == 1) && m.size(1) == 1 && m.size(2) == seqlen_q &&
                    m.size(3) >= seqlen_k,
                kOp, ": mask must be [B or 1, 1, Sq, >= Sk] = [", num(batch), " or 1, 1, ", num(seqlen_q), ", >= ",
                num(seqlen_k), "]; got ", dims_str(m.sizes()));
    TORCH_CHECK(m.stride(3) == 1 || m.size(3) <= 1, kOp, ": mask must have unit stride in its last dim; got strides ",
                dims_str(m.strides()));
    mask_batch_stride = m.size(0) == 1 ? 0 : m.stride(0);
    mask_row_stride = m.stride(2);
  }
  double scale_value = 1.0 / std::sqrt(static_cast<double>(kAttnHeadDim));
  if (scale.has_value()) {
    scale_value = *scale;
    TORCH_CHECK(std::isfinite(scale_value), kOp, ": scale must be finite; got ", std::to_string(scale_value));
  }

  check_sm90_device(kOp, q);
  VLATTN_HOST_MARK("attn.checked");

  at::Tensor out = scratch_empty({batch, seqlen_q, heads_q * kAttnHeadDim}, q.options());
  VLATTN_HOST_MARK("attn.out");
  if (batch == 0 || seqlen_q == 0 || heads_q == 0) return out;
  if (seqlen_k == 0) return out.zero_();  // softmax over no keys: the reference's P v is an empty sum

  const c10::cuda::CUDAGuard guard(q.device());
  AttentionParams p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  kernel_strides(q, p.q_strides);
  kernel_strides(k, p.k_strides);
  kernel_strides(v, p.v_strides);
  p.o = out.data_ptr();
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.seqlen_q = static_cast<int>(seqlen_q);
  p.seqlen_k = static_cast<int>(seqlen_k);
  if (mask.has_value()) {
    p.mask = mask->data_ptr();
    p.mask_batch_stride = mask_batch_stride;
    p.mask_row_stride = mask_row_stride;
  }
  p.scale = static_cast<float>(scale_value);
  p.causal = causal;
  p.skip = skip;
  p.mask_settled = mask_settled;
  p.device = q.get_device();
  p.sm_count = at::cuda::getDeviceProperties(p.device)->multiProcessorCount;
  p.stream = at::cuda::getCurrentCUDAStream(p.device).stream();

  // The launch's plan, read once: it sizes the scratch (mask summary, tail-split partials) that the launch then uses,
  // from the caching allocator (capturable in CUDA graphs; no host sync).
  attn_rules::LaunchPlan plan;
  at::Tensor workspace;
  p.workspace_bytes = attention_plan(p, &plan);
  if (p.workspace_bytes > 0) {
    workspace = scratch_bytes(q.options(), static_cast<int64_t>(p.workspace_bytes));
    p.workspace = workspace.data_ptr();
  }
  VLATTN_HOST_MARK("attn.ws");

  AttentionStatus status;
  {
    RECORD_USER_SCOPE("vlattn.attention.launch");  // tensor maps, mask pre-pass, kernel launch
    status = attention_sm90(p, plan);
  }
  VLATTN_HOST_MARK("attn.launch");
  TORCH_CHECK(status == AttentionStatus::kSuccess, kOp, ": kernel failed for B=", num(batch), " Hq=", num(heads_q),
              " Hkv=", num(heads_kv), " Sq=", num(seqlen_q), " Sk=", num(seqlen_k), ": ",
              attention_status_string(status));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace vlattn

// The schema lives here, beside its implementation; csrc/torch_bindings.cpp owns TORCH_LIBRARY(vlattn).
TORCH_LIBRARY_FRAGMENT(vlattn, m) {
  m.def("attention(Tensor q, Tensor k, Tensor v, Tensor? mask=None, *, bool causal=False, float? scale=None, "
        "bool skip=True) -> Tensor");
}

TORCH_LIBRARY_IMPL(vlattn, CUDA, m) { m.impl("attention", &vlattn::attention); }

// On CPU the same entry point validates the arguments, then raises "needs CUDA tensors" instead of the
// dispatcher's generic "could not run ... with arguments from the 'CPU' backend".
TORCH_LIBRARY_IMPL(vlattn, CPU, m) { m.impl("attention", &vlattn::attention); }
