#!/usr/bin/env bash
# Kernel-only A/B of run-time switches under Nsight Compute (base clocks, caches flushed before each profiled
# launch): for each sorted-by-SOL workload index, switch and value, the GPU duration of the kernel matching
# KERNEL in bench/ncu_target.py's call (it runs the call 3 times; launches 2 and 3 are profiled). Settles what
# an event-timed A/B of a short kernel cannot (probe_attn_shapes.py carries ~13 us of host path per call).
#
#   bash bench/ncu_switch_ab.sh "DIAG_HALF WALK_CACHE TMA_O" "9 14"
#   env: KERNEL (regex, default kv_resident), WHAT (ncu_target.py's what, default attention), LAYER (007 | 034,
#        default 007), VALUES (default "0 1"), PREFIX (switch name prefix, default VLATTN_ATTN_)
# One line per (index, switch, value): the two durations in microseconds; ~15 s per line on the device.
set -u
switches=${1:?usage: bench/ncu_switch_ab.sh "SWITCH ..." ["INDEX ..."]}
indices=${2:-9}
kernel=${KERNEL:-kv_resident}
for idx in $indices; do
  for s in $switches; do
    for v in ${VALUES:-0 1}; do
      us=$(env "${PREFIX:-VLATTN_ATTN_}$s=$v" ncu --metrics gpu__time_duration.sum --print-units base -k "regex:$kernel" \
             --launch-skip 1 --launch-count 2 --csv python3 bench/ncu_target.py "${WHAT:-attention}" "${LAYER:-007}" \
             "$idx" 2>/dev/null \
           | awk -F'","' '/gpu__time_duration/ { v = $NF; gsub(/[",]/, "", v); u = $(NF - 1); gsub(/"/, "", u);
                                                 printf "%.2f ", (u == "nsecond" ? v / 1000 : (u == "msecond" ? v * 1000 : v)) }')
      echo "${LAYER:-007} idx $idx ${PREFIX:-VLATTN_ATTN_}$s=$v $kernel us: ${us:-(no launch matched)}"
    done
  done
done
