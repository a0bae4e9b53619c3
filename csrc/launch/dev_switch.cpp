#include "launch/dev_switch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "qkv/qkv_config.h"  // kQkvGemmMinRows, kQkvGroupedMinRows, kQkvGroupedMaxRows

namespace vlattn {
namespace {

struct Entry {
  const char* name;
  int64_t fallback;
  bool flag;  // on/off: off when the variable starts with '0', else on; otherwise an integer
};

constexpr int kCount = static_cast<int>(DevSwitch::kCount);

// In DevSwitch's order (the static_assert below counts them; a test checks every name is a VLATTN_*).
constexpr Entry kTable[] = {
    {"VLATTN_QKV_GEMM_MIN_M", kQkvGemmMinRows, false},
    {"VLATTN_QKV_GEMM_STREAMS", 1, false},
    {"VLATTN_QKV_PAIR_WAVES", 1, true},
    {"VLATTN_QKV_TUNED", 1, true},
    {"VLATTN_QKV_ROPE_MERGE", 1, true},
    {"VLATTN_QKV_ROPE_TABLE", 1, false},
    {"VLATTN_QKV_PASS_WIDTH", 0, false},
    {"VLATTN_QKV_GEMM_EPI", 1, false},
    {"VLATTN_QKV_EPI_POS1D", 1, false},
    {"VLATTN_QKV_PLAN", 1, true},
    {"VLATTN_QKV_GROUPED_MIN_M", kQkvGroupedMinRows, false},
    {"VLATTN_QKV_GROUPED_MAX_M", kQkvGroupedMaxRows, false},
    {"VLATTN_QKV_V_TOKEN_MAJOR", 1, true},
    {"VLATTN_ATTN_SIMPLE", 0, true},
    {"VLATTN_ATTN_MASK_SMEM", 1, false},
    {"VLATTN_ATTN_LEAN_ZERO", 1, false},
    {"VLATTN_ATTN_PACK", 0, false},
    {"VLATTN_ATTN_PERSISTENT", 1, false},
    {"VLATTN_ATTN_BN", 0, false},
    {"VLATTN_ATTN_RESIDENT", 1, false},
    {"VLATTN_ATTN_TAIL_SPLIT", 1, false},
    {"VLATTN_ATTN_DIAG_HALF", 1, true},
    {"VLATTN_ATTN_TMA_O", 1, true},
    {"VLATTN_ATTN_WALK_CACHE", 1, true},
    {"VLATTN_PDL", 1, true},
    {"VLATTN_ATTN_SPLIT_KEYS", 1, false},
    {"VLATTN_LAYER_SCRATCH", 1, false},
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == kCount, "one entry per DevSwitch");

// An unset or empty variable is the default; a flag is off when it starts with '0'; an integer that does
// not start with a digit or '-' is the default too (VLATTN_QKV_GEMM_EPI=x read as the rule before).
int64_t from_env(const Entry& e) {
  const char* env = std::getenv(e.name);
  if (env == nullptr || env[0] == '\0') return e.fallback;
  if (e.flag) return env[0] != '0' ? 1 : 0;
  if (!(env[0] == '-' || (env[0] >= '0' && env[0] <= '9'))) return e.fallback;
  return static_cast<int64_t>(std::atoll(env));
}

struct Values {
  std::atomic<int64_t> v[kCount];
  Values() {
    for (int i = 0; i < kCount; ++i) v[i].store(from_env(kTable[i]), std::memory_order_relaxed);
  }
};

// Every variable read once, on the first use of any switch (thread-safe static initialization).
std::atomic<int64_t>* values() {
  static Values all;
  return all.v;
}

}  // namespace

int64_t dev_switch(DevSwitch s) { return values()[static_cast<int>(s)].load(std::memory_order_relaxed); }

bool set_dev_switch(const char* name, int64_t value, int64_t* previous) {
  for (int i = 0; i < kCount; ++i) {
    if (std::strcmp(kTable[i].name, name) != 0) continue;
    if (kTable[i].flag) value = value != 0 ? 1 : 0;
    const int64_t old = values()[i].exchange(value, std::memory_order_relaxed);
    if (previous != nullptr) *previous = old;
    return true;
  }
  return false;
}

int dev_switch_count() { return kCount; }
const char* dev_switch_name(int i) { return i >= 0 && i < kCount ? kTable[i].name : nullptr; }
int64_t dev_switch_default(int i) { return i >= 0 && i < kCount ? kTable[i].fallback : 0; }
int64_t dev_switch_value(int i) { return i >= 0 && i < kCount ? values()[i].load(std::memory_order_relaxed) : 0; }

}  // namespace vlattn
