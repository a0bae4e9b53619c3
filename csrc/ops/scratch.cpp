#include "ops/scratch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>

#include "launch/dev_switch.h"

namespace vlattn {
namespace {

thread_local LayerScratch* g_current = nullptr;

constexpr int64_t kAlign = 512;  // the caching allocator's block granularity: views start as aligned as blocks do

int64_t round_up(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Bytes that sizes x strides span (0 for an empty tensor), or -1 for a negative size or stride.
int64_t span_bytes(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t elem) {
  int64_t last = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || (i < strides.size() && strides[i] < 0)) return -1;
    if (sizes[i] == 0) return 0;
  }
  if (strides.empty()) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n * elem;
  }
  for (size_t i = 0; i < sizes.size(); ++i) last += (sizes[i] - 1) * strides[i];
  return (last + 1) * elem;
}

at::Tensor from_scope(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  LayerScratch* s = LayerScratch::current();
  if (s == nullptr || options.layout() != at::kStrided || !options.has_device() || !options.device().is_cuda())
    return {};
  const at::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  const int64_t bytes = span_bytes(sizes, strides, static_cast<int64_t>(c10::elementSize(dtype)));
  if (bytes < 0) return {};
  return s->take(sizes, strides, bytes, dtype, options.device());
}

}  // namespace

LayerScratch::LayerScratch(const at::Tensor& like, int64_t bytes) : outer_(g_current) {
  g_current = this;
  if (bytes > 0 && like.is_cuda()) {
    capacity_ = round_up(bytes);
    block_ = at::empty({capacity_}, like.options().dtype(at::kByte));
    stream_ = at::cuda::getCurrentCUDAStream(like.get_device()).stream();
  }
}

LayerScratch::~LayerScratch() { g_current = outer_; }

LayerScratch* LayerScratch::current() { return g_current; }

at::Tensor LayerScratch::take(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t nbytes, at::ScalarType dtype,
                              c10::Device device) {
  if (!block_.defined() || nbytes < 0 || nbytes > capacity_ - used_ || device != block_.device()) return {};
  if (at::cuda::getCurrentCUDAStream(device.index()).stream() != stream_) return {};
  const int64_t elem = static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t start = used_;
  used_ = std::min(capacity_, start + round_up(std::max<int64_t>(nbytes, 1)));
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(block_.storage()), block_.key_set(),
                                                          c10::scalarTypeToTypeMeta(dtype));
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  impl->set_storage_offset(start / elem);
  if (strides.empty())
    impl->set_sizes_contiguous(sizes);
  else
    impl->set_sizes_and_strides(sizes, strides);
  return t;
}

at::Tensor scratch_empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor t = from_scope(sizes, {}, options);
  return t.defined() ? t : at::empty(sizes, options);
}

at::Tensor scratch_empty_strided(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  TORCH_CHECK(sizes.size() == strides.size(), "vlattn: internal error: scratch_empty_strided got ", sizes.size(),
              " sizes and ", strides.size(), " strides");
  at::Tensor t = from_scope(sizes, strides, options);
  return t.defined() ? t : at::empty_strided(sizes, strides, options);
}

at::Tensor scratch_bytes(const at::TensorOptions& like, int64_t bytes) {
  return scratch_empty({bytes}, like.dtype(at::kByte));
}

int64_t layer_scratch_cap_bytes() {
  const int64_t v = dev_switch(DevSwitch::kLayerScratch);
  return v <= 0 ? 0 : v == 1 ? kLayerScratchMaxBytes : std::min<int64_t>(v, 1 << 16) << 20;
}

}  // namespace vlattn
