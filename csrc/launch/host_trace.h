// Host-path timestamps for development: where a layer call's CPU time goes, mark by mark, without a
// profiler (torch.profiler's per-event cost is as large as the work it measures here: bench/NOTES.md,
// tenth session). VLATTN_HOST_TRACE=1 (read once per process) turns the marks on; off, a mark is one
// test of a static flag. bench/probe_host.py --trace reads them back through vlattn._C.host_trace().
//
// No torch headers: the .cu launchers mark too. Marks go to a per-thread ring of kHostTraceCap
// entries (name, steady_clock ns); host_trace() takes and clears the calling thread's entries.
#pragma once

#include <cstdint>

namespace vlattn {
namespace host_trace {

constexpr int kHostTraceCap = 4096;

bool enabled();                 // VLATTN_HOST_TRACE=1
void mark(const char* name);    // name must be a string literal (stored as a pointer)
// Copies out at most `cap` of the calling thread's marks, oldest first, and clears them; returns
// how many were copied.
int take(const char** names, int64_t* ns, int cap);

}  // namespace host_trace
}  // namespace vlattn

#define VLATTN_HOST_MARK(name)                                                  \
  do {                                                                          \
    if (::vlattn::host_trace::enabled()) ::vlattn::host_trace::mark(name);      \
  } while (0)
