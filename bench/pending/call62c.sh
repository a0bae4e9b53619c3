#!/usr/bin/env bash
# The sixty-second session's third call, any sm_90 GPU (~60 s after the module's install):
#
#   run(command="bash bench/pending/call62c.sh <sha>", carry=[".whl", "prebuilt"])
#
# In call 4's timeline (probe_timeline --modes cold,graph, H100) 034 Lq 4096's attention kernel ran 698.6 µs in the
# eager (cold) calls against 639.3 in graph replay, kernel for kernel the same launches, every rep. Which part of the
# eager path makes it longer? ahead (eager launches queued behind a sleep: no host timing), cold and graph, on Lq 4096
# and Lq 8192; the modes in reverse order (a clock drift between the modes' blocks of reps flips with the order); then
# the same with VLATTN_PDL=0 (no programmatic dependent launch anywhere). Prediction in bench/NOTES.md.
set -uo pipefail
A=${1:?sha}
cd "$(dirname "$0")/../.."
T="python3 bench/probe_timeline.py --reps 10"
VLATTN_COMMIT=$A CALL_BUDGET_S=${CALL_BUDGET_S:-200} PROBE_TIMEOUT_S=120 \
  PROBE_CMDS="$T --modes ahead,cold,graph --workloads 034:5,034:10; $T --modes graph,cold,ahead --workloads 034:5; VLATTN_PDL=0 $T --modes ahead,cold,graph --workloads 034:5" \
  scripts/gpu_check.sh probe
