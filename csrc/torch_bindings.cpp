// The one registration file: every vlattn op schema (functional and out= forms), the C++ kernels
// behind them, and the Python module's info functions.
//
// The two layer ops' implementations are registered from Python (vlattn/ops.py) for the CPU and
// CUDA dispatch keys: they pick a backend (native / composite / reference) per call. Their fake
// (meta) implementations are in Python too, for torch.compile.
#include <cuda.h>
#include <torch/extension.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <torch/version.h>

#include "launch/dev_switch.h"
#include "launch/gemm_params.h"
#include "launch/host_trace.h"
#include "ops/ops.h"
#include "qkv/qkv_trace.h"

// at::Tag::out (torch >= 2.12) lets functionalization, hence torch.compile and opcheck, treat the
// .out overloads as out= variants. torch 2.11 (the H200 image) has no such tag.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 12)
#define VLATTN_DEF_OUT(lib, schema) (lib).def(schema, {at::Tag::out})
#else
#define VLATTN_DEF_OUT(lib, schema) (lib).def(schema)
#endif

TORCH_LIBRARY(vlattn, m) {
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, str config=\"\") -> Tensor");
  VLATTN_DEF_OUT(m, "linear.out(Tensor x, Tensor weight, Tensor? bias=None, str config=\"\", *, Tensor(a!) out) -> Tensor(a!)");

  m.def(
      "mrope_self_attention(Tensor hidden_states, Tensor q_weight, Tensor q_bias, Tensor k_weight, Tensor k_bias, "
      "Tensor v_weight, Tensor v_bias, Tensor o_weight, Tensor cos, Tensor sin, Tensor? attention_mask=None, *, "
      "int[] mrope_section=[32, 48, 48], bool causal=False, str backend=\"auto\") -> Tensor");
  VLATTN_DEF_OUT(m,
      "mrope_self_attention.out(Tensor hidden_states, Tensor q_weight, Tensor q_bias, Tensor k_weight, "
      "Tensor k_bias, Tensor v_weight, Tensor v_bias, Tensor o_weight, Tensor cos, Tensor sin, "
      "Tensor? attention_mask=None, *, int[] mrope_section=[32, 48, 48], bool causal=False, str backend=\"auto\", "
      "Tensor(a!) out) -> Tensor(a!)");

  m.def(
      "vision_cross_attention(Tensor language_hidden_states, Tensor vision_hidden_states, "
      "Tensor language_position_ids, Tensor vision_grid_thw, Tensor q_proj_weight, Tensor q_proj_bias, "
      "Tensor k_proj_weight, Tensor k_proj_bias, Tensor v_proj_weight, Tensor v_proj_bias, Tensor o_proj_weight, *, "
      "float rope_theta=10000.0, int[] thw_split=[42, 42, 44], str backend=\"auto\") -> Tensor");
  VLATTN_DEF_OUT(m,
      "vision_cross_attention.out(Tensor language_hidden_states, Tensor vision_hidden_states, "
      "Tensor language_position_ids, Tensor vision_grid_thw, Tensor q_proj_weight, Tensor q_proj_bias, "
      "Tensor k_proj_weight, Tensor k_proj_bias, Tensor v_proj_weight, Tensor v_proj_bias, Tensor o_proj_weight, *, "
      "float rope_theta=10000.0, int[] thw_split=[42, 42, 44], str backend=\"auto\", Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(vlattn, CUDA, m) {
  m.impl("linear", &vlattn::linear);
  m.impl("linear.out", &vlattn::linear_out);
}

// On CPU the same entry points reject the tensors with "needs CUDA tensors" instead of the
// dispatcher's generic "could not run ... with arguments from the 'CPU' backend".
TORCH_LIBRARY_IMPL(vlattn, CPU, m) {
  m.impl("linear", &vlattn::linear);
  m.impl("linear.out", &vlattn::linear_out);
}

// No op has a backward (the layers are for inference). Without an Autograd kernel, PyTorch's default
// fallback lets an output claim a grad_fn whose backward leaves the inputs' .grad as None with only a
// warning: a silently wrong gradient. PyTorch's "not implemented" fallback instead raises "derivative for
// vlattn::<op> is not implemented" when backward reaches the op; the forward is unchanged (the fallback
// replaced did the same per-argument requires_grad scan). The public Python functions send calls that autograd
// would record through the dispatcher so that they get the same behaviour (vlattn/ops.py, _grad_requested).
TORCH_LIBRARY_IMPL(vlattn, Autograd, m) {
  for (const char* op : {"linear", "linear.out", "mrope_self_attention", "mrope_self_attention.out",
                         "vision_cross_attention", "vision_cross_attention.out", "mrope_qkv", "vision_qkv",
                         "attention"})
    m.impl(op, torch::autograd::autogradNotImplementedFallback());
}

namespace {

pybind11::list gemm_configs() {
  int count = 0;
  const vlattn::GemmKernelEntry* entries = vlattn::gemm_registry(&count);
  pybind11::list out;
  for (int i = 0; i < count; ++i) {
    const auto& e = entries[i];
    pybind11::dict d;
    d["name"] = e.name;
    d["tile"] = pybind11::make_tuple(e.tile_m, e.tile_n, e.tile_k);
    d["cluster"] = pybind11::make_tuple(e.cluster_m, e.cluster_n);
    d["schedule"] = e.schedule;
    d["scheduler"] = e.scheduler;
    d["stages"] = e.stages;
    d["rule"] = e.in_rule;  // false: tuned table only
    out.append(d);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "vlattn native kernels (sm_90a); ops are registered under torch.ops.vlattn";
  m.def("gemm_configs", &gemm_configs, "GEMM configs compiled into this build, in registry order");
  m.def("gemm_analytic_config", &vlattn::gemm_analytic_config,
        "the wave model's config for M x N x K on sm_count SMs (`concurrent` equal GEMMs side by side), "
        "as the QKV 'gemm' config picks it",
        pybind11::arg("m"), pybind11::arg("n"), pybind11::arg("k"), pybind11::arg("sm_count"),
        pybind11::arg("concurrent") = 1);
  m.def("gemm_pick_config", &vlattn::gemm_pick_config,
        "the config the QKV path's plain GEMMs take for M x N x K: the committed tuned table's entry (built in) "
        "when the GEMM runs alone, else the wave model's (`log`: print the decision once under VLATTN_LOG)",
        pybind11::arg("m"), pybind11::arg("n"), pybind11::arg("k"), pybind11::arg("sm_count"),
        pybind11::arg("concurrent") = 1, pybind11::arg("log") = false);
  // Not torch ops: called from the registered Python implementations of the layer ops (vlattn/ops.py)
  // once they chose the native backend, so that the three kernels launch without Python between them.
  m.def("linear_out_writable", &vlattn::linear_out_writable,
        "whether vlattn.linear's out= can be this view (unit column stride, rows that collapse with a row stride "
        "that is a multiple of 8, 16-byte aligned); the layers' native path copies into other views");
  m.def("mrope_layer", &vlattn::mrope_layer, "native mrope_self_attention (fused QKV, attention, O projection)");
  m.def("cross_layer", &vlattn::cross_layer, "native vision_cross_attention (fused QKV, attention, O projection)");
  m.def(
      "host_trace",
      [] {
        // The calling thread's host marks since the last call (VLATTN_HOST_TRACE=1; launch/host_trace.h),
        // as [(name, steady_clock ns)]: CLOCK_MONOTONIC, the clock of Python's time.monotonic_ns().
        std::vector<const char*> names(vlattn::host_trace::kHostTraceCap);
        std::vector<int64_t> ns(vlattn::host_trace::kHostTraceCap);
        const int n = vlattn::host_trace::take(names.data(), ns.data(), vlattn::host_trace::kHostTraceCap);
        pybind11::list out;
        for (int i = 0; i < n; ++i) out.append(pybind11::make_tuple(std::string(names[i]), ns[i]));
        return out;
      },
      "host-path marks of this thread since the last call (development: VLATTN_HOST_TRACE=1)");
  m.def(
      "splitk_trace",
      [](int64_t ptr, int64_t ctas) {
        // Development: per-CTA timestamps of the split-K QKV kernels into device memory at `ptr` (qkv/qkv_trace.h;
        // Python: vlattn.dev.splitk_trace, which checks the buffer). ptr 0 and ctas 0: off.
        if (ctas < 0 || ctas > (1 << 30) || (ptr == 0) != (ctas == 0))
          throw pybind11::value_error("splitk_trace: ptr and ctas must be both zero (off) or both positive; got ptr " +
                                      std::to_string(ptr) + ", ctas " + std::to_string(ctas));
        const cudaError_t err =
            vlattn::qkv_splitk_trace(reinterpret_cast<unsigned long long*>(ptr), static_cast<int>(ctas));
        if (err != cudaSuccess)
          throw std::runtime_error(std::string("splitk_trace: ") + cudaGetErrorString(err));
      },
      "set (or clear) the split-K QKV kernels' development trace buffer", pybind11::arg("ptr"),
      pybind11::arg("ctas"));
  // Development switches (launch/dev_switch.h; Python: vlattn.dev).
  m.def(
      "dev_switches",
      [] {
        pybind11::list out;
        for (int i = 0; i < vlattn::dev_switch_count(); ++i)
          out.append(pybind11::make_tuple(std::string(vlattn::dev_switch_name(i)), vlattn::dev_switch_value(i),
                                          vlattn::dev_switch_default(i)));
        return out;
      },
      "[(name, value, default)] of every development switch");
  m.def(
      "set_dev_switch",
      [](const std::string& name, int64_t value) {
        int64_t previous = 0;
        if (!vlattn::set_dev_switch(name.c_str(), value, &previous)) {
          std::string known;
          for (int i = 0; i < vlattn::dev_switch_count(); ++i)
            known += std::string(i ? ", " : "") + vlattn::dev_switch_name(i);
          throw pybind11::value_error("set_dev_switch: unknown switch '" + name + "'; the switches are " + known);
        }
        return previous;
      },
      "set a development switch for the calls that start after it; returns its previous value",
      pybind11::arg("name"), pybind11::arg("value"));
  m.attr("compiled_archs") = pybind11::make_tuple("sm_90a");
  m.attr("cuda_version") = CUDA_VERSION;
}
