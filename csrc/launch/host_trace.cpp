// host_trace.h's per-thread ring (read back by vlattn._C.host_trace, csrc/torch_bindings.cpp).
#include "launch/host_trace.h"

#include <chrono>
#include <cstdlib>

namespace vlattn {
namespace host_trace {
namespace {

struct Ring {
  const char* names[kHostTraceCap];
  int64_t ns[kHostTraceCap];
  int count = 0;  // marks past the cap are dropped (the probe takes them after every few calls)
};

Ring& ring() {
  thread_local Ring r;
  return r;
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* env = std::getenv("VLATTN_HOST_TRACE");
    return env != nullptr && env[0] == '1';
  }();
  return on;
}

void mark(const char* name) {
  Ring& r = ring();
  if (r.count >= kHostTraceCap) return;
  r.names[r.count] = name;
  r.ns[r.count] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count();
  ++r.count;
}

int take(const char** names, int64_t* ns, int cap) {
  Ring& r = ring();
  const int n = r.count < cap ? r.count : cap;
  for (int i = 0; i < n; ++i) {
    names[i] = r.names[i];
    ns[i] = r.ns[i];
  }
  r.count = 0;
  return n;
}

}  // namespace host_trace
}  // namespace vlattn
