// Development: per-CTA timestamps of the split-K QKV kernels (qkv_rope_splitk_kernel), to see where a cold
// call's time goes (bench/probe_splitk_timeline.py). Off unless a buffer is set; while one is, split-K launches take
// the kernels' traced twins (qkv_rope_splitk_kernel<..., kTrace = true>) with the buffer in their parameters
// (QkvKernelParams::trace). Off, the library launches the untraced instantiations, whose code is the same as
// before the trace existed. Python: vlattn.dev.splitk_trace(buffer).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace vlattn {

// Slots per CTA (CTA i writes buf[i * kSplitKTraceSlots + j]), %globaltimer ns unless said:
//   0 start (after the PDL wait)        1 first stage full (consumer)    2 last stage full (consumer)
//   3 the partial tiles' cluster barrier passed      4 reduction done, RoPE epilogue starts
//   5 end (exit barrier passed)          6 SM id                          7 cluster rank
constexpr int kSplitKTraceSlots = 8;

// buf: device memory of the current device for `ctas` CTAs (nullptr: off). CTAs beyond `ctas` write nothing. It
// goes into the parameters of split-K launches made afterwards on that device (host state, not thread-safe:
// development only); a CUDA graph keeps the parameters it captured.
cudaError_t qkv_splitk_trace(unsigned long long* buf, int ctas);

}  // namespace vlattn
