// Helpers for the op files' TORCH_CHECK messages and pointer checks.
//
// Numbers in error messages go through std::to_string, never through c10::str's ostream: on the
// H200 image (torch 2.11, g++ 13.3) streaming an integer inside a TORCH_CHECK message segfaulted.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace vlattn {
namespace check_strings {

inline std::string num(int64_t v) { return std::to_string(v); }

inline std::string dims_str(c10::IntArrayRef dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// TMA descriptors and 16-byte vector accesses need 16-byte aligned starts.
inline bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

}  // namespace check_strings
}  // namespace vlattn
