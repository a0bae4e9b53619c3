// Host entry points of the ops registered in csrc/torch_bindings.cpp.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <tuple>
#include <vector>

namespace vlattn {

// Raises unless `t` lives on a Hopper (sm_90) GPU, naming `op` in the message.
void check_sm90_device(const char* op, const at::Tensor& t);

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  c10::string_view config);
at::Tensor& linear_out(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       c10::string_view config, at::Tensor& out);
// True when linear_out can write `out` in place: unit column stride, leading dims that collapse to evenly
// strided rows with a row stride that is a multiple of 8, a 16-byte aligned start (the TMA store's needs).
bool linear_out_writable(const at::Tensor& out);

// The GEMM config the wave model picks for M x N x K (python/vlattn/dispatch.py's analytic_config in
// C++; K does not enter the model): nullptr when no persistent config is compiled.
struct GemmKernelEntry;
const GemmKernelEntry* gemm_analytic_pick(int64_t m, int64_t n, int64_t k, int sm_count, int concurrent = 1);
// Its name ("" when none).
std::string gemm_analytic_config(int64_t m, int64_t n, int64_t k, int64_t sm_count, int64_t concurrent = 1);
// The committed tuned table's config for exactly M x N x K (nullptr when it has none; *splits its K split).
const GemmKernelEntry* gemm_tuned_pick(int64_t m, int64_t n, int64_t k, int* splits);
// vlattn.dispatch's order for the GEMMs that C++ picks (the QKV path's plain GEMMs): the tuned table when
// `tuned` and the GEMM runs alone (concurrent <= 1; the table's timings are of one GEMM alone), else the
// wave model. *splits: the K split of the pick (1 unless a '/splitk<N>' table entry). With `log_as` (a
// label: "qkv") and VLATTN_LOG set, the decision is printed to stderr once per distinct line.
const GemmKernelEntry* gemm_pick(int64_t m, int64_t n, int64_t k, int sm_count, int concurrent, bool tuned,
                                 int* splits, const char* log_as = nullptr);
// Its name as vlattn.dispatch.select_gemm_config writes it ("<config>[/splitk<N>]"; "" when none); `log`
// prints it as gemm_pick does (label "pick").
std::string gemm_pick_config(int64_t m, int64_t n, int64_t k, int64_t sm_count, int64_t concurrent = 1,
                             bool log = false);
// Runs one registry GEMM with its workspace from the caching allocator (device and stream in p).
struct GemmParams;
enum class GemmStatus : int;
GemmStatus run_gemm(const GemmKernelEntry& entry, const GemmParams& p, const at::TensorOptions& like);

// Fused QKV projections (csrc/ops/qkv.cpp): head-major q [B, Hq, S, 128], k and v [B, Hkv, S, 128].
std::tuple<at::Tensor, at::Tensor, at::Tensor> mrope_qkv(
    const at::Tensor& x, const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    const at::Tensor& cos, const at::Tensor& sin, c10::IntArrayRef mrope_section, c10::string_view config);
std::tuple<at::Tensor, at::Tensor, at::Tensor> vision_qkv(
    const at::Tensor& lang, const at::Tensor& vision, const at::Tensor& position_ids, const at::Tensor& grid_thw,
    const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    double rope_theta, c10::IntArrayRef thw_split, c10::string_view config);
// The same for the layers: with v_token_major, v may come back as a token-major view [B, Hkv, S, 128]
// (strides {S * Hkv * 128, 128, Hkv * 128, 1}) of its own projection's output where the path computes
// it with a plain GEMM (the two-pass "gemm" config without the RoPE epilogue): the attention reads it
// through its strides, and the RoPE pass skips v's copy. Otherwise (and always for the ops) head-major.
std::tuple<at::Tensor, at::Tensor, at::Tensor> mrope_qkv_ex(
    const at::Tensor& x, const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    const at::Tensor& cos, const at::Tensor& sin, c10::IntArrayRef mrope_section, c10::string_view config,
    bool v_token_major);
std::tuple<at::Tensor, at::Tensor, at::Tensor> vision_qkv_ex(
    const at::Tensor& lang, const at::Tensor& vision, const at::Tensor& position_ids, const at::Tensor& grid_thw,
    const at::Tensor& q_weight, const c10::optional<at::Tensor>& q_bias, const at::Tensor& k_weight,
    const c10::optional<at::Tensor>& k_bias, const at::Tensor& v_weight, const c10::optional<at::Tensor>& v_bias,
    double rope_theta, c10::IntArrayRef thw_split, c10::string_view config, bool v_token_major);

// GQA attention (csrc/ops/attention.cpp): o [B, Sq, Hq * 128].
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const c10::optional<at::Tensor>& mask, bool causal, c10::optional<double> scale, bool skip);
// The layers' call: `mask_settled` says no kernel launched since the call began writes the mask and
// the one just before passed its PDL wait before triggering (AttentionParams::mask_settled).
at::Tensor attention_in_layer(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const c10::optional<at::Tensor>& mask, bool causal, c10::optional<double> scale,
                              bool skip, bool mask_settled);

// The two layers on the native path, host side in C++ (csrc/ops/layers.cpp). `o_config` names the
// O-projection GEMM config ("" = registry default); out, if given, receives the result.
at::Tensor mrope_layer(const at::Tensor& hidden_states, const at::Tensor& q_weight, const at::Tensor& q_bias,
                       const at::Tensor& k_weight, const at::Tensor& k_bias, const at::Tensor& v_weight,
                       const at::Tensor& v_bias, const at::Tensor& o_weight, const at::Tensor& cos,
                       const at::Tensor& sin, const c10::optional<at::Tensor>& attention_mask,
                       std::vector<int64_t> mrope_section, bool causal, const std::string& o_config,
                       c10::optional<at::Tensor> out);
at::Tensor cross_layer(const at::Tensor& language_hidden_states, const at::Tensor& vision_hidden_states,
                       const at::Tensor& language_position_ids, const at::Tensor& vision_grid_thw,
                       const at::Tensor& q_proj_weight, const at::Tensor& q_proj_bias, const at::Tensor& k_proj_weight,
                       const at::Tensor& k_proj_bias, const at::Tensor& v_proj_weight, const at::Tensor& v_proj_bias,
                       const at::Tensor& o_proj_weight, double rope_theta, std::vector<int64_t> thw_split,
                       const std::string& o_config, c10::optional<at::Tensor> out);

}  // namespace vlattn
