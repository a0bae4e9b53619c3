#!/usr/bin/env bash
# Everything a device call wants from this (CPU) machine, from a fresh machine, in one command:
#
#   scripts/device_prep.sh [REV ...]      # default HEAD; `scripts/device_prep.sh HEAD pending` also builds
#                                         # HEAD + bench/pending/0*.patch as the branch `pending`
#
#  1. .whl/ holds the nvidia-cutlass wheel requirements.txt pins (the device has no network; gpu_check.sh
#     installs it there from .whl/);
#  2. a Python like the device's (3.12, torch 2.11.0+cu130: the device tool's KINDS.md) at PREBUILD_PYTHON
#     (default /work/venv312), made with pyenv's or PATH's python3.12 and the local package index;
#  3. scripts/prebuild.sh REV for each REV, into prebuilt/ (~8 min a full build on 2 cores; a second REV
#     recompiles only the units whose sources differ; a REV whose sources' module prebuilt/ already holds, built
#     with this Python, torch, CUTLASS and nvcc, is skipped in ~2 s).
#
# Idempotent: each step is skipped when its result is there. The machines here start bare every session
# (.whl/, prebuilt/ and the venvs are outside git), so a session that expects a device runs this first, in
# the background (`nohup scripts/device_prep.sh HEAD > /tmp/device_prep.log 2>&1 &`), and carries
# `[".whl", "prebuilt"]` on every call once it has finished. A call made before it finishes builds on the
# device as before (gpu_check.sh says "prebuilt not used: ...").
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
VENV312=${PREBUILD_VENV:-/work/venv312}
export PREBUILD_PYTHON=${PREBUILD_PYTHON:-$VENV312/bin/python}
CUTLASS_PIN=$(sed -n 's/^nvidia-cutlass==\([0-9.]*\).*/\1/p' requirements.txt)
[ -n "$CUTLASS_PIN" ] || { echo "device_prep: requirements.txt pins no nvidia-cutlass==X"; exit 2; }
t0=$SECONDS

# 1. The cutlass wheel.
if ! ls .whl/nvidia_cutlass-"$CUTLASS_PIN"-*.whl >/dev/null 2>&1; then
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: -d .whl "nvidia-cutlass==$CUTLASS_PIN"
fi
WHEEL=$(ls .whl/nvidia_cutlass-"$CUTLASS_PIN"-*.whl | head -1)
echo "device_prep: wheel $WHEEL ($((SECONDS - t0)) s)"

# 2. The device-like Python.
if ! "$PREBUILD_PYTHON" -c 'import torch, ninja, setuptools, cutlass_library' >/dev/null 2>&1; then
  if [ ! -x "$PREBUILD_PYTHON" ]; then
    # pyenv's shim is on PATH but fails unless 3.12 is selected: try its install first, and each candidate runs.
    PY312=
    for c in $(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null) $(command -v python3.12 || true); do
      if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then PY312=$c; break; fi
    done
    [ -n "$PY312" ] || { echo "device_prep: no working python3.12 in ~/.pyenv or on PATH (the device runs 3.12)"; exit 2; }
    "$PY312" -m venv "$VENV312"
  fi
  # torch 2.11.0 is the device's; the local index has the +cu130 build with its CUDA wheels (~1.5 GB).
  "$PREBUILD_PYTHON" -m pip install -q torch==2.11.0 "setuptools<82" ninja numpy pytest "$WHEEL"
fi
"$PREBUILD_PYTHON" -c 'import sys, torch; print("device_prep: python", sys.version.split()[0], "torch", torch.__version__, torch.version.git_version[:12])'
echo "device_prep: python ready ($((SECONDS - t0)) s)"

# 3. The modules. `pending` is HEAD + bench/pending/0*.patch, made as the branch `pending` (the device call runs from
#    that commit: VLATTN_COMMIT=$(git rev-parse pending)) in a scratch worktree, so this checkout is not touched.
make_pending() {
  local wt n
  n=$(ls bench/pending/0*.patch 2>/dev/null | wc -l)
  [ "$n" -gt 0 ] || { echo "device_prep: no bench/pending/0*.patch"; return 2; }
  if [ "$(git symbolic-ref -q --short HEAD || true)" = pending ]; then
    echo "device_prep: the branch pending is checked out here; check out main (the series' base) and run again"; return 2
  fi
  wt=$(mktemp -d /tmp/vlattn_pending.XXXXXX)
  git worktree add -q --detach "$wt" HEAD
  if ! git -C "$wt" -c user.name="${GIT_AUTHOR_NAME:-device_prep}" -c user.email="${GIT_AUTHOR_EMAIL:-device_prep@localhost}" \
      am -q "$REPO"/bench/pending/0*.patch; then
    git -C "$wt" am --abort || true; git worktree remove --force "$wt"
    echo "device_prep: bench/pending/*.patch do not apply on HEAD"; return 3
  fi
  git branch -f pending "$(git -C "$wt" rev-parse HEAD)"
  git worktree remove --force "$wt"
  echo "device_prep: branch pending = $(git rev-parse --short pending) (HEAD + $n patches)"
}
[ $# -gt 0 ] || set -- HEAD
for rev in "$@"; do
  [ "$rev" != pending ] || make_pending
  scripts/prebuild.sh "$rev"
done
echo "device_prep: done in $((SECONDS - t0)) s; carry [\".whl\", \"prebuilt\"]"
ls "${PREBUILD_OUT:-prebuilt}" 2>/dev/null || true
