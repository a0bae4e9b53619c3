#!/usr/bin/env bash
# Before / after of whole-file changes in one device call, on one machine and one build tree: run
# AB_CMDS on the extension as built, then for each DIR overlay its files onto the tree (DIR mirrors
# the repository's layout; overlays accumulate), rebuild in place (ninja recompiles only the
# translation units that include a changed file) and run AB_CMDS again.
#
#   AB_CMDS='bash bench/ncu_resident.sh 9 :: python3 bench/probe_attn_shapes.py --workloads 034:1 --iters 20' \
#     OUT=... bash bench/ab_overlay.sh ab_overlay/v1 [ab_overlay/v2 ...]
#
# Commands are separated by ' :: ' (not ';', so that the whole call fits in one of gpu_check.sh's
# ';'-separated PROBE_CMDS). Each arm k (0 = as built) writes under $OUT/ab/<k>/ (its commands see that as $OUT): cmd_<i>.log per
# command, build.log per rebuild. Everything is packed into $OUT/ab.tar.gz at the end (the device tool
# returns at most 8 files). Meant to run from scripts/gpu_check.sh's PROBE_CMDS after its build, so
# that a change not yet on a branch that survives the session (bench/pending/) is measured against the
# code it changes in the same process conditions. Keep overlays under ab_overlay/ (git-ignored: name it
# in the device call's carry, e.g. carry [".whl", "ab_overlay"]).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}
root=$OUT/ab
mkdir -p "$root"
status=0

run_arm() {
  local k=$1 dir=$root/$1 i=0 cmd
  mkdir -p "$dir"
  local cmds
  mapfile -t cmds <<< "${AB_CMDS// :: /$'\n'}"
  for cmd in "${cmds[@]}"; do
    [ -n "$cmd" ] || continue
    i=$((i + 1))
    echo "== arm $k cmd $i: $cmd"
    OUT=$dir bash -c "$cmd" > "$dir/cmd_$i.log" 2>&1 || { echo "   rc=$?"; status=1; }
    tail -30 "$dir/cmd_$i.log"
  done
}

run_arm 0
k=0
for overlay in "$@"; do
  k=$((k + 1))
  [ -d "$overlay" ] || { echo "overlay $overlay: not a directory"; status=2; break; }
  echo "== arm $k: overlay $overlay: $(cd "$overlay" && find . -type f | sed 's|^\./||' | tr '\n' ' ')"
  cp -r "$overlay"/. .
  mkdir -p "$root/$k"
  t0=$SECONDS
  MAX_JOBS=${MAX_JOBS:-16} python3 setup.py build_ext --inplace > "$root/$k/build.log" 2>&1 \
    || { echo "rebuild failed"; tail -30 "$root/$k/build.log"; status=3; break; }
  echo "== arm $k rebuilt in $((SECONDS - t0)) s"
  run_arm "$k"
done
tar czf "$OUT/ab.tar.gz" -C "$OUT" ab && rm -rf "$root"
exit $status
