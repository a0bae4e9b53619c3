// Rotary-embedding channel maps shared by the fused QKV epilogue (issue 3), the attention kernel
// and the host tests (tests/cpp/test_rope_maps.cpp). Host and device; no CUDA headers needed.
//
// Rotate-half RoPE over a segment of width W starting at channel `base`: for j = c - base,
//   out[c] = x[c] * cos[c] + sign(c) * x[partner(c)] * sin[c],
//   partner = c + W/2, sign = -1   when j <  W/2
//   partner = c - W/2, sign = +1   when j >= W/2
// and the frequency index is j mod W/2 (cos/sin repeat across the two halves).
#pragma once

#if defined(__CUDACC__)
#define VLATTN_HD __host__ __device__ __forceinline__
#else
#define VLATTN_HD inline
#endif

namespace vlattn {
namespace rope {

struct Pair {
  int partner;  // channel whose value is rotated into this one
  int sign;     // -1: first half (reads -x2), +1: second half (reads x1)
  int freq;     // frequency index inside the segment, 0 .. W/2-1
};

VLATTN_HD Pair rotate_half_pair(int c, int base, int width) {
  const int half = width / 2;
  const int j = c - base;
  return j < half ? Pair{c + half, -1, j} : Pair{c - half, +1, j - half};
}

// 007 multimodal RoPE: channels are split into consecutive chunks `sections[0..n)`; chunk i reads
// the cos/sin plane i % 3 (t, h, w). Seed: {32, 48, 48}; HF Qwen2.5-VL: {16, 24, 24, 16, 24, 24}.
// The rotation itself is over the full head (pairs c, c +- head_dim/2). Returns -1 if c is outside.
VLATTN_HD int mrope_plane(int c, const int* sections, int n) {
  int start = 0;
  for (int i = 0; i < n; ++i) {
    if (c < start + sections[i]) return c >= start ? i % 3 : -1;
    start += sections[i];
  }
  return -1;
}

// 034 vision K: three independent rotate-half RoPEs over consecutive segments split[0..3) (seed
// 42/42/44); segment s uses position grid_thw[..., s] and inv_freq = theta^(-2 f / W_s).
struct Segment {
  int index;  // 0 = t, 1 = h, 2 = w; -1 outside
  int base;
  int width;
};

VLATTN_HD Segment thw_segment(int c, const int* split) {
  int base = 0;
  for (int s = 0; s < 3; ++s) {
    if (c >= base && c < base + split[s]) return Segment{s, base, split[s]};
    base += split[s];
  }
  return Segment{-1, 0, 0};
}

// The 64 rotate-half pairs of the t/h/w segments numbered by their first channel: with even segment widths
// summing to 128 (the ops validate the split), segment s's pairs follow the base/2 pairs of the segments before
// it, so a first-half channel c is pair c - base/2. -1 for a second-half channel or one outside every segment.
// The RoPE pass deals the pairs to its lanes by this index (qkv::partners_3d, pos3d_cos_sin_split).
VLATTN_HD int thw_pair_index(int c, const int* split) {
  const Segment seg = thw_segment(c, split);
  if (seg.index < 0 || c - seg.base >= seg.width / 2) return -1;
  return c - seg.base / 2;
}

}  // namespace rope
}  // namespace vlattn
