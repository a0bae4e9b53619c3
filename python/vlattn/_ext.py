"""Loads the compiled extension once and says why when it cannot.

The package stays importable without it (the reference backend, the workloads and the bench's CPU
mode need no compiled code); every op that needs it raises `ExtensionUnavailable` with the reason.
"""
from __future__ import annotations

import importlib

import torch  # noqa: F401  (must precede _C: the extension has no RUNPATH to libc10/libtorch)

try:
    # import_module (not `from . import _C`): a missing build then reads "No module named vlattn._C".
    _C = importlib.import_module(__name__.rpartition(".")[0] + "._C")

    LOAD_ERROR: str | None = None
except ImportError as exc:  # not built, or built against another torch
    _C = None
    LOAD_ERROR = f"{type(exc).__name__}: {exc}"


class ExtensionUnavailable(RuntimeError):
    pass


def available() -> bool:
    return _C is not None


def require(what: str):
    if _C is None:
        raise ExtensionUnavailable(
            f"{what} needs the compiled extension vlattn._C, which did not load ({LOAD_ERROR}). "
            "Reinstall from source: pip install --no-build-isolation ."
        )
    return _C
