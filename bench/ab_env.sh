#!/usr/bin/env bash
# Same-machine A/B of a development knob: run one command under VAR=value for each value, in rounds
# whose order reverses every other round (A B, B A, A B, ...), so that drift of the machine over a
# round falls on every arm alike (with a fixed A B order, a control that ran identical code in both
# arms read 1.6% slower in the second: 007 B64 S256, bench/NOTES.md fourteenth session call 4).
#   bench/ab_env.sh VAR "v1 v2" ROUNDS command args...
# In the command, {v} and {r} are replaced by the value and the round (e.g. for --json paths).
set -uo pipefail
var=$1; values=$2; rounds=$3; shift 3
read -ra forward <<< "$values"
reverse=()
for ((i = ${#forward[@]} - 1; i >= 0; i--)); do reverse+=("${forward[i]}"); done
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=("${forward[@]}"); else order=("${reverse[@]}"); fi
  for v in "${order[@]}"; do
    cmd=("${@//\{v\}/$v}")
    cmd=("${cmd[@]//\{r\}/$r}")
    echo "== round $r: $var=$v: ${cmd[*]}"
    env "$var=$v" "${cmd[@]}" || echo "== exit $?"
  done
done
