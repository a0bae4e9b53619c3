"""A prebuilt extension for the device machine: built here, carried there, used only when it matches.

A device call spends 130-200 s of its 600 s building the extension (bench/NOTES.md). The build needs no GPU,
so `scripts/prebuild.sh` runs it on this machine against the device's Python and torch (3.12, torch
2.11.0+cu130: the device tool's KINDS.md) from a clean export of one commit, and `pack` leaves under prebuilt/
(ignored by git; name it in the device call's `carry`) the module compressed and a manifest of what it was
built from, in a folder named by the source hash (so main's and a pending branch's builds can travel
together). On the device `scripts/gpu_check.sh` calls `unpack`, which installs the module in place of a
build only if everything the binary depends on matches:

- the source hash: the content of every file the build reads from the tree (`source_files`), hashed here
  at pack time over the exported commit and there over the device's working tree, so an edit not in the
  commit, a different commit or a pending patch applied on top all miss;
- Python's extension suffix (the interpreter ABI), torch's version and git revision (the C++ ABI and the
  headers the binary was compiled against), and the nvidia-cutlass wheel's version where one is installed;
- no build override in the environment (`BUILD_ENV`);
- the module's own SHA-256 after decompression.

Anything else makes `unpack` print why and exit 1, and gpu_check.sh builds as before. The nvcc and host
compiler versions are printed, not compared: the binary is what this machine's nvcc and g++ made (the device
image's g++ differs: host code only), and the summary says which. Not for `bench/ab_overlay.sh` runs, whose
arms rebuild in place (gpu_check.sh builds on the device when PROBE_CMDS names it). Plain Python, no torch at
import (the tests run it on the CPU machine).

    python3 scripts/prebuilt.py hash [ROOT]
    python3 scripts/prebuilt.py pack --tree DIR --commit SHA [--build-log LOG] [--warning-store JSON]
                                     [--out prebuilt] [--keep 2]
    python3 scripts/prebuilt.py unpack [--root .] [--dir prebuilt] [--warnings FILE]
    python3 scripts/prebuilt.py smoke [--root .]   # after unpack: the module loads and throws cleanly
    python3 scripts/prebuilt.py sync --src DIR --dst DIR      # prebuild.sh: a commit's export onto the tree
    python3 scripts/prebuilt.py merge-warnings --tree DIR --build-log LOG --warning-store JSON
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import lzma
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

FORMAT = 2
MANIFEST = "manifest.json"
# Everything setup.py reads from the tree to produce the module (besides CUTLASS's headers and torch's,
# which the manifest pins by version): the hand-written sources, the build script and its flags, the GEMM
# config list and the tuned table compiled into the registry.
SOURCE_DIRS = ("csrc",)
SOURCE_FILES = ("setup.py", "scripts/build_flags.py", "python/vlattn/gemm_configs.py",
                "python/vlattn/data/gemm_tuned_h200.json")
# Build overrides in the environment: setup.py's own (SETUP_ENV), and the compilers' and setuptools' (nvcc
# appends or prepends flags, setuptools adds C/C++/link flags, torch takes another nvcc). A module built without
# them is not what they ask for. (CUDA_HOME, TORCH_CUDA_ARCH_LIST and MAX_JOBS change no code: the explicit
# -gencode of scripts/build_flags.py decides the device code.)
SETUP_ENV = ("VLATTN_GEMM_CONFIGS", "CUTLASS_PATH")
BUILD_ENV = SETUP_ENV + ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CFLAGS", "CPPFLAGS", "CXXFLAGS", "LDFLAGS",
                         "PYTORCH_NVCC")
CUTLASS_DIST = "nvidia-cutlass"  # the headers' version: setup.py reads CUTLASS from this wheel
_SKIP_PARTS = {"__pycache__"}
SLOT_CHARS = 16  # prebuilt/<the first 16 hex digits of the source hash>/: one module per source state


class Mismatch(Exception):
    """The prebuilt module does not fit this tree or interpreter; the message says what differs."""


def source_files(root: pathlib.Path) -> list[str]:
    """Relative paths (POSIX) of the files whose content decides the module, sorted."""
    root = pathlib.Path(root)
    found = []
    for d in SOURCE_DIRS:
        base = root / d
        if not base.is_dir():
            raise Mismatch(f"{base} is not a directory")
        for p in base.rglob("*"):
            rel = p.relative_to(root)
            if p.is_file() and not _SKIP_PARTS & set(rel.parts) and p.suffix != ".pyc":
                found.append(rel.as_posix())
    for f in SOURCE_FILES:
        if not (root / f).is_file():
            raise Mismatch(f"{root / f} is missing")
        found.append(f)
    return sorted(set(found))


def source_hash(root: pathlib.Path) -> str:
    """SHA-256 over each source file's path and content: the same tree gives the same hash anywhere."""
    root = pathlib.Path(root)
    h = hashlib.sha256()
    for rel in source_files(root):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256((root / rel).read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


def nvcc_version() -> str:
    """The last line of `nvcc --version` (its build), or why there is none."""
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for exe in (os.path.join(cuda, "bin", "nvcc"), "nvcc"):
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        lines = [ln for ln in out.splitlines() if ln.strip()]
        if lines:
            return " / ".join(lines[-2:])
    return "nvcc not found"


def cxx_version() -> str:
    """The first line of `c++ --version`: the host code's compiler (informational: the device's may differ)."""
    try:
        out = subprocess.run(["c++", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "c++ not found"
    return out.splitlines()[0] if out else "c++ not found"


def cutlass_version() -> str | None:
    """The installed nvidia-cutlass wheel's version, None when there is none."""
    import importlib.metadata

    try:
        return importlib.metadata.version(CUTLASS_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_identity() -> dict:
    try:
        import torch  # only here: pack runs under the build's Python, unpack under the device's
    except ImportError as e:
        raise Mismatch(f"this Python has no torch ({e})") from None
    return {"torch_version": torch.__version__, "torch_git_version": torch.version.git_version}


# The lines gpu_check.sh's grep collects from a device build (ptxas spills and warnings, errors, C7513).
_WARNING = re.compile(r"Registers are spilled|ptxas (warning|error)|error:|C7513")


def build_warnings(log_text: str) -> list[list]:
    """The warning lines of a build log (``_WARNING``) as [count, line] pairs, sorted by line."""
    counts: dict[str, int] = {}
    for ln in log_text.splitlines():
        if _WARNING.search(ln):
            counts[ln.strip()] = counts.get(ln.strip(), 0) + 1
    return [[n, ln] for ln, n in sorted(counts.items())]


_STEP = re.compile(r"^\[\d+/\d+\] (.*)$")
_SOURCE = re.compile(r"(?:^|\s)-c\s+(\S+\.(?:cu|cpp))(?:\s|$)")


def merge_build_log(log_text: str, store: pathlib.Path, tree: pathlib.Path) -> str:
    """ninja recompiles only what changed, so one build's log holds only those translation units' warnings.
    Keep each unit's warning lines in ``store`` (JSON: source -> lines), replace the units this log compiled,
    drop units whose source is gone, and return every unit's lines as one log text."""
    try:
        units = json.loads(pathlib.Path(store).read_text())
    except (OSError, ValueError):
        units = {}
    current = None
    fresh: dict[str, list[str]] = {}
    for ln in log_text.splitlines():
        m = _STEP.match(ln)
        if m:
            src = _SOURCE.findall(m.group(1))
            current = src[-1] if src else None
            if current is not None:
                fresh[current] = []
        elif current is not None:
            fresh[current].append(ln)
    for src, lines in fresh.items():
        units[src] = [ln for ln in lines if _WARNING.search(ln)]
    units = {src: lines for src, lines in units.items() if pathlib.Path(tree, src).is_file()}
    pathlib.Path(store).write_text(json.dumps(units, indent=1, sort_keys=True) + "\n")
    return "\n".join(ln for lines in units.values() for ln in lines)


def warning_count(manifest: dict, what: str) -> int:
    return sum(n for n, ln in manifest["build_warnings"] if what in ln)


def sync_tree(src: pathlib.Path, dst: pathlib.Path, keep: tuple[str, ...] = ("build",)) -> int:
    """Make ``dst`` hold exactly ``src``'s files (prebuild.sh: a commit's export onto the build tree), rewriting
    only files whose content differs, so that ninja recompiles only what changed; top-level folders in ``keep``
    (ninja's objects, setup.py's generated sources) and built modules python/vlattn/_C.* stay. Returns the
    number of files written."""
    import filecmp

    src, dst = pathlib.Path(src), pathlib.Path(dst)
    wanted = {p.relative_to(src) for p in src.rglob("*") if p.is_file() or p.is_symlink()}
    dirs = {q for rel in wanted for q in rel.parents}
    dst.mkdir(parents=True, exist_ok=True)
    # First remove what src does not have (and a folder where src has a file), deepest first; then copy: a
    # path that turned from a file into a folder (or back) cannot block the copy.
    for p in sorted(dst.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        rel = p.relative_to(dst)
        if rel.parts[0] in keep or (rel.parts[:2] == ("python", "vlattn") and p.name.startswith("_C.")):
            continue
        if p.is_dir() and not p.is_symlink():
            if rel in wanted:
                shutil.rmtree(p)
            elif rel not in dirs and not any(p.iterdir()):
                p.rmdir()
        elif rel not in wanted or rel in dirs:
            p.unlink()
    written = 0
    for rel in sorted(wanted):
        s, d = src / rel, dst / rel
        if not s.is_symlink() and d.is_file() and not d.is_symlink() and filecmp.cmp(s, d, shallow=False):
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        if d.is_symlink() or d.exists():
            d.unlink()
        if s.is_symlink():
            d.symlink_to(os.readlink(s))
        else:
            shutil.copyfile(s, d)  # a fresh mtime: ninja sees the change
        written += 1
    return written


def find_module(tree: pathlib.Path) -> pathlib.Path:
    mods = sorted((pathlib.Path(tree) / "python" / "vlattn").glob("_C.*.so"))
    if len(mods) != 1:
        raise Mismatch(f"expected one built module python/vlattn/_C.*.so under {tree}; found {len(mods)}")
    return mods[0]


def pack(tree: pathlib.Path, commit: str, out: pathlib.Path, build_log: str = "",
         identity: dict | None = None, keep: int = 2, cutlass: str | None = None) -> dict:
    """Compress the module built in ``tree`` into ``out``/<source hash>/ with its manifest (the newest ``keep``
    such slots stay); returns the manifest."""
    tree, out = pathlib.Path(tree), pathlib.Path(out)
    module = find_module(tree)
    data = module.read_bytes()
    suffix = module.name[len("_C"):]
    if suffix != sysconfig.get_config_var("EXT_SUFFIX"):
        raise Mismatch(f"{module.name} was not built by this Python (suffix {sysconfig.get_config_var('EXT_SUFFIX')})")
    cutlass = cutlass if cutlass is not None else cutlass_version()
    if cutlass is None:
        raise Mismatch(f"no {CUTLASS_DIST} installed: which CUTLASS the module was built with is unknown")
    manifest = {
        "format": FORMAT,
        "commit": commit,
        "source_hash": source_hash(tree),
        "module": module.name,
        "module_sha256": hashlib.sha256(data).hexdigest(),
        "module_bytes": len(data),
        "ext_suffix": suffix,
        "python": sys.version.split()[0],
        **(identity if identity is not None else torch_identity()),
        "nvcc": nvcc_version(),
        "cxx": cxx_version(),
        "cutlass": cutlass,
        "built_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "build_warnings": build_warnings(build_log),
    }
    slot = out / manifest["source_hash"][:SLOT_CHARS]
    if slot.exists():
        shutil.rmtree(slot)
    slot.mkdir(parents=True)
    (slot / (module.name + ".xz")).write_bytes(lzma.compress(data, preset=6))
    (slot / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    # The carry limit (64 MiB with the tree) holds about two modules: keep the newest ``keep``.
    slots = sorted((d for d in out.iterdir() if (d / MANIFEST).is_file()), key=lambda d: (d / MANIFEST).stat().st_mtime)
    for d in slots[:-keep] if keep > 0 else []:
        shutil.rmtree(d)
    return manifest


def check(manifest: dict, here: str, identity: dict, ext_suffix: str, env: dict, cutlass: str | None) -> None:
    """Raise Mismatch unless the manifest's module fits this tree (source hash ``here``), interpreter and
    environment. ``cutlass``: the nvidia-cutlass version a build here would use (None: none is installed, so no
    build could run here, and the module's CUTLASS is taken as it is)."""
    if manifest.get("format") != FORMAT:
        raise Mismatch(f"manifest format {manifest.get('format')}, this script reads {FORMAT}")
    if cutlass is not None and manifest["cutlass"] != cutlass:
        raise Mismatch(f"built with {CUTLASS_DIST} {manifest['cutlass']}, a build here would use {cutlass}")
    set_env = [k for k in BUILD_ENV if env.get(k)]
    if set_env:
        raise Mismatch(f"{', '.join(set_env)} set: the build must honour it")
    if manifest["ext_suffix"] != ext_suffix:
        raise Mismatch(f"built for {manifest['ext_suffix']}, this Python loads {ext_suffix}")
    for key in ("torch_version", "torch_git_version"):
        if manifest[key] != identity[key]:
            raise Mismatch(f"built against {key} {manifest[key]}, this Python has {identity[key]}")
    if manifest["source_hash"] != here:
        raise Mismatch(f"built from commit {manifest['commit'][:10]} whose sources differ from this tree's "
                       f"(hash {manifest['source_hash'][:12]} vs {here[:12]})")


_UNSET = object()


def checked_slot(tree: pathlib.Path, out: pathlib.Path, identity: dict | None = None, ext_suffix: str | None = None,
                 env: dict | None = None, cutlass=_UNSET) -> tuple[pathlib.Path, dict]:
    """The slot in ``out`` for ``tree``'s sources and its manifest, checked against this interpreter and environment
    (check()); Mismatch with the reason when there is none or it does not fit."""
    here = source_hash(tree)
    slot = out / here[:SLOT_CHARS]
    if not (slot / MANIFEST).is_file():
        have = []
        for d in sorted(out.glob("*/" + MANIFEST)):
            try:
                have.append(json.loads(d.read_text())["commit"][:10])
            except (OSError, ValueError, KeyError):
                have.append(f"{d.parent.name} (unreadable)")
        raise Mismatch(f"none was built from this tree's sources (hash {here[:12]}); {out} has "
                       f"{', '.join(have) if have else 'none'}")
    try:
        manifest = json.loads((slot / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise Mismatch(f"no readable {slot / MANIFEST}: {e}") from None
    check(manifest, here, identity if identity is not None else torch_identity(),
          ext_suffix if ext_suffix is not None else sysconfig.get_config_var("EXT_SUFFIX"),
          os.environ if env is None else env, cutlass_version() if cutlass is _UNSET else cutlass)
    return slot, manifest


def unpack(root: pathlib.Path, src: pathlib.Path, identity: dict | None = None, ext_suffix: str | None = None,
           env: dict | None = None, cutlass=_UNSET) -> dict:
    """Install the prebuilt module into ``root``/python/vlattn if it fits (else Mismatch); returns the manifest."""
    root = pathlib.Path(root)
    src, manifest = checked_slot(root, pathlib.Path(src), identity, ext_suffix, env, cutlass)
    try:
        data = lzma.decompress((src / (manifest["module"] + ".xz")).read_bytes())
    except (OSError, lzma.LZMAError) as e:
        raise Mismatch(f"cannot read the compressed module: {e}") from None
    if hashlib.sha256(data).hexdigest() != manifest["module_sha256"]:
        raise Mismatch("the decompressed module's SHA-256 differs from the manifest's")
    dest_dir = root / "python" / "vlattn"
    for old in dest_dir.glob("_C.*.so"):
        old.unlink()  # a module left by an earlier build on a warm machine must not shadow this one
    tmp = dest_dir / (manifest["module"] + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.replace(dest_dir / manifest["module"])
    return manifest


def have(tree: pathlib.Path, out: pathlib.Path, identity: dict | None = None, ext_suffix: str | None = None,
         env: dict | None = None, cutlass=_UNSET, nvcc: str | None = None) -> dict:
    """The manifest of the module already packed in ``out`` for ``tree``'s sources, if a build here (this Python,
    torch, CUTLASS and nvcc) would make the same one; else Mismatch (why it must be built)."""
    slot, manifest = checked_slot(pathlib.Path(tree), pathlib.Path(out), identity, ext_suffix, env, cutlass)
    nvcc = nvcc if nvcc is not None else nvcc_version()
    if manifest["nvcc"] != nvcc:
        raise Mismatch(f"{slot.name} was built with {manifest['nvcc']}, this machine has {nvcc}")
    if not (slot / (manifest["module"] + ".xz")).is_file():
        raise Mismatch(f"{slot} has a manifest but no {manifest['module']}.xz")
    return manifest


def smoke(root: pathlib.Path | None = None) -> str:
    """Load the module and make it throw: a module whose C++ ABI does not match torch's loads fine and then
    crashed at its first TORCH_CHECK failure (setup.py's note on the C++ standard). The shape check comes
    before the device check, so CPU tensors reach it (the CPU kernel is registered). With ``root``, the module
    loaded must be the one under root/python/vlattn (the one unpack installed)."""
    import torch
    import vlattn
    from vlattn import _ext

    info = vlattn.extension_info()
    if not info.get("built"):
        raise Mismatch(f"the module does not load: {info.get('error')}")
    if root is not None:
        loaded = pathlib.Path(_ext._C.__file__).resolve()
        if loaded.parent != (pathlib.Path(root) / "python" / "vlattn").resolve():
            raise Mismatch(f"the module loaded is {loaded}, not the one under {root}/python/vlattn")
    x = torch.zeros(2, 16, dtype=torch.bfloat16)
    w = torch.zeros(8, 32, dtype=torch.bfloat16)
    try:
        torch.ops.vlattn.linear(x, w)
    except RuntimeError as e:
        if "vlattn.linear: x must be" not in str(e):
            raise Mismatch(f"a shape error came back as: {str(e)[:200]}") from None
    else:
        raise Mismatch("vlattn.linear accepted a K mismatch")
    return json.dumps(info)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hash", help="print the source hash of a tree")
    h.add_argument("root", nargs="?", default=".")
    p = sub.add_parser("pack", help="compress a built module and write its manifest")
    p.add_argument("--tree", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--build-log", default="")
    p.add_argument("--warning-store", default="", help="per-unit warnings kept across incremental builds (JSON)")
    p.add_argument("--out", default="prebuilt")
    p.add_argument("--keep", type=int, default=2, help="modules kept in --out, newest first (default 2)")
    u = sub.add_parser("unpack", help="install the prebuilt module if it matches (exit 1 and why if not)")
    u.add_argument("--root", default=".")
    u.add_argument("--dir", default="prebuilt")
    u.add_argument("--warnings", default="", help="write the build's ptxas warning lines to this file")
    sm = sub.add_parser("smoke", help="load the module and make it throw a shape error")
    sm.add_argument("--root", default=None, help="the module loaded must be ROOT/python/vlattn's")
    hv = sub.add_parser("have", help="exit 0 if OUT already holds the module a build of TREE here would make")
    hv.add_argument("--tree", required=True)
    hv.add_argument("--out", default="prebuilt")
    sy = sub.add_parser("sync", help="make DST hold SRC's files, rewriting only those that changed")
    sy.add_argument("--src", required=True)
    sy.add_argument("--dst", required=True)
    mw = sub.add_parser("merge-warnings", help="keep a (failed) build's per-unit warning lines in the store")
    mw.add_argument("--tree", required=True)
    mw.add_argument("--build-log", required=True)
    mw.add_argument("--warning-store", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "hash":
            print(source_hash(pathlib.Path(args.root)))
        elif args.cmd == "pack":
            log = pathlib.Path(args.build_log).read_text(errors="replace") if args.build_log else ""
            if args.warning_store:
                log = merge_build_log(log, pathlib.Path(args.warning_store), pathlib.Path(args.tree))
            m = pack(pathlib.Path(args.tree), args.commit, pathlib.Path(args.out), log, keep=args.keep)
            print(f"packed {m['module']} ({m['module_bytes'] / 2**20:.1f} MiB) of {m['commit'][:10]}, "
                  f"torch {m['torch_version']}, {m['nvcc']}, source hash {m['source_hash'][:12]}, "
                  f"ptxas spills: {warning_count(m, 'Registers are spilled')}, C7513: {warning_count(m, 'C7513')}")
        elif args.cmd == "smoke":
            print(smoke(pathlib.Path(args.root) if args.root else None))
        elif args.cmd == "have":
            try:
                m = have(pathlib.Path(args.tree), pathlib.Path(args.out))
            except Mismatch as e:
                print(f"prebuild: building ({e})")
                return 1
            print(f"prebuild: {args.out}/{m['source_hash'][:SLOT_CHARS]} already holds these sources' module (commit "
                  f"{m['commit'][:10]}, built {m['built_at']}, torch {m['torch_version']}): nothing to build "
                  f"(PREBUILD_FORCE=1 builds anyway)")
        elif args.cmd == "sync":
            print(f"prebuild: {sync_tree(pathlib.Path(args.src), pathlib.Path(args.dst))} file(s) written in {args.dst}")
        elif args.cmd == "merge-warnings":
            merge_build_log(pathlib.Path(args.build_log).read_text(errors="replace"), pathlib.Path(args.warning_store),
                            pathlib.Path(args.tree))
        else:
            m = unpack(pathlib.Path(args.root), pathlib.Path(args.dir))
            if args.warnings:
                pathlib.Path(args.warnings).write_text("".join(f"{n:7d} {ln}\n" for n, ln in m["build_warnings"]))
            print(f"prebuilt {m['module']} of {m['commit'][:10]} (built {m['built_at']}, torch {m['torch_version']}, "
                  f"cutlass {m['cutlass']}, {m['nvcc']}, {m['cxx']}; here: {nvcc_version()}, {cxx_version()}); ptxas spills: "
                  f"{warning_count(m, 'Registers are spilled')}; wgmma serialized (C7513): {warning_count(m, 'C7513')}")
    except Mismatch as e:
        print(f"prebuilt not used: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
