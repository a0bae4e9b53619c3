"""The split-K QKV kernel's cold time against its grid size and its k range, for Nsight Compute:

    ncu --cache-control all --clock-control none -k regex:qkv_rope_splitk \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum python3 bench/probe_splitk_scaling.py

At 128 rows on `splitk3` (clusters of 3 along K), one case per (query heads, kv heads, hidden):
  28/4 (007: 36 head tiles, 108 CTAs), 14/2 (54 CTAs), 7/1 (27 CTAs), each at hidden 3584 (19 k tiles per rank)
  and 1792 (9-10). The same bytes per CTA on fewer CTAs separates a per-CTA limit (the time stays) from the
  machine's bandwidth (the time falls with the bytes); half the k range separates the stream from fixed costs.
Each case runs 3 times (ncu profiles every launch; read the last of each case); the labels print first, in order.
"""
import torch

import vlattn

CASES = [(28, 4, 3584), (14, 2, 3584), (7, 1, 3584), (28, 4, 1792), (14, 2, 1792), (7, 1, 1792)]


def case_inputs(hq: int, hkv: int, hidden: int, seq: int = 128):
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(hq * 100003 + hidden)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, device=dev, generator=g) * scale).to(bf16)

    x = randn(1, seq, hidden)
    w = [randn(h * 128, hidden, scale=hidden ** -0.5) for h in (hq, hkv, hkv)]
    b = [randn(h * 128, scale=0.1) for h in (hq, hkv, hkv)]
    ang = torch.rand(3, 1, seq, 128, device=dev, generator=g) * 6.283
    return x, w, b, ang.cos().to(bf16), ang.sin().to(bf16)


def main() -> None:
    for hq, hkv, hidden in CASES:
        print(f"case hq={hq} hkv={hkv} hidden={hidden} ctas={(hq + 2 * hkv) * 3}", flush=True)
    for hq, hkv, hidden in CASES:
        x, w, b, cos, sin = case_inputs(hq, hkv, hidden)
        for _ in range(3):
            vlattn.mrope_qkv(x, w[0], b[0], w[1], b[1], w[2], b[2], cos, sin, config="splitk3")
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
