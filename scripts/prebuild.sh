#!/usr/bin/env bash
# Build the extension on this (CPU) machine for the device machine, so that a device call skips its
# 130-200 s build: scripts/prebuilt.py says what is checked there and why.
#
#   scripts/prebuild.sh [REV]      # default HEAD; uncommitted edits are not in the build; nothing to do (exit 0)
#                                  # when prebuilt/ already holds REV's sources' module (PREBUILD_FORCE=1 builds)
#
# Then name `prebuilt` in the device call's carry (beside `.whl`); scripts/gpu_check.sh uses the module
# when it matches the device's tree and torch, and builds as before when not (PREBUILT=0 forces a build).
#
# Needs a Python with the device's version and torch (KINDS.md: Python 3.12, torch 2.11.0+cu130), the
# nvidia-cutlass wheel and ninja: PREBUILD_PYTHON (default /work/venv312/bin/python). One way to make it:
#   python3.12 -m venv /work/venv312 && /work/venv312/bin/pip install torch==2.11.0 "setuptools<82" ninja \
#     numpy .whl/nvidia_cutlass-4.2.0.0-py3-none-any.whl
# The commit is exported into PREBUILD_DIR/tree (default /work/.prebuild, outside the repository), where
# only files whose content changed are rewritten, so ninja recompiles only what changed since the last
# prebuild (a full build: ~10 min with MAX_JOBS=2 and ~3 GB per job).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
REV=${1:-HEAD}
SHA=$(git rev-parse --verify "$REV^{commit}")
PY=${PREBUILD_PYTHON:-/work/venv312/bin/python}
WORK=${PREBUILD_DIR:-/work/.prebuild}
OUTDIR=${PREBUILD_OUT:-$REPO/prebuilt}
[ -x "$PY" ] || { echo "prebuild: no Python at $PY (set PREBUILD_PYTHON; see the header of $0)"; exit 2; }
# The build overrides scripts/prebuilt.py refuses on the device (BUILD_ENV) must not shape the module here either.
for v in VLATTN_GEMM_CONFIGS CUTLASS_PATH NVCC_APPEND_FLAGS NVCC_PREPEND_FLAGS CFLAGS CPPFLAGS CXXFLAGS LDFLAGS PYTORCH_NVCC; do
  [ -z "${!v:-}" ] || { echo "prebuild: unset $v: the device's build does not read it"; exit 2; }
done

mkdir -p "$WORK/tree"
rm -rf "$WORK/export" && mkdir -p "$WORK/export"
git archive "$SHA" | tar -x -C "$WORK/export"
# A slot for these sources, built with this Python and torch, is already packed (the modules outlive sessions on
# some machines, and `device_prep.sh pending HEAD` names both revisions when they share sources): nothing to build.
# PREBUILD_FORCE=1 builds anyway.
if [ -z "${PREBUILD_FORCE:-}" ] && env -u PYTHONPATH "$PY" "$REPO/scripts/prebuilt.py" have --tree "$WORK/export" --out "$OUTDIR"; then
  rm -rf "$WORK/export"
  exit 0
fi
"$PY" "$REPO/scripts/prebuilt.py" sync --src "$WORK/export" --dst "$WORK/tree"
rm -rf "$WORK/export"

cd "$WORK/tree"
echo "prebuild: building ${SHA:0:10} with $("$PY" --version) in $WORK/tree (log: $WORK/build.log)"
t0=$SECONDS
# No PYTHONPATH: setup.py finds CUTLASS through the import system, which must be this venv's wheel.
if ! env -u PYTHONPATH MAX_JOBS=${MAX_JOBS:-2} "$PY" setup.py build_ext --inplace > "$WORK/build.log" 2>&1; then
  tail -30 "$WORK/build.log"
  # ninja will not recompile the units this build did compile: keep their warning lines for later manifests.
  "$PY" "$REPO/scripts/prebuilt.py" merge-warnings --tree "$WORK/tree" --build-log "$WORK/build.log" \
    --warning-store "$WORK/warnings.json" || true
  echo "prebuild: build failed"; exit 3
fi
echo "prebuild: built in $((SECONDS - t0)) s"
# The tree must still be the commit it was exported from (nothing edits it during the build).
env -u PYTHONPATH "$PY" "$REPO/scripts/prebuilt.py" pack --tree "$WORK/tree" --commit "$SHA" --build-log "$WORK/build.log" \
  --warning-store "$WORK/warnings.json" --out "$OUTDIR"
# The device call carries the working tree (tracked and untracked-not-ignored files) plus the carried paths,
# 64 MiB in all: say how close this comes (bench/runs grows every session; --keep 1 leaves one module).
"$PY" - "$REPO" "$OUTDIR" <<'PYEOF'
import os, pathlib, subprocess, sys
repo, outdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, check=True).stdout.split(b"\0")
tree = sum((repo / os.fsdecode(f)).stat().st_size for f in files if f and (repo / os.fsdecode(f)).is_file())
carried = {name: sum(p.stat().st_size for p in (repo / name).rglob("*") if p.is_file())
           for name in (".whl", "ab_overlay", outdir.relative_to(repo).as_posix() if outdir.is_relative_to(repo) else None)
           if name and (repo / name).is_dir()}
total = tree + sum(carried.values())
parts = ", ".join(f"{k} {v / 2**20:.1f}" for k, v in carried.items())
print(f"prebuild: a device call carrying {', '.join(carried) or 'nothing'} sends {total / 2**20:.1f} MiB "
      f"(tree {tree / 2**20:.1f}, {parts}) of 64 MiB" + ("  ** over 60 MiB: carry less **" if total > 60 * 2**20 else ""))
PYEOF
