"""C++ unit tests (tests/cpp/): compiled once per session with the host compiler, one pytest item
per case; plus compile-fail probes that illegal GEMM configs are rejected at compile time."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "cpp" / "test_rope_maps.cpp"
CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler (g++) on PATH")


def _compile(out: pathlib.Path, *defines: str) -> subprocess.CompletedProcess:
    cmd = [CXX, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{ROOT / 'csrc'}", *defines, str(SRC), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="session")
def cpp_binary(tmp_path_factory) -> pathlib.Path:
    exe = tmp_path_factory.mktemp("cpp") / "test_rope_maps"
    result = _compile(exe)
    assert result.returncode == 0, f"compiling {SRC.name} failed:\n{result.stderr}"
    return exe


def _case_names() -> list[str]:
    # Collected from the source so the list exists before anything is compiled.
    text = SRC.read_text()
    table = text[text.index("const Case kCases[]"):text.index("};", text.index("const Case kCases[]"))]
    return [line.split('"')[1] for line in table.splitlines() if line.strip().startswith('{"')]


@pytest.mark.parametrize("case", _case_names())
def test_cpp_case(cpp_binary, case):
    result = subprocess.run([str(cpp_binary), case], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_cpp_case_list_matches_binary(cpp_binary):
    listed = subprocess.run([str(cpp_binary), "--list"], capture_output=True, text=True, check=True).stdout.split()
    assert listed == _case_names()


@pytest.mark.parametrize("probe, message", [
    (1, "tile M must be a multiple of 64 per consumer warpgroup"),
    (2, "stream-K scheduler runs on the cooperative kernel"),
    (3, "explicit stages must be >= 2 and fit in 227 KB"),
    (4, "wgmma N must be a multiple of 16"),
    (5, "epilogue subtile's columns must be a multiple of 16 that divides tile N"),
    (6, "parallel split-K stores its partials [M, N] row-major: not with swapped operands"),
])
def test_illegal_gemm_config_fails_to_compile(tmp_path, probe, message):
    result = _compile(tmp_path / "probe", f"-DVLATTN_ILLEGAL_CONFIG={probe}", "-fsyntax-only")
    assert result.returncode != 0, "an illegal config compiled"
    assert message in result.stderr
