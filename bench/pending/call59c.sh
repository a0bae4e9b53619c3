#!/usr/bin/env bash
# The fifty-ninth session: the placement probe (bench/micro/launch_probe.cu section 4), any GPU, ~40 s:
#
#   run(command="bash bench/pending/call59c.sh")
#
# Prediction (bench/NOTES.md, fifty-ninth session: the O projection's tail after a large split-key grid): "added" = 5
# us + the latest dependent CTA's placement, and each CTA placed after the predecessor ends costs ~0.08 us. At P = 112
# (20 free SMs) G = 36 / 76 / 112 / 132 place 16 / 56 / 92 / 112 CTAs after it: added ~6 -> ~14 us; at P = 56 (76
# free) G <= 76 place none. Refuted if at P = 112 added(G = 132) - added(G = 36) < 2 us.
# Section 5 (sixtieth session), P = G = 112: under the same reading a ~ c ~ 5 + 92 x 0.08 ~ 12 us, e ~ 5 + 72 x 0.08
# ~ 11, d (every dependent CTA beside the predecessor) ~ 5-6 us; b (no PDL) ~ a plus a launch gap. If instead each late
# CTA pays one fixed start-up (not a per-CTA queue), a ~ e and section 4's added stays flat in G at P = 112.
# (The first launch_probe run, 2026-12-01, already read a 132-CTA dependent placed wholly after a 132-CTA predecessor at
# +0.1 us over its 10 us of work: the per-CTA reading is unlikely.) Section 6, the carve-out: a predecessor of 80 KB
# (like the split-key kernel) with its preference unset / 40% / MaxShared. Prediction (the reading that SMs configured
# for less shared memory are reconfigured before a 200 KB CTA lands): g - h >= 2 us of added; f shows which the driver
# picks. Refuted if f, g and h read within 1 us of each other and of a (section 5).
set -uo pipefail
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,clocks.sm --format=csv > "$R/gpu.txt" 2>&1
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/micro/launch_probe.cu -o /tmp/launch_probe \
  && /tmp/launch_probe --reps 31 2>&1 | tee "$R/launch_probe.log"
