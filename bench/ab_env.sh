#!/usr/bin/env bash
# Same-machine A/B of a development knob: run one command under VAR=value for each value, in
# alternating rounds (A B A B ...), so that drift of the machine shows up in both arms.
#   bench/ab_env.sh VAR "v1 v2" ROUNDS command args...
# In the command, {v} and {r} are replaced by the value and the round (e.g. for --json paths).
set -uo pipefail
var=$1; values=$2; rounds=$3; shift 3
for ((r = 1; r <= rounds; r++)); do
  for v in $values; do
    cmd=("${@//\{v\}/$v}")
    cmd=("${cmd[@]//\{r\}/$r}")
    echo "== round $r: $var=$v: ${cmd[*]}"
    env "$var=$v" "${cmd[@]}" || echo "== exit $?"
  done
done
