#!/usr/bin/env bash
# The fifty-eighth session's A/B of the split-key kernel's mask preload (branch maskpre; its csrc diff against main is
# bench/pending/maskpre.diff), any GPU, from the maskpre tree with both module slots in prebuilt/:
#
#   run(command="bash bench/pending/call58e.sh <maskpre sha> <main sha>", carry=[".whl", "prebuilt"])
#
# 1. maskpre's split-key tests and memcheck / racecheck of the 64-key masked build.
# 2. B A B A: four processes, the diff reverse-applied for main's (A), each the layers bench on 007 B1 S128 / B1 S256 /
#    034 B2 Lq128 with --switch VLATTN_ATTN_SPLIT_KEYS=1,2 (mode 2 puts B1 S256 on the split-key kernel too).
# Prediction (bench/NOTES.md): B1 S128 -0.3 to -1.0 us in graph replay and eager (both rounds), B1 S256 under mode 2
# likewise (still slower than the rule's staged kernel), 034 B2 Lq128 (unmasked) within +-0.5 us.
set -uo pipefail
B_SHA=${1:?maskpre sha}
A_SHA=${2:?main sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
D=bench/pending/maskpre.diff
T=tests/test_attention.py::test_split_keys_kernel_matches_reference
OUT=$R/t VLATTN_COMMIT=$B_SHA CALL_BUDGET_S=120 SANITIZE_TIMEOUT_S=60 SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_TESTS="$T[B1_Hq28_Hkv4_Sq128_Sk128_causal_min_cFalse_bFalse] $T[B2_Hq8_Hkv2_Sq65_Sk40_random_cTrue_bFalse]" \
  scripts/gpu_check.sh sanitize
OUT=$R/t2 VLATTN_COMMIT=$B_SHA CALL_BUDGET_S=80 scripts/gpu_check.sh probe -p no:cacheprovider tests/test_attention.py -k split_keys
W='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check --switch VLATTN_ATTN_SPLIT_KEYS=1,2 --workloads 007:10,007:15,034:15'
for i in 1 2; do
  OUT=$R/b$i VLATTN_COMMIT=$B_SHA CALL_BUDGET_S=60 PROBE_TIMEOUT_S=45 PROBE_CMDS="$W --json \$OUT/ab.json" scripts/gpu_check.sh probe
  git apply -R "$D" || { echo "reverse apply failed"; break; }
  OUT=$R/a$i VLATTN_COMMIT=$A_SHA CALL_BUDGET_S=60 PROBE_TIMEOUT_S=45 PROBE_CMDS="$W --json \$OUT/ab.json" scripts/gpu_check.sh probe
  git apply "$D" || { echo "apply failed"; break; }
done
for d in b1 a1 b2 a2; do echo "== $d"; PYTHONPATH=python python3 bench/ab_summary.py "$R/$d/ab.json"; done
cd "$R" && tar czf all.tar.gz $(ls -d t t2 a1 a2 b1 b2 2>/dev/null)
