"""The O projection's GEMM (vlattn.linear, the layer's config) after a predecessor of P CTAs, under PDL.

The placement probe (launch_probe.cu sections 4-6, sixtieth session) found a spin-kernel dependent's tail flat in
how many of its CTAs must wait for the predecessor's SMs. This asks the same of the real GEMM: a spin kernel of P
CTAs x 384 threads x 227 KB (one per SM, like the attention's) spinning SPIN_US, then vlattn.linear at 256 x 3584 x
3584 on t64x128x64_c1x1_pingpong (112 CTAs, what 007 B1 S256's O projection runs). "added" = the pair minus the
spin alone, L2 flushed before each rep, median of --reps. Run from the repository root on a GPU with vlattn built:

    nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a bench/micro/spin_lib.cu -o /tmp/spin_lib.so
    python3 bench/micro/o_after_spin.py --lib /tmp/spin_lib.so
"""
from __future__ import annotations

import argparse
import ctypes
import statistics

import torch

import vlattn
from vlattn.bench import CudaTimer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="/tmp/spin_lib.so")
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--spin-us", type=float, default=30.0, help="long enough for the host to queue the GEMM behind it")
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--config", default="t64x128x64_c1x1_pingpong")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.spin_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    clk = int(args.spin_us * 1.98e3)  # cycles at the max SM clock; the pair and the spin alone share it
    g = torch.Generator(device=dev).manual_seed(7)
    x = torch.randn(args.m, 3584, device=dev, dtype=torch.bfloat16, generator=g)
    w = torch.randn(3584, 3584, device=dev, dtype=torch.bfloat16, generator=g) * 0.02
    out = torch.empty(args.m, 3584, device=dev, dtype=torch.bfloat16)
    ref = (x.float() @ w.float().T).to(torch.bfloat16)
    vlattn.linear(x, w, out=out, config=args.config)
    torch.cuda.synchronize()
    err = (out.float() - ref.float()).abs().max().item()
    print(f"o_after_spin on {props.name} ({props.multi_processor_count} SMs); linear {args.m}x3584x3584 "
          f"{args.config}, max |err| vs fp32 matmul {err:.4f}; spin {args.spin_us} us; median of {args.reps}, L2 flushed")
    stream = torch.cuda.current_stream().cuda_stream

    def spin(p: int) -> None:
        rc = lib.spin_launch(p, 384, 227 * 1024, clk, 1, ctypes.c_void_p(stream))
        if rc != 0:
            raise RuntimeError(f"spin_launch: cudaError {rc}")

    timer = CudaTimer(dev)  # the bench's cold-L2 timer: drain, flush twice the L2, events around the call

    def timed(body) -> float:
        return statistics.median(timer(body, args.reps, 1))

    def gemm() -> None:
        vlattn.linear(x, w, out=out, config=args.config)

    alone = timed(gemm)
    print(f"{'GEMM alone (host launch latency included)':58s} {alone:8.2f} us")
    for p in (28, 56, 76, 112, 128, 132):
        s = timed(lambda: spin(p))
        both = timed(lambda: (spin(p), gemm()))
        free = props.multi_processor_count - p
        print(f"P = {p:3d} ({free:3d} SMs free for the GEMM's CTAs to wait on): spin {s:7.2f}  pair {both:7.2f}  "
              f"added {both - s:6.2f} us")


if __name__ == "__main__":
    main()
