// Memory overlap of strided row matrices, for the out= checks: a GEMM whose output shares memory with
// an operand writes tiles that other CTAs are still reading, and two output rows that share elements
// are written by different CTAs in no fixed order. Both are silent races, so the ops refuse them.
// Plain C++ (no torch): tests/cpp checks it on the host.
#pragma once

#include <cstdint>

namespace vlattn {

// rows x cols elements of itemsize bytes; row r starts at base + r * ld elements (ld >= 0: a row stride of
// 0 repeats one row).
struct RowSpan {
  int64_t base;
  int64_t rows, cols, ld, itemsize;
};

inline bool row_span_empty(const RowSpan& s) { return s.rows <= 0 || s.cols <= 0; }

// Two rows of s share an element.
inline bool row_span_self_overlaps(const RowSpan& s) {
  return !row_span_empty(s) && s.rows > 1 && s.ld < s.cols;
}

// Some element of a is also an element of b. Disjoint extents answer at once (separate tensors); extents
// that meet are checked row by row: per row of a, the first row of b that ends after its start (rows of b
// start in increasing order) overlaps it or none does. Exact for any ld >= 0 on either side, so two
// column slices of one buffer ([:, :n] and [:, n:]) do not overlap.
inline bool row_spans_share_memory(const RowSpan& a, const RowSpan& b) {
  if (row_span_empty(a) || row_span_empty(b)) return false;
  const int64_t a_row = a.cols * a.itemsize, b_row = b.cols * b.itemsize;
  const int64_t a_step = a.ld * a.itemsize, b_step = b.ld * b.itemsize;
  const int64_t a_end = a.base + (a.rows - 1) * a_step + a_row;
  const int64_t b_end = b.base + (b.rows - 1) * b_step + b_row;
  if (a_end <= b.base || b_end <= a.base) return false;
  for (int64_t i = 0; i < a.rows; ++i) {
    const int64_t lo = a.base + i * a_step, hi = lo + a_row;
    // The first row of b ending after lo (row 0 when b repeats one row).
    const int64_t j = (b_step > 0 && lo - b_row >= b.base) ? (lo - b_row - b.base) / b_step + 1 : 0;
    if (j < b.rows && b.base + j * b_step < hi && b.base + j * b_step + b_row > lo) return true;
    if (a_step == 0) break;  // every row of a is the first
  }
  return false;
}

}  // namespace vlattn
