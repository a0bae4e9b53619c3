// A layer call's scratch in one caching-allocator block.
//
// The native layers make seven to nine intermediate tensors per call (q, k, v, the projections' y, the
// grouped GEMM's arguments, the RoPE tables, the attention's output and workspace). Each at::empty is a
// dispatcher call, an allocator lookup and a TensorImpl: 1.3-2.7 us of host time apiece on the device
// machines' KVM hosts (probe_host marks, bench/NOTES.md fifty-seventh session), on the host path that
// the benchmark's eager timer sees and that paces the small layers' kernels on a slow host. Inside a
// LayerScratch scope, scratch_empty / scratch_bytes take those tensors from one block allocated when
// the scope opens: a bump offset and a TensorImpl over the block's storage, no dispatcher.
//
// Semantics are at::empty's: uninitialized memory from PyTorch's caching allocator, on the current
// stream of the block's device (the block is freed when the scope closes and its last view dies;
// stream-ordered reuse as for any caching-allocator block). A request the block cannot hold, on another
// device, another current stream (a side stream's own workspace) or outside a scope is an ordinary
// at::empty. Views start 512-byte aligned, as the allocator's blocks do. Not for tensors returned to
// the caller: they would keep the whole block alive.
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime.h>

namespace vlattn {

class LayerScratch {
 public:
  // One block of `bytes` on `like`'s device and current stream; with bytes <= 0 the scope is open but
  // empty (every request is an at::empty). Scopes nest per host thread; the innermost one serves. Not
  // const: take() changes it through current().
  LayerScratch(const at::Tensor& like, int64_t bytes);
  ~LayerScratch();
  LayerScratch(const LayerScratch&) = delete;
  LayerScratch& operator=(const LayerScratch&) = delete;

  // The innermost open scope of this host thread, or null.
  static LayerScratch* current();

  // A view of `nbytes` of the block (512-byte aligned start) as `dtype` with the given sizes and strides
  // (contiguous when strides is empty), or an undefined tensor when the block cannot hold it or the
  // request is for another device or stream.
  at::Tensor take(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t nbytes, at::ScalarType dtype,
                  c10::Device device);

  int64_t used() const { return used_; }
  int64_t capacity() const { return capacity_; }

 private:
  at::Tensor block_;
  int64_t capacity_ = 0, used_ = 0;
  cudaStream_t stream_ = nullptr;
  LayerScratch* outer_ = nullptr;
};

// at::empty(sizes, options) from the innermost scope's block where it fits, else at::empty.
at::Tensor scratch_empty(at::IntArrayRef sizes, const at::TensorOptions& options);
// at::empty_strided(sizes, strides, options) likewise: one call where a view + transpose took three.
at::Tensor scratch_empty_strided(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options);
// A byte block of `bytes` (kByte), likewise.
at::Tensor scratch_bytes(const at::TensorOptions& like, int64_t bytes);

// The largest block the layers open a scope with (VLATTN_LAYER_SCRATCH, a dev switch: 0 no block, 1 the
// default cap kLayerScratchMaxBytes, N >= 2 a cap of N MB); 0 when off. A layer whose intermediates' bound
// is above it takes at::empty as before: those layers are GPU-bound, and one block would only raise the
// peak (the tensors it replaces are freed at different times).
constexpr int64_t kLayerScratchMaxBytes = int64_t(64) << 20;
int64_t layer_scratch_cap_bytes();

}  // namespace vlattn
