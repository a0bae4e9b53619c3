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

#include <cmath>
#include <string>
#include <tuple>

#include "launch/dev_switch.h"
#include "launch/host_trace.h"
#include "ops/check_strings.h"
#include "ops/ops.h"
#include "ops/scratch.h"

namespace vlattn {

namespace {

using check_strings::dims_str;
using check_strings::num;

constexpr double kScale = 0.08838834764831845;  // 128 ** -0.5, both layers' score scale

// out= may be any view that the caller's validation accepted (no shared elements); the GEMM's TMA store
// writes rows with unit column stride and a row stride that is a multiple of 8, so another view (e.g. a
// [B, S, N] view of an [S, B, N] buffer) gets the result through one copy.
at::Tensor output_projection(const at::Tensor& o, const at::Tensor& o_weight, const std::string& o_config,
                             c10::optional<at::Tensor>& out) {
  if (!out.has_value()) return linear(o, o_weight, c10::nullopt, o_config);
  if (linear_out_writable(*out)) return linear_out(o, o_weight, c10::nullopt, o_config, *out);
  return out->copy_(linear(o, o_weight, c10::nullopt, o_config));
}

// The layers' own contract where the component ops are more permissive (the Python caller re-validates
// with the layer's messages when this raises): the mask is exactly [B or 1, 1, S, S] (the attention op
// takes wider rows); rope_theta > 1 (the QKV op takes any positive base); at least one vision token when
// there are text tokens (the attention op returns zeros over 0 keys).
void check_layer_mask(const c10::optional<at::Tensor>& mask, const at::Tensor& x) {
  if (!mask.has_value() || x.dim() != 3) return;
  const at::Tensor& m = *mask;
  const int64_t b = x.size(0), s = x.size(1);
  TORCH_CHECK(m.dim() == 4 && (m.size(0) == 1 || m.size(0) == b) && m.size(1) == 1 && m.size(2) == s &&
                  m.size(3) == s,
              "mrope_self_attention: attention_mask must be [", num(b), " or 1, 1, ", num(s), ", ", num(s), "]; got ",
              dims_str(m.sizes()));
}

at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// v straight from its projection GEMM, token-major, where the QKV path computes it with a plain GEMM
// (mrope_qkv_ex): the RoPE pass skips v's head-major copy and the attention reads v through its
// strides. VLATTN_QKV_V_TOKEN_MAJOR=0 (a dev switch) keeps v head-major. Same bits either way.
bool v_token_major() { return dev_switch_on(DevSwitch::kQkvVTokenMajor); }

// The token rows of a [B, S, hidden] activation (B x S), or -1 for another rank (the component ops refuse it).
int64_t token_rows(const at::Tensor& t) { return t.dim() == 3 ? t.size(0) * t.size(1) : -1; }

// The bytes of one call's scratch block (ops/scratch.h): the upper bounds of its intermediates, each
// rounded to the block's 512-byte granularity: q, k and v; the projections' y (every group through it);
// the attention's output; the 1-D / 3-D RoPE tables (cos and sin in fp32 per row); 1 MB for the grouped
// GEMM's arguments, the mask summary and the split-K workspaces. 0 (no block) with the switch off, for
// shapes the component ops will refuse, and beyond the cap (layer_scratch_cap_bytes). A request the block
// cannot hold is an ordinary at::empty, so a low bound costs time, never correctness.
int64_t scratch_bound(int64_t q_rows, int64_t kv_rows, const at::Tensor& q_weight, const at::Tensor& k_weight) {
  const int64_t cap = layer_scratch_cap_bytes();
  if (cap <= 0 || q_weight.dim() != 2 || k_weight.dim() != 2) return 0;
  const int64_t q_cols = q_weight.size(0), kv_cols = k_weight.size(0);
  constexpr int64_t kLimit = int64_t(1) << 24;  // keeps every product below in int64; far beyond the 64 MB cap
  if (q_rows < 0 || kv_rows < 0 || q_rows > kLimit || kv_rows > kLimit || q_cols > kLimit || kv_cols > kLimit)
    return 0;
  const auto bf16 = [](int64_t elems) { return (2 * elems + 511) / 512 * 512; };
  const int64_t q = bf16(q_rows * q_cols), kv = bf16(kv_rows * kv_cols);
  const int64_t bytes = q + 2 * kv     // q, k, v
                        + q + 2 * kv   // y
                        + q            // the attention's output
                        + (q_rows + kv_rows) * 128 * 2 * 4 + (int64_t(1) << 20);
  return bytes <= cap ? bytes : 0;
}

}  // namespace

at::Tensor mrope_layer(const at::Tensor& hidden_states, const at::Tensor& q_weight, const at::Tensor& q_bias,
                       const at::Tensor& k_weight, const at::Tensor& k_bias, const at::Tensor& v_weight,
                       const at::Tensor& v_bias, const at::Tensor& o_weight, const at::Tensor& cos,
                       const at::Tensor& sin, const c10::optional<at::Tensor>& attention_mask,
                       std::vector<int64_t> mrope_section, bool causal, const std::string& o_config,
                       c10::optional<at::Tensor> out) {
  VLATTN_HOST_MARK("layer.enter");
  check_layer_mask(attention_mask, hidden_states);
  const int64_t rows = token_rows(hidden_states);
  LayerScratch scratch(hidden_states, scratch_bound(rows, rows, q_weight, k_weight));
  VLATTN_HOST_MARK("layer.scratch");
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
  TORCH_CHECK(std::isfinite(rope_theta) && rope_theta > 1, "vision_cross_attention: rope_theta must be a finite "
              "number > 1; got ", std::to_string(rope_theta));
  TORCH_CHECK(language_hidden_states.dim() != 3 || vision_hidden_states.dim() != 3 ||
                  language_hidden_states.size(1) == 0 || vision_hidden_states.size(1) > 0,
              "vision_cross_attention: vision_hidden_states must have at least one token: attention over 0 keys is "
              "undefined");
  LayerScratch scratch(language_hidden_states, scratch_bound(token_rows(language_hidden_states),
                                                             token_rows(vision_hidden_states), q_proj_weight,
                                                             k_proj_weight));
  VLATTN_HOST_MARK("layer.scratch");
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
