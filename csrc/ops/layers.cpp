// The native layers with a C++ host path: fused QKV projection -> attention -> O-projection GEMM in
// one call from Python (vlattn/ops.py takes it for the native backend). Three launches below 1024
// rows (four with the mask pre-pass; from 1024 rows the QKV stage is three GEMMs and a RoPE pass,
// csrc/ops/qkv.cpp), no host synchronization, every buffer from the caching allocator; the host
// work between the caller and the first launch is what the benchmark's timer sees, so no Python sits
// between the kernels. The component ops validate their arguments (errors name the argument); the
// Python caller re-validates with the layer's own messages when this raises.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/extension.h>

#include <tuple>

#include "launch/dev_switch.h"
#include "launch/host_trace.h"
#include "ops/ops.h"

namespace vlattn {

namespace {

constexpr double kScale = 0.08838834764831845;  // 128 ** -0.5, both layers' score scale

at::Tensor output_projection(const at::Tensor& o, const at::Tensor& o_weight, const std::string& o_config,
                             c10::optional<at::Tensor>& out) {
  if (out.has_value()) return linear_out(o, o_weight, c10::nullopt, o_config, *out);
  return linear(o, o_weight, c10::nullopt, o_config);
}

at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// v straight from its projection GEMM, token-major, where the QKV path computes it with a plain GEMM
// (mrope_qkv_ex): the RoPE pass skips v's head-major copy and the attention reads v through its
// strides. VLATTN_QKV_V_TOKEN_MAJOR=0 (a dev switch) keeps v head-major. Same bits either way.
bool v_token_major() { return dev_switch_on(DevSwitch::kQkvVTokenMajor); }

}  // namespace

at::Tensor mrope_layer(const at::Tensor& hidden_states, const at::Tensor& q_weight, const at::Tensor& q_bias,
                       const at::Tensor& k_weight, const at::Tensor& k_bias, const at::Tensor& v_weight,
                       const at::Tensor& v_bias, const at::Tensor& o_weight, const at::Tensor& cos,
                       const at::Tensor& sin, const c10::optional<at::Tensor>& attention_mask,
                       std::vector<int64_t> mrope_section, bool causal, const std::string& o_config,
                       c10::optional<at::Tensor> out) {
  VLATTN_HOST_MARK("layer.enter");
  // Host-path ranges (torch.profiler CPU events; a flag test when no profiler runs): bench/probe_host.py --ranges.
  at::Tensor q, k, v;
  {
    RECORD_USER_SCOPE("vlattn.layer.qkv");
    std::tie(q, k, v) = mrope_qkv_ex(dense(hidden_states), q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos,
                                     sin, mrope_section, "", v_token_major());
  }
  VLATTN_HOST_MARK("layer.qkv");
  c10::optional<at::Tensor> mask = attention_mask;
  if (mask.has_value() && mask->size(-1) > 1 && mask->stride(-1) != 1) mask = mask->contiguous();
  // The mask is settled for the pre-pass: the layer's kernels before it (the QKV projection, or
  // PyTorch's copy just above, which makes the launch an ordinary one) never write it, and the QKV
  // kernels pass their PDL wait before triggering (launch/pdl.h).
  at::Tensor o;
  {
    RECORD_USER_SCOPE("vlattn.layer.attention");
    o = attention_in_layer(q, k, v, mask, causal, kScale, true, /*mask_settled=*/true);
  }
  VLATTN_HOST_MARK("layer.attention");
  RECORD_USER_SCOPE("vlattn.layer.o_proj");
  at::Tensor result = output_projection(o, o_weight, o_config, out);
  VLATTN_HOST_MARK("layer.o_proj");
  return result;
}

at::Tensor cross_layer(const at::Tensor& language_hidden_states, const at::Tensor& vision_hidden_states,
                       const at::Tensor& language_position_ids, const at::Tensor& vision_grid_thw,
                       const at::Tensor& q_proj_weight, const at::Tensor& q_proj_bias, const at::Tensor& k_proj_weight,
                       const at::Tensor& k_proj_bias, const at::Tensor& v_proj_weight, const at::Tensor& v_proj_bias,
                       const at::Tensor& o_proj_weight, double rope_theta, std::vector<int64_t> thw_split,
                       const std::string& o_config, c10::optional<at::Tensor> out) {
  VLATTN_HOST_MARK("layer.enter");
  at::Tensor q, k, v;
  {
    RECORD_USER_SCOPE("vlattn.layer.qkv");
    std::tie(q, k, v) = vision_qkv_ex(dense(language_hidden_states), dense(vision_hidden_states),
                                      language_position_ids, vision_grid_thw, q_proj_weight, q_proj_bias,
                                      k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias, rope_theta, thw_split,
                                      "", v_token_major());
  }
  VLATTN_HOST_MARK("layer.qkv");
  at::Tensor o;
  {
    RECORD_USER_SCOPE("vlattn.layer.attention");
    o = attention(q, k, v, c10::nullopt, false, kScale, true);
  }
  VLATTN_HOST_MARK("layer.attention");
  RECORD_USER_SCOPE("vlattn.layer.o_proj");
  at::Tensor result = output_projection(o, o_proj_weight, o_config, out);
  VLATTN_HOST_MARK("layer.o_proj");
  return result;
}

}  // namespace vlattn
