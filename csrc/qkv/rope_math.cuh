// Scalar RoPE arithmetic shared by every QKV epilogue (the fused kernels and the RoPE pass in
// sm90_qkv_rope.cuh, the CUTLASS GEMM epilogue in sm90_gemm_rope_epi.cuh): one definition, so every
// path rounds exactly as the reference does. This code is never built with fast math.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include <cutlass/cutlass.h>

namespace vlattn {
namespace qkv {

CUTLASS_DEVICE float bf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// out = bf16( bf16(x * c) + bf16(r * s) ) (the reference's bf16 steps; every operand a bf16 value) for a pair of
// channels in packed bf16x2 registers, in three sm_90 instructions instead of ~24 (unpack, fp32 multiply, round,
// repack per channel): mul.rn.bf16x2 rounds the exact product, as
// fp32 multiply + bf16 rounding does (a product of two bf16 values is exact in fp32 unless it is below
// fp32's normal range, |x * c| < 2^-126, where the fp32 route rounds twice: there the two may differ in
// the last bit of a bf16 subnormal); add.rn / sub.rn.bf16x2 of two bf16 values equals fp32 add + bf16
// rounding (the fp32 sum is exact, or off by less than a bf16 half-ulp away from a bf16 tie). `minus`
// takes the rotate-half sign: bf16(x c) - bf16(r s) == bf16(x c) + bf16((-r) s) (RN is sign-symmetric).
// Inline asm, so the compiler cannot contract a multiply and the add into one fma.
CUTLASS_DEVICE uint32_t rope_combine2(uint32_t x, uint32_t r, uint32_t c, uint32_t s, bool minus) {
  uint32_t xc, rs, out;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(xc) : "r"(x), "r"(c));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(rs) : "r"(r), "r"(s));
  if (minus) asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(xc), "r"(rs));
  else asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(xc), "r"(rs));
  return out;
}

// Two bf16 values held in fp32 (exactly representable: no rounding happens) as one bf16x2 register, `lo`
// in the low half (channel c), `hi` in the high half (channel c + 1), the layout of a uint4 of 8 channels.
CUTLASS_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// cos/sin of an integer position times an inverse frequency, as the reference computes its tables:
// fp32 angle, accurate cosf/sinf (positions reach 8191: fast-math intrinsics are wrong there), rounded
// to bf16.
CUTLASS_DEVICE void pos_cos_sin(int64_t pos, float inv_freq, float& c, float& s) {
  const float angle = __fmul_rn(static_cast<float>(pos), inv_freq);
  c = bf(cosf(angle));
  s = bf(sinf(angle));
}

// inv_freq = 1 / theta^(2f / W), in the reference's fp32 steps: torch divides the arange by the CPU
// scalar W as a multiply by the fp32 reciprocal, raises with powf, and `1.0 / t` is reciprocal(t).
CUTLASS_DEVICE float inv_freq(float theta, int f, int width) {
  const float exponent = __fmul_rn(static_cast<float>(2 * f), __fdiv_rn(1.0f, static_cast<float>(width)));
  return __fdiv_rn(1.0f, powf(theta, exponent));
}

}  // namespace qkv
}  // namespace vlattn
