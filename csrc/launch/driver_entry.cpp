// cuTensorMapEncodeTiled with the driver entry point resolved once per process.
//
// CUTLASS/CuTe encode every TMA descriptor through CUTLASS_CUDA_DRIVER_WRAPPER_CALL, which, unless
// CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL is defined, asks cudaGetDriverEntryPointByVersion for the
// function on *every* call (cutlass/cuda_host_adapter.hpp). One layer call encodes about ten maps (the
// QKV kernel's, attention's Q/K/V, CUTLASS's A/B). setup.py defines CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL,
// so those calls name cuTensorMapEncodeTiled directly, and this definition answers them without
// linking libcuda (CPU-only machines still import the extension): the lookup runs once.
//
// If libcuda's own cuTensorMapEncodeTiled is found first by the dynamic linker, the calls go there
// instead: the same function, also without a lookup.
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace {

using EncodeTiled = CUresult(CUDAAPI*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                       const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                       CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled resolve_encode_tiled() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  // 12000: the CUDA 12.0 signature, the one cuda.h declares (as CUTLASS asks for it).
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<EncodeTiled>(fn);
}

}  // namespace

extern "C" CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType,
                                                   cuuint32_t tensorRank, void* globalAddress,
                                                   const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                                   const cuuint32_t* boxDim, const cuuint32_t* elementStrides,
                                                   CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                                   CUtensorMapL2promotion l2Promotion,
                                                   CUtensorMapFloatOOBfill oobFill) {
  static const EncodeTiled encode = resolve_encode_tiled();  // thread-safe static init
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  return encode(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, boxDim, elementStrides,
                interleave, swizzle, l2Promotion, oobFill);
}
