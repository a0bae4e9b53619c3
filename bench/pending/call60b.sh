#!/usr/bin/env bash
# The sixtieth session, one device call from the branch `carveout` (its module prebuilt here; VLATTN_SMEM_CARVEOUT
# lives only there: refuted, not on main), any GPU:
#
#   run(command="bash bench/pending/call60b.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. The placement and carve-out probe (call59c.sh: launch_probe sections 4-6, ~40 s; predictions there).
# 2. On an H200 only: the README run (readme_run.sh, ~300 s; README_SKIP=1 leaves it out). The tree is main's plus
#    VLATTN_SMEM_CARVEOUT, off by default: the same kernels and launches, two relaxed atomic loads more per launch.
# 3. In-process A/B `--switch VLATTN_SMEM_CARVEOUT=1,0`, 40 calls in 4 rounds: 007 B1 S256 and 034 B2 Lq128 with
#    VLATTN_ATTN_SPLIT_KEYS=2 (the split-key kernel, ~80 KB, before the O projection's ~200 KB CTAs), then five
#    small layers under the default rules (007 B1 S128 / S256 / S512, 034 B2 Lq128 / Lq256).
#    Prediction (the reading that SMs left configured for the split-key kernel's shared memory are reconfigured
#    before the O projection's CTAs land): on - off <= -2 us at both split-key layers in graph replay (last
#    session's O tail was 4.6 / 4.1 us longer after the split-key kernel); under the default rules -0 to -2 us
#    (the RoPE pass, ~small shared memory, before the attention's 226 KB CTAs). Refuted if the split-key arms move
#    by less than 1 us.
# Only all60b.tar.gz comes back (the device returns at most 8 files).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
mkdir -p "$R/probe" && OUT=$R/probe timeout 120 bash bench/pending/call59c.sh
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) [ -n "${README_SKIP:-}" ] || README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call60b ;;
  *) echo "call60b: not an H200: no README run" ;;
esac
L='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --switch VLATTN_SMEM_CARVEOUT=1,0'
S='PYTHONPATH=python python3 bench/ab_summary.py'
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-150} PROBE_TIMEOUT_S=70 \
  PROBE_CMDS="VLATTN_ATTN_SPLIT_KEYS=2 $L --workloads 007:15,034:15 --json \$OUT/split.json; $L --workloads 007:10,007:15,007:8,034:15,034:0 --json \$OUT/rule.json; $S \$OUT/split.json; $S \$OUT/rule.json" \
  scripts/gpu_check.sh probe tests/test_dev.py tests/test_ops.py::test_native_smem_carveout_same_bits
cd "$R" && d=$(ls -d probe readme ab 2>/dev/null; true) && tar czf all60b.tar.gz $d && rm -rf $d
