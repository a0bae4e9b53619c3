// Translation unit of the sm_90a attention kernel (no torch headers: build notes #7).
#include "attention/sm90_attention.cuh"

namespace vlattn {

size_t attention_plan(const AttentionParams& p, attn_rules::LaunchPlan* plan) {
  *plan = attn_rules::launch_plan(p, attn_sm90::launch_switches());
  return attn_sm90::workspace_bytes(*plan, p);
}

AttentionStatus attention_sm90(const AttentionParams& p, const attn_rules::LaunchPlan& plan) {
  return attn_sm90::launch(p, plan);
}

const char* attention_status_string(AttentionStatus s) {
  switch (s) {
    case AttentionStatus::kSuccess: return "success";
    case AttentionStatus::kInvalidArgument: return "invalid argument (shape, null pointer or alignment)";
    case AttentionStatus::kWorkspaceTooSmall: return "workspace too small (mask summary)";
    case AttentionStatus::kInitFailed: return "initialization failed (shared memory attribute)";
    case AttentionStatus::kLaunchFailed: return "kernel launch failed";
    case AttentionStatus::kNotCompiled: return "kernel not compiled for this architecture";
  }
  return "unknown status";
}

}  // namespace vlattn
