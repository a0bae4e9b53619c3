// vlattn::linear: tensor checks -> GemmParams -> the named sm_90a GEMM config.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>

#include "launch/gemm_params.h"
#include "launch/host_trace.h"
#include "ops/check_strings.h"
#include "ops/overlap.h"
#include "ops/ops.h"

namespace vlattn {

namespace {

// Numbers in messages go through std::to_string (check_strings.h says why).
using check_strings::aligned16;
using check_strings::dims_str;
using check_strings::num;

// Rows of a [..., C] tensor that collapse to a 2-D matrix with unit column stride: returns the row
// stride, or -1 when the leading dims do not collapse into one evenly strided dimension.
int64_t collapsed_row_stride(const at::Tensor& t) {
  if (t.dim() >= 1 && t.numel() == 0) return t.size(-1);  // nothing is read or written
  if (t.dim() < 1 || (t.size(-1) > 1 && t.stride(-1) != 1)) return -1;
  if (t.dim() == 1) return t.size(0);
  int64_t row_stride = t.stride(-2);
  int64_t expected = row_stride;
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) return -1;
    expected *= t.size(d);
  }
  return row_stride;
}

void check_matrix_operand(const char* name, const at::Tensor& t, int64_t& ld) {
  ld = collapsed_row_stride(t);
  TORCH_CHECK(ld >= 0, "vlattn.linear: ", name, " must have unit stride in its last dim and leading dims that ",
              "collapse to evenly strided rows; got sizes ", dims_str(t.sizes()), " strides ", dims_str(t.strides()),
              " (call .contiguous() first)");
  TORCH_CHECK(ld % 8 == 0 || t.numel() == 0, "vlattn.linear: ", name, "'s row stride must be a multiple of 8 elements ",
              "(16 bytes, a TMA requirement); got ", num(ld));
  TORCH_CHECK(aligned16(t) || t.numel() == 0, "vlattn.linear: ", name,
              " must start at a 16-byte aligned address (TMA); got a view at offset ", num(t.storage_offset()));
}

// A config name from python/vlattn/gemm_configs.py, or "<stream-K or parallel split-K config>/splitk<N>": that
// kernel with K split into N parts per output tile (2 <= N <= kMaxGemmSplits; a parallel split-K config needs
// the suffix). Sets *splits (1 when not split).
const GemmKernelEntry* resolve_config(c10::string_view config, int* splits) {
  int count = 0;
  const GemmKernelEntry* all = gemm_registry(&count);
  TORCH_CHECK(count > 0, "vlattn.linear: the extension was built with no GEMM configs");
  *splits = 1;
  if (config.empty()) return &all[0];  // gemm_configs.py keeps the safe default first
  std::string name(config);
  const size_t slash = name.find('/');
  if (slash != std::string::npos) {
    const std::string suffix = name.substr(slash + 1);
    name = name.substr(0, slash);
    int n = 0;
    // "splitk" then 1-2 digits without a leading zero (gemm_configs.parse_name's grammar).
    bool ok = suffix.size() > 6 && suffix.size() <= 8 && suffix.compare(0, 6, "splitk") == 0 && suffix[6] != '0';
    for (size_t i = 6; ok && i < suffix.size(); ++i) {
      ok = suffix[i] >= '0' && suffix[i] <= '9';
      n = n * 10 + (suffix[i] - '0');
    }
    TORCH_CHECK(ok && n >= 2 && n <= kMaxGemmSplits, "vlattn.linear: a config suffix must be '/splitk<N>' with 2 <= N <= ",
                num(kMaxGemmSplits), "; got '", std::string(config), "'");
    *splits = n;
  }
  const GemmKernelEntry* e = find_gemm_kernel(name.c_str());
  if (e == nullptr) {
    std::string names;
    for (int i = 0; i < count; ++i) names += std::string(i ? ", " : "") + all[i].name;
    TORCH_CHECK(false, "vlattn.linear: config must be one of [", names, "] (a stream-K one optionally with '/splitk<N>', ",
                "a parallel split-K one with it) or empty; got '", std::string(config), "'");
  }
  const bool parallel = std::strcmp(e->scheduler, "splitk") == 0;
  TORCH_CHECK(*splits == 1 || parallel || std::strcmp(e->scheduler, "streamk") == 0,
              "vlattn.linear: '/splitk<N>' needs a stream-K or parallel split-K config; ", e->name, " is ", e->scheduler);
  TORCH_CHECK(*splits > 1 || !parallel, "vlattn.linear: ", e->name, " is a parallel split-K config: name it with ",
              "'/splitk<N>' (2 <= N <= ", num(kMaxGemmSplits), ")");
  return e;
}

}  // namespace

bool linear_out_writable(const at::Tensor& out) {
  const int64_t ld = collapsed_row_stride(out);
  return ld >= 0 && (out.numel() == 0 || (ld % 8 == 0 && aligned16(out)));
}

void check_sm90_device(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.is_cuda(), op, ": the native backend needs CUDA tensors; got ", t.device());
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(t.get_device());
  TORCH_CHECK(prop->major == 9 && prop->minor == 0, op, ": native kernels are built for sm_90a (Hopper); ",
              t.device(), " is sm_", num(prop->major * 10 + prop->minor), " (", prop->name, "): use backend='composite'");
}

at::Tensor& linear_out(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       c10::string_view config, at::Tensor& out) {
  TORCH_CHECK(weight.dim() == 2, "vlattn.linear: weight must be 2-D [N, K]; got ", dims_str(weight.sizes()));
  const int64_t n = weight.size(0), k = weight.size(1);
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == k, "vlattn.linear: x must be [..., K] with K = weight.size(1) = ", num(k),
              "; got ", dims_str(x.sizes()));
  for (auto [name, t] : {std::pair<const char*, const at::Tensor*>{"x", &x}, {"weight", &weight}, {"out", &out}}) {
    TORCH_CHECK(t->scalar_type() == at::kBFloat16, "vlattn.linear: ", name, " must be bfloat16; got ", t->scalar_type());
    TORCH_CHECK(t->device() == x.device(), "vlattn.linear: ", name, " must be on ", x.device(), "; got ", t->device());
  }
  TORCH_CHECK(k % 8 == 0 && n % 8 == 0, "vlattn.linear: K and N must be multiples of 8 (16-byte TMA rows); got K=",
              num(k), ", N=", num(n));
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape.back() = n;
  TORCH_CHECK(out.sizes() == at::IntArrayRef(out_shape), "vlattn.linear: out must have shape ",
              dims_str(out_shape), "; got ", dims_str(out.sizes()));
  int64_t lda = 0, ldb = 0, ldd = 0;
  check_matrix_operand("x", x, lda);
  check_matrix_operand("weight", weight, ldb);
  check_matrix_operand("out", out, ldd);
  check_sm90_device("vlattn.linear", x);
  if (bias.has_value()) {
    const at::Tensor& b = *bias;
    TORCH_CHECK(b.scalar_type() == at::kBFloat16, "vlattn.linear: bias must be bfloat16; got ", b.scalar_type());
    TORCH_CHECK(b.device() == x.device(), "vlattn.linear: bias must be on ", x.device(), "; got ", b.device());
    TORCH_CHECK(b.dim() == 1 && b.size(0) == n && b.stride(0) == 1,
                "vlattn.linear: bias must be a contiguous 1-D [N] tensor with N = ", num(n), "; got sizes ",
                dims_str(b.sizes()), " strides ", dims_str(b.strides()));
    TORCH_CHECK(aligned16(b), "vlattn.linear: bias must start at a 16-byte aligned address");
  }
  int64_t m = 1;  // rows = product of the leading dims (not numel / K: K may be 0)
  for (int64_t d = 0; d + 1 < x.dim(); ++d) m *= x.size(d);
  // out is written by many CTAs while they read x, weight and bias: no element may be shared (ops/overlap.h).
  const auto span = [](const at::Tensor& t, int64_t rows, int64_t cols, int64_t ld) {
    return RowSpan{static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())), rows, cols, ld,
                   static_cast<int64_t>(t.element_size())};
  };
  const RowSpan out_span = span(out, m, n, ldd);
  TORCH_CHECK(!row_span_self_overlaps(out_span), "vlattn.linear: out's rows must not share memory; got row stride ",
              num(ldd), " for rows of N = ", num(n), " (an expanded or overlapping view)");
  TORCH_CHECK(!row_spans_share_memory(out_span, span(x, m, k, lda)),
              "vlattn.linear: out must not share memory with x (the GEMM reads x while it writes out)");
  TORCH_CHECK(!row_spans_share_memory(out_span, span(weight, n, k, ldb)),
              "vlattn.linear: out must not share memory with weight (the GEMM reads weight while it writes out)");
  TORCH_CHECK(!bias.has_value() || !row_spans_share_memory(out_span, span(*bias, 1, n, n)),
              "vlattn.linear: out must not share memory with bias (the GEMM reads bias while it writes out)");
  TORCH_CHECK(m <= std::numeric_limits<int>::max() && n <= std::numeric_limits<int>::max() &&
                  k <= std::numeric_limits<int>::max(),
              "vlattn.linear: M, N, K must fit in 32 bits; got M=", num(m), " N=", num(n), " K=", num(k));
  int splits = 1;
  const GemmKernelEntry* entry = resolve_config(config, &splits);
  if (m == 0 || n == 0) return out;
  if (k == 0) return bias.has_value() ? out.copy_(bias->expand_as(out)) : out.zero_();

  GemmParams p;
  const c10::cuda::CUDAGuard guard(x.device());
  p.lda = lda;
  p.ldb = ldb;
  p.ldd = ldd;
  p.a = x.data_ptr();
  p.b = weight.data_ptr();
  p.bias = bias.has_value() ? bias->data_ptr() : nullptr;
  p.d = out.data_ptr();
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.device = x.get_device();
  p.sm_count = at::cuda::getDeviceProperties(p.device)->multiProcessorCount;
  p.stream = at::cuda::getCurrentCUDAStream(p.device).stream();
  p.splits = splits;

  const GemmStatus status = run_gemm(*entry, p, x.options());
  TORCH_CHECK(status == GemmStatus::kSuccess, "vlattn.linear: config ", entry->name,
              splits > 1 ? "/splitk" + num(splits) : std::string(), " failed for M=", num(m), " N=", num(n),
              " K=", num(k), ": ", gemm_status_string(status));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

GemmStatus run_gemm(const GemmKernelEntry& entry, const GemmParams& p, const at::TensorOptions& like) {
  VLATTN_HOST_MARK("gemm.enter");
  const size_t ws_bytes = entry.workspace_bytes(p);
  VLATTN_HOST_MARK("gemm.ws_bytes");
  at::Tensor workspace;  // from the caching allocator: capturable in CUDA graphs
  if (ws_bytes > 0) workspace = at::empty({static_cast<int64_t>(ws_bytes)}, like.dtype(at::kByte));
  VLATTN_HOST_MARK("gemm.ws_alloc");
  RECORD_USER_SCOPE("vlattn.gemm.run");  // CUTLASS arguments, tensor maps, launch
  return entry.run(p, ws_bytes ? workspace.data_ptr() : nullptr, ws_bytes);
}

const GemmKernelEntry* gemm_analytic_pick(int64_t m, int64_t n, int64_t /*k*/, int sm_count, int concurrent) {
  // python/vlattn/dispatch.py (estimated_cost, analytic_config) in C++: the persistent rule configs
  // (in_rule) in registry order, cost = whole waves x tile area / efficiency (from gemm_configs.py via the
  // registry), ties to the earlier entry (the default is entry 0). Stream-K is never picked: measured
  // slower, split or not. `concurrent` equal GEMMs running side by side on two streams share the SMs:
  // their tiles together make the waves (1: the Python rule).
  int count = 0;
  const GemmKernelEntry* all = gemm_registry(&count);
  const int64_t sms = std::max(sm_count, 1);
  const GemmKernelEntry* best = nullptr;
  double best_cost = 0.0;
  for (int i = 0; i < count; ++i) {
    const GemmKernelEntry& e = all[i];
    if (std::strcmp(e.scheduler, "persistent") != 0 || !e.in_rule) continue;
    const int64_t tiles = ((m + e.tile_m - 1) / e.tile_m) * ((n + e.tile_n - 1) / e.tile_n);
    const int64_t waves = (tiles * std::max(concurrent, 1) + sms - 1) / sms;
    const double cost = double(waves * e.tile_m * e.tile_n) / e.efficiency;
    if (best == nullptr || cost < best_cost) best = &e, best_cost = cost;
  }
  return best;
}

const GemmKernelEntry* gemm_tuned_pick(int64_t m, int64_t n, int64_t k, int* splits) {
  // python/vlattn/dispatch.py's tuned_table() lookup in C++ (the same JSON, generated into the registry at
  // build time: setup.py keeps only the entries whose config this build compiled).
  int count = 0;
  const GemmTunedEntry* table = gemm_tuned_table(&count);
  for (int i = 0; i < count; ++i) {
    const GemmTunedEntry& t = table[i];
    if (t.config[0] == '\0' || t.m != m || t.n != n || t.k != k) continue;
    const GemmKernelEntry* e = find_gemm_kernel(t.config);
    if (e == nullptr) return nullptr;
    *splits = t.splits;
    return e;
  }
  return nullptr;
}

namespace {

// VLATTN_LOG as vlattn.dispatch reads it (set and not "0"), read once: the C++ picks print each decision
// once, as the Python dispatcher's do.
bool decision_log_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VLATTN_LOG");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void log_decision_once(const std::string& line) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(line).second) std::fprintf(stderr, "%s\n", line.c_str());
}

std::string pick_name(const GemmKernelEntry* e, int splits) {
  if (e == nullptr) return std::string();
  return std::string(e->name) + (splits > 1 ? "/splitk" + num(splits) : std::string());
}

}  // namespace

const GemmKernelEntry* gemm_pick(int64_t m, int64_t n, int64_t k, int sm_count, int concurrent, bool tuned,
                                 int* splits, const char* log_as) {
  *splits = 1;
  const GemmKernelEntry* e = nullptr;
  const char* source = "analytic";
  // The table's timings are of one GEMM alone: GEMMs side by side take the wave model's pair pick.
  if (tuned && concurrent <= 1) {
    e = gemm_tuned_pick(m, n, k, splits);
    if (e != nullptr) source = "tuned";
    else *splits = 1;
  }
  if (e == nullptr) e = gemm_analytic_pick(m, n, k, sm_count, concurrent);
  if (log_as != nullptr && e != nullptr && decision_log_enabled())
    log_decision_once(std::string("vlattn: ") + log_as + " gemm M=" + num(m) + " N=" + num(n) + " K=" + num(k) +
                      (concurrent > 1 ? " (" + num(concurrent) + " side by side)" : std::string()) + " -> " +
                      pick_name(e, *splits) + " (" + source + ")");
  return e;
}

std::string gemm_pick_config(int64_t m, int64_t n, int64_t k, int64_t sm_count, int64_t concurrent, bool log) {
  int splits = 1;
  const GemmKernelEntry* e = gemm_pick(m, n, k, static_cast<int>(sm_count), static_cast<int>(concurrent), true,
                                       &splits, log ? "pick" : nullptr);
  return pick_name(e, splits);
}

std::string gemm_analytic_config(int64_t m, int64_t n, int64_t k, int64_t sm_count, int64_t concurrent) {
  const GemmKernelEntry* e = gemm_analytic_pick(m, n, k, static_cast<int>(sm_count), static_cast<int>(concurrent));
  return e == nullptr ? std::string() : std::string(e->name);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  c10::string_view config) {
  TORCH_CHECK(weight.dim() == 2, "vlattn.linear: weight must be 2-D [N, K]; got ", dims_str(weight.sizes()));
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  TORCH_CHECK(!out_shape.empty(), "vlattn.linear: x must have at least 1 dim");
  out_shape.back() = weight.size(0);
  at::Tensor out = at::empty(out_shape, x.options());
  VLATTN_HOST_MARK("linear.out");
  return linear_out(x, weight, bias, config, out);
}

const char* gemm_status_string(GemmStatus s) {
  switch (s) {
    case GemmStatus::kSuccess: return "success";
    case GemmStatus::kNotSupported: return "CUTLASS can_implement() refused the problem (alignment or shape)";
    case GemmStatus::kWorkspaceTooSmall: return "workspace too small";
    case GemmStatus::kInitFailed: return "kernel initialization failed (shared memory attribute or workspace)";
    case GemmStatus::kLaunchFailed: return "kernel launch failed";
    case GemmStatus::kNotCompiled: return "kernel not compiled for this architecture";
    case GemmStatus::kSplitsDoNotFit:
      return "a parallel split-K config needs K to divide into its split count's equal slices, each a multiple of 8 "
             "columns (16-byte rows)";
  }
  return "unknown status";
}

}  // namespace vlattn
