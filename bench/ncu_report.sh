# Sourced by the bench/ncu_*.sh scripts (needs OUT set):
#
#   ncu_split_args [ncu launch-range args...] -- COMMAND [args...]
#
# The two halves of the functions' trailing arguments: NCU_RANGE (the ncu options before `--`) and NCU_CMD (the
# profiled command after it).
ncu_split_args() {
  NCU_RANGE=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    NCU_RANGE+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift  # the --
  NCU_CMD=("$@")
}
#
#   ncu_report NAME KERNEL_REGEX [ncu launch-range args...] -- COMMAND [args...]
#
# Nsight Compute's full set on the launches of COMMAND whose kernel name matches KERNEL_REGEX, kept as text under
# $OUT: NAME_run.log (COMMAND's output under ncu), NAME_details.log (the details page: durations, throughputs, issue
# and stall sections), NAME_source.csv.gz (the SASS source page with per-instruction counters;
# bench/ncu_source_groups.py reads it) and NAME_source.err. The binary report is removed (it does not come back from
# the device).
ncu_report() {
  local name=$1 regex=$2
  shift 2
  ncu_split_args "$@"
  ncu --set full --import-source no -k "regex:$regex" "${NCU_RANGE[@]}" -f -o "$OUT/$name" "${NCU_CMD[@]}" > "$OUT/${name}_run.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page details > "$OUT/${name}_details.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/${name}_source.csv" 2> "$OUT/${name}_source.err"
  gzip -f "$OUT/${name}_source.csv"
  rm -f "$OUT/$name.ncu-rep"
}

#   ncu_layer_metrics METRICS KERNEL_REGEX [ncu launch-range args...] -- COMMAND [args...]
#
# The same launches with the clocks a layer sees (no clock locking): the comma list METRICS per matching launch,
# printed (the kernel lines and the metric rows). Caches: NCU_LAYER_CACHE, ncu's --cache-control (default none: L2
# as the previous launches left it). The bench flushes L2 before every call, so for a layer's first kernel `all`
# (flush before each profiled launch) is what the bench sees; with `none` a repeated call finds its weights in L2
# (fifty-first session: 2 MB from DRAM of the split-K QKV's 33 MB, and a change that shortened it by 0.9 µs there
# moved the cold kernel and the layer by 0.0 and 0.2 µs).
ncu_layer_metrics() {
  local metrics=$1 regex=$2
  shift 2
  ncu_split_args "$@"
  ncu --cache-control "${NCU_LAYER_CACHE:-none}" --clock-control none -k "regex:$regex" "${NCU_RANGE[@]}" --metrics "$metrics" "${NCU_CMD[@]}" 2>&1 \
    | grep -E "$regex|gpu__|sm__|smsp__|dram__|launch__|lts__|l1tex__" | head -40
}
