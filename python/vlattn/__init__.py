"""vlattn: vision-language attention layers on hand-written CUTLASS/CuTe kernels.

    import vlattn
    out = vlattn.mrope_self_attention(hidden_states, q_weight, q_bias, k_weight, k_bias,
                                      v_weight, v_bias, o_weight, cos, sin, attention_mask)
    out = vlattn.vision_cross_attention(language_hidden_states, vision_hidden_states, ...)

The same ops are `torch.ops.vlattn.*` (functional and `.out` forms). See README.md.
"""
from . import _ext  # noqa: F401  (imports torch, then the compiled extension if it loads)
from . import dev, reference, workloads
from .attention import attention
from .gemm_configs import GEMM_CONFIGS
from .ops import (
    BACKENDS,
    available_backends,
    backend_for,
    extension_info,
    linear,
    mrope_qkv,
    mrope_self_attention,
    vision_cross_attention,
    vision_qkv,
)

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "GEMM_CONFIGS",
    "attention",
    "available_backends",
    "backend_for",
    "dev",
    "extension_info",
    "linear",
    "mrope_qkv",
    "mrope_self_attention",
    "reference",
    "vision_cross_attention",
    "vision_qkv",
    "workloads",
]
