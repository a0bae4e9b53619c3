#!/usr/bin/env bash
# ncu of the 007 attention kernel in probe_causal_kind.py's first three forms, in its launch order:
# the workload's mask, causal=True without a mask, both. Writes the details page (every section) and,
# per form, the SASS source page with its per-instruction counters (gzip'd CSV) under $OUT.
#
#   OUT=... bash bench/ncu_mask_vs_causal.sh 007:6     (vlattn-bench workload index, jsonl order)
set -u
w=${1:-007:6}
tag=${w/:/_}
OUT=${OUT:-$PWD/gpu_out}
ncu --set full --import-source no -k regex:attention_kernel --launch-count 3 -f -o "$OUT/ncu_$tag" \
  python3 bench/probe_causal_kind.py --workloads "$w" --iters 1 > "$OUT/ncu_${tag}_run.log" 2>&1
ncu -i "$OUT/ncu_$tag.ncu-rep" --page details > "$OUT/ncu_${tag}_details.log" 2>&1
if ! ncu -i "$OUT/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${tag}_source.csv" 2> "$OUT/ncu_${tag}_source.err"; then
  ncu -i "$OUT/ncu_$tag.ncu-rep" --page source --csv > "$OUT/ncu_${tag}_source.csv" 2>> "$OUT/ncu_${tag}_source.err"
fi
gzip -f "$OUT/ncu_${tag}_source.csv"
rm -f "$OUT/ncu_$tag.ncu-rep"
grep -E "attention_kernel|Duration|Executed Ipc|Issue Slots Busy|Executed Instructions  |No Eligible|Warp Cycles Per Issued" \
  "$OUT/ncu_${tag}_details.log"
ls -la "$OUT"/ncu_${tag}_source.csv.gz; head -c 600 "$OUT/ncu_${tag}_source.err"
