"""scripts/prebuilt.py: the extension built on the CPU machine is installed on the device only when it
matches that tree, interpreter and torch (CPU only; fake modules, no build)."""

import importlib.util
import json
import lzma
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("vlattn_prebuilt", ROOT / "scripts" / "prebuilt.py")
prebuilt = importlib.util.module_from_spec(_spec)
sys.modules["vlattn_prebuilt"] = prebuilt
_spec.loader.exec_module(prebuilt)

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
IDENTITY = {"torch_version": "2.11.0+cu130", "torch_git_version": "70d99e998b4955e0049d13a98d77ae1b14db1f45"}
CUTLASS = "4.2.0.0"


def make_tree(path: pathlib.Path, module: bytes | None = None) -> pathlib.Path:
    """A tree with the files the build reads (contents made up) and, optionally, a built module."""
    files = {
        "csrc/ops/layers.cpp": "int layers;\n",
        "csrc/attention/sm90_attention.cuh": "// kernel\n",
        "csrc/qkv/qkv_sm90.cu": "// qkv\n",
        "setup.py": "# setup\n",
        "scripts/build_flags.py": "FLAGS = []\n",
        "python/vlattn/gemm_configs.py": "GEMM_CONFIGS = []\n",
        "python/vlattn/data/gemm_tuned_h200.json": "{}\n",
        "bench/NOTES.md": "notes\n",
        "tests/test_x.py": "def test(): pass\n",
    }
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    if module is not None:
        (path / "python" / "vlattn" / f"_C{SUFFIX}").write_bytes(module)
    return path


@pytest.fixture
def packed(tmp_path):
    """(built tree, prebuilt dir, module bytes, device tree with the same sources and no module)."""
    data = os.urandom(4096) + b"\0" * 4096
    tree = make_tree(tmp_path / "built", data)
    out = tmp_path / "prebuilt"
    log = "ptxas warning : Registers are spilled to local memory in function 'k'\nnvcc ok\n" * 2
    prebuilt.pack(tree, "a" * 40, out, build_log=log, identity=IDENTITY, cutlass=CUTLASS)
    device = make_tree(tmp_path / "device")
    return tree, out, data, device


def slot(out: pathlib.Path) -> pathlib.Path:
    (d,) = [p.parent for p in out.glob("*/manifest.json")]
    return d


def unpack(device, out, **kw):
    args = {"identity": IDENTITY, "ext_suffix": SUFFIX, "env": {}, "cutlass": CUTLASS}
    args.update(kw)
    return prebuilt.unpack(device, out, **args)


def test_hash_follows_the_sources_and_nothing_else(tmp_path):
    a = make_tree(tmp_path / "a")
    h = prebuilt.source_hash(a)
    assert prebuilt.source_hash(make_tree(tmp_path / "b")) == h  # same content elsewhere, same hash
    (a / "bench" / "NOTES.md").write_text("other notes\n")
    (a / "tests" / "test_x.py").write_text("# changed\n")
    (a / "csrc" / "__pycache__").mkdir()
    (a / "csrc" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert prebuilt.source_hash(a) == h
    for rel in ("csrc/ops/layers.cpp", "setup.py", "scripts/build_flags.py", "python/vlattn/gemm_configs.py",
                "python/vlattn/data/gemm_tuned_h200.json"):
        c = make_tree(tmp_path / rel.replace("/", "_"))
        (c / rel).write_text((c / rel).read_text() + " ")
        assert prebuilt.source_hash(c) != h, rel
    d = make_tree(tmp_path / "added")
    (d / "csrc" / "ops" / "new.h").write_text("")
    assert prebuilt.source_hash(d) != h
    e = make_tree(tmp_path / "renamed")
    (e / "csrc" / "qkv" / "qkv_sm90.cu").rename(e / "csrc" / "qkv" / "qkv_sm91.cu")
    assert prebuilt.source_hash(e) != h


def test_the_repository_sources_are_hashed():
    """Every file the build reads is in the hash, and every environment variable it reads is refused or known to
    change no code: read from setup.py and scripts/build_flags.py themselves, so a new input fails here."""
    files = set(prebuilt.source_files(ROOT))
    assert set(prebuilt.SOURCE_FILES) <= files
    compiled = {p.relative_to(ROOT).as_posix() for ext in ("*.cpp", "*.cu") for p in (ROOT / "csrc").rglob(ext)}
    assert compiled and compiled <= files
    build_py = [(ROOT / "setup.py").read_text(), (ROOT / "scripts" / "build_flags.py").read_text()]
    # Paths under the repository: `ROOT / "a" / "b"` (folders must be hashed whole: csrc).
    read = set()
    for text in build_py:
        for m in re.finditer(r'ROOT((?:\s*/\s*"[^"]+")+)', text):
            read.add("/".join(re.findall(r'"([^"]+)"', m.group(1))))
    assert read, "no ROOT / ... paths found: the parse is stale"
    not_inputs = {"build/generated"}  # setup.py's output (generated from hashed inputs)
    for rel in read - not_inputs:
        assert rel in files or rel in prebuilt.SOURCE_DIRS, f"the build reads {rel}, which the source hash omits"
    env = set()
    for text in build_py:
        env |= set(re.findall(r'os\.environ(?:\.get)?[\[(]\s*"([A-Z_0-9]+)"', text))
        env |= set(re.findall(r'os\.getenv\(\s*"([A-Z_0-9]+)"', text))
    assert "VLATTN_GEMM_CONFIGS" in env, "no environment reads found: the parse is stale"
    no_code = {"CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS"}  # see prebuilt.BUILD_ENV's comment
    assert env - no_code <= set(prebuilt.SETUP_ENV), f"unhashed build inputs: {env - no_code - set(prebuilt.SETUP_ENV)}"


def test_pack_then_unpack_installs_the_same_module(packed):
    tree, out, data, device = packed
    manifest = json.loads((slot(out) / "manifest.json").read_text())
    assert slot(out).name == manifest["source_hash"][:16]
    assert manifest["commit"] == "a" * 40 and manifest["torch_version"] == IDENTITY["torch_version"]
    assert manifest["source_hash"] == prebuilt.source_hash(tree) == prebuilt.source_hash(device)
    assert manifest["build_warnings"] == [[2, "ptxas warning : Registers are spilled to local memory in function 'k'"]]
    assert prebuilt.warning_count(manifest, "Registers are spilled") == 2
    stale = device / "python" / "vlattn" / "_C.cpython-399-x86_64-linux-gnu.so"
    stale.write_bytes(b"an earlier build")
    unpack(device, out)
    assert (device / "python" / "vlattn" / f"_C{SUFFIX}").read_bytes() == data
    assert not stale.exists()
    assert not list((device / "python" / "vlattn").glob("*.tmp"))


@pytest.mark.parametrize("case", ["torch", "torch_git", "python", "sources", "env", "nvcc_env", "cutlass", "corrupt",
                                  "tampered", "absent", "same_slot_other_sources"])
def test_unpack_refuses_what_does_not_match(packed, case):
    tree, out, data, device = packed
    kw = {}
    if case == "torch":
        kw["identity"] = {**IDENTITY, "torch_version": "2.14.1+cu130"}
    elif case == "torch_git":
        kw["identity"] = {**IDENTITY, "torch_git_version": "0" * 40}
    elif case == "python":
        kw["ext_suffix"] = ".cpython-399-x86_64-linux-gnu.so"
    elif case == "sources":
        (device / "csrc" / "ops" / "layers.cpp").write_text("int layers = 1;\n")
    elif case == "env":
        kw["env"] = {"VLATTN_GEMM_CONFIGS": "128x128_coop"}
    elif case == "nvcc_env":
        kw["env"] = {"NVCC_APPEND_FLAGS": "-G"}
    elif case == "cutlass":
        kw["cutlass"] = "4.3.0.0"
    elif case == "same_slot_other_sources":
        # A slot whose folder name matches this tree's hash prefix but whose manifest does not (check()'s own
        # comparison of the full hash, behind the folder lookup).
        (device / "csrc" / "ops" / "layers.cpp").write_text("int layers = 7;\n")
        slot(out).rename(out / prebuilt.source_hash(device)[:prebuilt.SLOT_CHARS])
    elif case == "corrupt":
        xz = next(slot(out).glob("*.xz"))
        xz.write_bytes(xz.read_bytes()[:100])
    elif case == "tampered":
        next(slot(out).glob("*.xz")).write_bytes(lzma.compress(b"another module"))
    else:
        (slot(out) / "manifest.json").unlink()
    existing = device / "python" / "vlattn" / f"_C{SUFFIX}"
    existing.write_bytes(b"built on the device")
    with pytest.raises(prebuilt.Mismatch) as e:
        unpack(device, out, **kw)
    assert existing.read_bytes() == b"built on the device"  # a refusal leaves the tree as it was
    if case == "same_slot_other_sources":
        assert "whose sources differ" in str(e.value)


def test_no_cutlass_here_takes_the_module_as_built(packed):
    """Without the nvidia-cutlass wheel no build could run here: the module is used with the CUTLASS it was built
    with (the manifest says which); pack refuses to write a manifest without knowing it."""
    tree, out, data, device = packed
    assert unpack(device, out, cutlass=None)["cutlass"] == CUTLASS
    if prebuilt.cutlass_version() is None:
        with pytest.raises(prebuilt.Mismatch, match="no nvidia-cutlass"):
            prebuilt.pack(tree, "e" * 40, out, identity=IDENTITY)


def test_modules_of_several_commits_travel_together(packed, tmp_path):
    """main's and a pending branch's builds side by side: each tree gets its own; the oldest beyond --keep go."""
    tree, out, data, device = packed
    branch_data = os.urandom(1000)
    branch = make_tree(tmp_path / "branch", branch_data)
    (branch / "csrc" / "ops" / "layers.cpp").write_text("int layers = 2;\n")
    prebuilt.pack(branch, "c" * 40, out, identity=IDENTITY, cutlass=CUTLASS)
    assert len(list(out.glob("*/manifest.json"))) == 2
    unpack(device, out)
    assert (device / "python" / "vlattn" / f"_C{SUFFIX}").read_bytes() == data
    (device / "csrc" / "ops" / "layers.cpp").write_text("int layers = 2;\n")  # the branch's sources
    assert unpack(device, out)["commit"] == "c" * 40
    assert (device / "python" / "vlattn" / f"_C{SUFFIX}").read_bytes() == branch_data
    (device / "csrc" / "ops" / "layers.cpp").write_text("int layers = 3;\n")
    with pytest.raises(prebuilt.Mismatch, match=r"none was built from this tree's sources .* has aaaaaaaaaa, cccccccccc"):
        unpack(device, out)
    third = make_tree(tmp_path / "third", b"3")
    (third / "setup.py").write_text("# 3\n")
    os.utime(next(out.glob("*/manifest.json")), (1, 1))  # make one slot the oldest whichever it is
    oldest = [p.parent.name for p in out.glob("*/manifest.json") if p.stat().st_mtime == 1]
    prebuilt.pack(third, "d" * 40, out, identity=IDENTITY, keep=2, cutlass=CUTLASS)
    left = {p.parent.name for p in out.glob("*/manifest.json")}
    assert len(left) == 2 and oldest[0] not in left


def test_pack_refuses_a_tree_without_one_module(tmp_path):
    tree = make_tree(tmp_path / "t")
    with pytest.raises(prebuilt.Mismatch, match="found 0"):
        prebuilt.pack(tree, "b" * 40, tmp_path / "out", identity=IDENTITY, cutlass=CUTLASS)
    (tree / "python" / "vlattn" / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"x")
    (tree / "python" / "vlattn" / "_C.cpython-312-x86_64-linux-gnu.so").write_bytes(b"y")
    with pytest.raises(prebuilt.Mismatch, match="found 2"):
        prebuilt.pack(tree, "b" * 40, tmp_path / "out", identity=IDENTITY, cutlass=CUTLASS)


def test_cli_says_why_and_exits_1(packed):
    tree, out, data, device = packed
    m = json.loads((slot(out) / "manifest.json").read_text())
    m["torch_git_version"] = "not a revision"  # no torch has it: the CLI's own torch check refuses
    (slot(out) / "manifest.json").write_text(json.dumps(m))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuilt.py"), "unpack", "--root", str(device),
                        "--dir", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("prebuilt not used: ")
    assert not (device / "python" / "vlattn" / f"_C{SUFFIX}").exists()
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuilt.py"), "hash", str(device)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == prebuilt.source_hash(device)


def test_gpu_check_tries_the_prebuilt_module_before_building():
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    body = script[script.index("build() {"):]
    assert body.index("scripts/prebuilt.py unpack") < body.index("setup.py build_ext")
    assert "PREBUILT:-1" in body
    assert "/prebuilt/" in (ROOT / ".gitignore").read_text().splitlines()
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")]).returncode == 0


def test_smoke_reports_whether_the_module_loads():
    """After unpack, gpu_check.sh runs `smoke`: exit 0 with extension_info's JSON when the module loads and throws a
    shape error cleanly (CPU tensors reach the check), else exit 1 and why."""
    from vlattn import _ext

    # The child inherits this environment, so it imports the vlattn this process imports (CI: the installed one).
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuilt.py"), "smoke"], capture_output=True,
                       text=True, timeout=300)
    if not _ext.available():
        assert r.returncode == 1 and r.stdout.startswith("prebuilt not used: the module does not load"), r.stdout + r.stderr
    else:
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["built"] is True
        # --root names where the module must come from: not a folder it was loaded from here.
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuilt.py"), "smoke", "--root", "/nonexistent"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 1 and "the module loaded is" in r.stdout, r.stdout + r.stderr


def test_warnings_survive_incremental_builds(tmp_path):
    """A ninja log names each unit it compiles; a later build that recompiles one unit replaces only its lines."""
    tree = make_tree(tmp_path / "t")
    store = tmp_path / "warnings.json"
    spill = "ptxas warning : Registers are spilled to local memory in function 'k', 20 bytes spill stores"
    full = "\n".join([
        f"[1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c {tree}/csrc/qkv/qkv_sm90.cu -o a.o -O3",
        spill,
        f"[2/3] c++ -MMD -c -c {tree}/csrc/ops/layers.cpp -o b.o",
        "some note",
        "[3/3] c++ a.o b.o -shared -o _C.so",
    ])
    merged = prebuilt.merge_build_log(full, store, tree)
    assert prebuilt.build_warnings(merged) == [[1, spill]]
    # Nothing recompiled: the spill is still known.
    assert prebuilt.build_warnings(prebuilt.merge_build_log("ninja: no work to do.", store, tree)) == [[1, spill]]
    # The unit recompiled without the spill: gone. Another unit gains a C7513 warning.
    c7513 = "ptxas warning : (C7513) Potential Performance Loss: wgmma.mma_async instructions are serialized"
    again = "\n".join([f"[1/2] nvcc -c {tree}/csrc/qkv/qkv_sm90.cu -o a.o", "",
                       f"[2/2] c++ -c {tree}/csrc/ops/layers.cpp -o b.o", c7513])
    assert prebuilt.build_warnings(prebuilt.merge_build_log(again, store, tree)) == [[1, c7513]]
    # A unit whose source is gone is dropped.
    (tree / "csrc" / "ops" / "layers.cpp").unlink()
    assert prebuilt.merge_build_log("", store, tree) == ""


def test_sync_rewrites_only_what_changed(tmp_path):
    """prebuild.sh's export onto the build tree: unchanged files keep their mtime (ninja skips them), removed ones go,
    a path that turns from a file into a folder (or back) is handled, build/ and built modules stay."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    (src / "csrc" / "x").write_text("a file\n")
    assert prebuilt.sync_tree(src, dst) == len([p for p in src.rglob("*") if p.is_file()])
    assert prebuilt.source_hash(dst) == prebuilt.source_hash(src)
    (dst / "build" / "temp").mkdir(parents=True)
    (dst / "build" / "temp" / "a.o").write_bytes(b"o")
    (dst / "python" / "vlattn" / f"_C{SUFFIX}").write_bytes(b"module")
    os.utime(dst / "setup.py", (1, 1))
    (src / "csrc" / "ops" / "layers.cpp").write_text("int layers = 5;\n")
    (src / "csrc" / "qkv" / "qkv_sm90.cu").unlink()
    (src / "csrc" / "x").unlink()
    (src / "csrc" / "x").mkdir()
    (src / "csrc" / "x" / "y.h").write_text("// now a folder\n")
    assert prebuilt.sync_tree(src, dst) == 2
    assert prebuilt.source_hash(dst) == prebuilt.source_hash(src)
    assert (dst / "setup.py").stat().st_mtime == 1  # not rewritten
    assert not (dst / "csrc" / "qkv" / "qkv_sm90.cu").exists()
    assert (dst / "build" / "temp" / "a.o").exists() and (dst / "python" / "vlattn" / f"_C{SUFFIX}").exists()
    shutil.rmtree(src / "csrc" / "x")
    (src / "csrc" / "x").write_text("a file again\n")
    assert prebuilt.sync_tree(src, dst) == 1
    assert prebuilt.source_hash(dst) == prebuilt.source_hash(src)


STUB_PYTHON = r"""#!/usr/bin/env bash
# python3 for gpu_check.sh's build(): records each call; unpack / smoke / setup.py answer as STUB_* say.
echo "$*" >> "$STUB_LOG"
case "$*" in
  *"prebuilt.py unpack"*) echo "${STUB_UNPACK_MSG:-prebuilt _C.so of abc}"; exit "${STUB_UNPACK_RC:-0}" ;;
  *"prebuilt.py smoke"*) echo '{"built": true}'; exit "${STUB_SMOKE_RC:-0}" ;;
  *"setup.py build_ext"*) echo "built"; exit 0 ;;
  *) exit 0 ;;
esac
"""


def stub_repo(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, dict]:
    """A repository holding only scripts/gpu_check.sh, and an environment whose python3 is STUB_PYTHON (its calls
    logged to the returned file) with none of the script's switches set."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu_check.sh", root / "scripts" / "gpu_check.sh")
    stub = tmp_path / "bin" / "python3"
    stub.parent.mkdir()
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PROBE_CMDS", "PROBE_TESTS", "PREBUILT", "VLATTN_COMMIT")}
    env.update(PATH=f"{stub.parent}:{env['PATH']}", OUT=str(tmp_path / "out"), STUB_LOG=str(log))
    return root, log, env


@pytest.mark.parametrize("case", ["used", "refused", "smoke_fails", "forced_build", "ab_overlay", "no_folder"])
def test_gpu_check_build_stage(tmp_path, case):
    """scripts/gpu_check.sh build under `set -uo pipefail`, with a stub python3: the prebuilt module is used when
    unpack and smoke succeed, and everything else builds (and says why)."""
    root, log, env = stub_repo(tmp_path)
    if case != "no_folder":
        (root / "prebuilt").mkdir()
    (root / "python" / "vlattn").mkdir(parents=True)
    (root / "python" / "vlattn" / f"_C{SUFFIX}").write_bytes(b"left by an earlier build")
    if case == "refused":
        env.update(STUB_UNPACK_RC="1", STUB_UNPACK_MSG="prebuilt not used: sources differ")
    elif case == "smoke_fails":
        env["STUB_SMOKE_RC"] = "1"
    elif case == "forced_build":
        env["PREBUILT"] = "0"
    elif case == "ab_overlay":
        env["PROBE_CMDS"] = "AB_CMDS='x' bash bench/ab_overlay.sh ab_overlay/pre"
    r = subprocess.run(["bash", str(root / "scripts" / "gpu_check.sh"), "build"], capture_output=True, text=True,
                       timeout=120, env=env)
    calls = log.read_text()
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "unbound variable" not in r.stderr and r.returncode == 0, r.stdout + r.stderr
    built = "setup.py build_ext" in calls
    if case == "used":
        assert "prebuilt.py unpack" in calls and "prebuilt.py smoke --root ." in calls and not built
        assert "prebuilt _C.so of abc" in summary and "build (MAX_JOBS" not in summary
    else:
        assert built and "build (MAX_JOBS" in summary
        assert ("prebuilt.py unpack" in calls) == (case in ("refused", "smoke_fails"))
    if case in ("refused", "smoke_fails"):
        assert "prebuilt module not used: building" in summary
        assert not (root / "python" / "vlattn" / f"_C{SUFFIX}").exists()  # no stale module beside the build
    if case == "refused":
        assert "prebuilt not used: sources differ" in summary and "prebuilt.py smoke" not in calls


@pytest.mark.parametrize("probe_cmds, refused", [
    ("echo one; echo two", False),
    ("for s in A B; do echo $s; done", True),  # split on ';' into "for s in A B" / "do echo $s" / "done"
    ("if true; then echo a; fi", True),
    ("echo one\necho two", True),  # read stops at the newline: the second line would be dropped
])
def test_gpu_check_refuses_probe_cmds_it_would_cut(tmp_path, probe_cmds, refused):
    """scripts/gpu_check.sh splits PROBE_CMDS on ';': a compound command would fall apart into failing pieces after
    the build and the tests, so it is refused before the build (exit 2), and plain commands run one by one."""
    root, log, env = stub_repo(tmp_path)
    env["PROBE_CMDS"] = probe_cmds
    r = subprocess.run(["bash", str(root / "scripts" / "gpu_check.sh"), "probe"], capture_output=True, text=True,
                       timeout=120, env=env)
    summary = (tmp_path / "out" / "summary.txt").read_text()
    if refused:
        assert r.returncode == 2 and "nothing run" in summary, r.stdout + r.stderr
        assert "setup.py build_ext" not in log.read_text()
    else:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "probe 1: echo one" in summary and "probe 2:  echo two" in summary and "probe 2 rc=0" in summary


def test_the_scripts_are_executable():
    """The docs call them as `scripts/X.sh`: a checkout must have them executable (prebuild.sh was committed 0644
    and failed with "Permission denied" on the first fresh machine that ran it through device_prep.sh)."""
    for script in sorted((ROOT / "scripts").glob("*.sh")) + [ROOT / ".ci" / "run"]:
        assert os.access(script, os.X_OK), f"{script.relative_to(ROOT)} is not executable (git update-index --chmod=+x)"


def _git(repo: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("case", ["applies", "conflicts", "on_pending"])
def test_device_prep_builds_head_and_the_pending_series(tmp_path, case):
    """scripts/device_prep.sh HEAD pending with the wheel and the Python already there (both steps skip): prebuild.sh
    runs for HEAD, then for the branch `pending` = HEAD + bench/pending/0*.patch made in a scratch worktree, and this
    checkout is left as it was. A series that does not apply stops the script with no branch and no worktree left."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "device_prep.sh", repo / "scripts" / "device_prep.sh")
    log = tmp_path / "prebuild.log"
    (repo / "scripts" / "prebuild.sh").write_text(
        f'#!/usr/bin/env bash\necho "$1 $(git rev-parse "$1")" >> {log}\n')
    (repo / "scripts" / "prebuild.sh").chmod(0o755)
    (repo / "requirements.txt").write_text("torch==2.14.1\nnvidia-cutlass==4.2.0.0\n")
    (repo / "kernel.cu").write_text("int a;\n")
    (repo / ".gitignore").write_text("/.whl/\n/prebuilt/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    # The series: one commit on a side branch, as format-patch writes it.
    _git(repo, "checkout", "-q", "-b", "work")
    (repo / "kernel.cu").write_text("int b;\n")
    _git(repo, "commit", "-q", "-am", "kernel: b")
    (repo / "bench" / "pending").mkdir(parents=True)
    _git(repo, "format-patch", "-q", "-o", "bench/pending", "main")
    _git(repo, "checkout", "-q", "main")
    if case == "conflicts":
        (repo / "kernel.cu").write_text("int c;\n")
        _git(repo, "commit", "-q", "-am", "kernel: c")
    _git(repo, "add", "bench")
    _git(repo, "commit", "-q", "-m", "the series")
    if case == "on_pending":  # a branch checked out cannot be moved: say so before making anything
        _git(repo, "checkout", "-q", "-b", "pending")
    head = _git(repo, "rev-parse", "HEAD")
    (repo / ".whl").mkdir()
    (repo / ".whl" / "nvidia_cutlass-4.2.0.0-py3-none-any.whl").write_bytes(b"wheel")
    stub_py = tmp_path / "py" / "bin" / "python"
    stub_py.parent.mkdir(parents=True)
    stub_py.write_text("#!/bin/sh\necho 'stub python 3.12'\n")
    stub_py.chmod(0o755)
    env = {**os.environ, "PREBUILD_PYTHON": str(stub_py)}
    r = subprocess.run(["bash", str(repo / "scripts" / "device_prep.sh"), "HEAD", "pending"], capture_output=True,
                       text=True, timeout=120, env=env, cwd=tmp_path)
    calls = log.read_text().splitlines()
    assert _git(repo, "rev-parse", "HEAD") == head and _git(repo, "status", "--porcelain") == ""
    assert len(_git(repo, "worktree", "list").splitlines()) == 1  # the scratch worktree is gone
    if case == "applies":
        assert r.returncode == 0, r.stdout + r.stderr
        pending = _git(repo, "rev-parse", "pending")
        assert calls == [f"HEAD {head}", f"pending {pending}"]
        assert _git(repo, "rev-parse", "pending~1") == head
        assert _git(repo, "show", "pending:kernel.cu") == "int b;"
    elif case == "on_pending":
        assert r.returncode == 2 and "check out main" in r.stdout, r.stdout + r.stderr
        assert calls == [f"HEAD {head}"] and _git(repo, "rev-parse", "pending") == head
    else:
        assert r.returncode != 0 and "do not apply on HEAD" in r.stdout, r.stdout + r.stderr
        assert calls == [f"HEAD {head}"]
        assert subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", "pending"],
                              capture_output=True).returncode != 0


def have(device, out, **kw):
    args = {"identity": IDENTITY, "ext_suffix": SUFFIX, "env": {}, "cutlass": CUTLASS,
            "nvcc": prebuilt.nvcc_version()}  # what pack wrote
    args.update(kw)
    return prebuilt.have(device, out, **args)


@pytest.mark.parametrize("case", ["same", "sources", "torch", "nvcc", "no_module", "no_slot"])
def test_have_finds_the_module_a_build_here_would_make(packed, case):
    """prebuild.sh skips its build when the slot for the tree's sources was built with this Python, torch, CUTLASS
    and nvcc: `have` says whether it is there."""
    tree, out, data, device = packed
    kw = {}
    if case == "sources":
        (device / "csrc" / "ops" / "layers.cpp").write_text("int layers = 5;\n")
    elif case == "torch":
        kw["identity"] = {**IDENTITY, "torch_version": "2.14.1+cu130"}
    elif case == "nvcc":
        kw["nvcc"] = "Cuda compilation tools, release 13.1"
    elif case == "no_module":
        next(slot(out).glob("*.xz")).unlink()
    elif case == "no_slot":
        shutil.rmtree(slot(out))
    if case == "same":
        assert have(device, out, **kw)["commit"] == "a" * 40
    else:
        with pytest.raises(prebuilt.Mismatch):
            have(device, out, **kw)


@pytest.mark.parametrize("case", ["packed", "force", "changed"])
def test_prebuild_skips_sources_already_packed(tmp_path, case):
    """scripts/prebuild.sh REV when prebuilt/ already holds REV's sources' module for this Python: no build (the
    stub setup.py would leave a mark and fail); PREBUILD_FORCE=1 or changed sources build."""
    pytest.importorskip("torch")
    repo = make_tree(tmp_path / "repo")
    (repo / "scripts").mkdir(exist_ok=True)
    for f in ("prebuild.sh", "prebuilt.py"):
        shutil.copy(ROOT / "scripts" / f, repo / "scripts" / f)
    (repo / "setup.py").write_text("import pathlib, sys\npathlib.Path('BUILT').write_text('x')\nsys.exit(1)\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    out, work = tmp_path / "out", tmp_path / "work"
    built = make_tree(tmp_path / "built", b"module")
    shutil.copy(repo / "setup.py", built / "setup.py")
    shutil.copytree(repo / "scripts", built / "scripts", dirs_exist_ok=True)
    assert prebuilt.source_hash(built) == prebuilt.source_hash(repo)
    prebuilt.pack(built, _git(repo, "rev-parse", "HEAD"), out, identity=prebuilt.torch_identity(), cutlass=CUTLASS)
    env = {k: v for k, v in os.environ.items() if k not in ("PREBUILD_FORCE", "PYTHONPATH")}
    env.update(PREBUILD_PYTHON=sys.executable, PREBUILD_DIR=str(work), PREBUILD_OUT=str(out))
    if case == "force":
        env["PREBUILD_FORCE"] = "1"
    elif case == "changed":
        (repo / "csrc" / "ops" / "layers.cpp").write_text("int layers = 9;\n")
        _git(repo, "commit", "-q", "-am", "layers: 9")
    r = subprocess.run(["bash", str(repo / "scripts" / "prebuild.sh"), "HEAD"], capture_output=True, text=True,
                       timeout=120, env=env, cwd=repo)
    if case == "packed" and prebuilt.cutlass_version() in (None, CUTLASS):
        assert r.returncode == 0 and "already holds" in r.stdout, r.stdout + r.stderr
        assert not (work / "tree" / "BUILT").exists() and not (work / "export").exists()
    else:
        assert r.returncode == 3 and "build failed" in r.stdout, r.stdout + r.stderr
        assert (work / "tree" / "BUILT").exists()
