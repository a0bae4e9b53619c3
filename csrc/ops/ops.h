// Host entry points of the ops registered in csrc/torch_bindings.cpp.
#pragma once

#include <ATen/ATen.h>

namespace vlattn {

// Raises unless `t` lives on a Hopper (sm_90) GPU, naming `op` in the message.
void check_sm90_device(const char* op, const at::Tensor& t);

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  c10::string_view config);
at::Tensor& linear_out(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       c10::string_view config, at::Tensor& out);

}  // namespace vlattn
