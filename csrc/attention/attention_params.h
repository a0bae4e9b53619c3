// Plain parameter block for the fused GQA attention kernel on sm_90a (issue 4).
// No torch headers here: csrc/ops/attention.cpp turns tensors into this struct and
// csrc/attention/attention_sm90.cu launches the kernel from it.
//
// Layout contract (fixed; the QKV projection kernel produces it):
//   q    bf16 [B, Hq,  Sq, 128] contiguous
//   k, v bf16 [B, Hkv, Sk, 128] contiguous, Hq % Hkv == 0 (query head h reads KV head h / (Hq / Hkv))
//   o    bf16 [B, Sq, Hq * 128] contiguous (token-major: the O projection's input)
//   mask bf16 additive, element (b, i, j) at mask[b * mask_batch_stride + i * mask_row_stride + j]
//        (unit column stride; batch stride 0 broadcasts one mask over the batch; only j < Sk is read)
#pragma once

#include <cstddef>
#include <cstdint>

// cudaStream_t exactly as the CUDA runtime declares it (driver_types.h), so that plain host code and
// tests/cpp can include this header without the CUDA toolkit's headers.
typedef struct CUstream_st* cudaStream_t;

namespace vlattn {

constexpr int kAttnHeadDim = 128;  // the only head_dim the kernel is built for

struct AttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;

  // Element strides of q, k and v as {batch, head, seq}; head_dim is contiguous. {0, 0, 0} (the default)
  // = contiguous [B, heads, seq, 128]. Otherwise each a positive multiple of 8 (16 bytes: TMA) below
  // 2^39 (the op passes the natural stride for a dimension of size 1).
  int64_t q_strides[3] = {0, 0, 0};
  int64_t k_strides[3] = {0, 0, 0};
  int64_t v_strides[3] = {0, 0, 0};

  int batch = 0;
  int heads_q = 0;    // Hq
  int heads_kv = 0;   // Hkv, divides Hq
  int seqlen_q = 0;   // Sq >= 1
  int seqlen_k = 0;   // Sk >= 1

  // Optional additive mask (nullptr = none). Strides in elements.
  const void* mask = nullptr;
  int64_t mask_batch_stride = 0;  // 0 when the mask has batch dim 1 (broadcast)
  int64_t mask_row_stride = 0;    // may be odd (e.g. 541): the kernel reads the mask element-wise

  float scale = 0.f;    // scores are multiplied by this (default 1/sqrt(128), chosen by the caller)
  bool causal = false;  // keys j > i get -inf (top-left aligned when Sq != Sk)
  bool skip = true;     // with a mask: run the mask-summary pre-pass, skip DEAD tiles where exact and the
                        // mask loads of all-zero tiles (bitwise identical to skip = false). Causal tiles
                        // above the diagonal are always skipped: they contribute exact zeros.
  bool mask_settled = false;  // the mask is complete before the kernel launched just before this call
                              // and no kernel of the call's chain writes it (the layers' masks): the
                              // pre-pass then reads it while that kernel finishes (mask_summary.cuh)

  // Scratch for the mask summary and the tail split's partials (attention_plan's bytes, 16-byte aligned),
  // from the caller's allocator; nullptr when that size is 0.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  int device = 0;
  int sm_count = 0;  // read from the device by the caller, never hard-coded
  cudaStream_t stream = nullptr;
};

namespace attn_rules {
struct LaunchPlan;  // attention/attention_rules.h
}

enum class AttentionStatus : int {
  kSuccess = 0,
  kInvalidArgument,  // a shape, pointer or alignment the kernel does not support
  kWorkspaceTooSmall,
  kInitFailed,       // TMA descriptor or shared-memory attribute setup failed
  kLaunchFailed,
  kNotCompiled,      // the translation unit was built without sm_90a support
};

const char* attention_status_string(AttentionStatus s);

// The launch's decisions for p under the current VLATTN_ATTN_* switches (attn_rules::launch_plan) into *plan, once
// per call; returns the scratch bytes that plan needs (0 without a mask pre-pass or a tail split).
size_t attention_plan(const AttentionParams& p, attn_rules::LaunchPlan* plan);

// Launches o = softmax(q k^T * scale + mask [, causal]) v on p.stream as `plan` (attention_plan's for p) says.
// No host synchronization.
AttentionStatus attention_sm90(const AttentionParams& p, const attn_rules::LaunchPlan& plan);

}  // namespace vlattn
