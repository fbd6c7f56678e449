"""Backend choice shared by every op: torch on CPU, Triton on CUDA.

``backend`` is one of ``"auto"``, ``"torch"``, ``"triton"``. ``auto`` picks Triton
for CUDA tensors when Triton kernels exist for the op, torch otherwise. ``triton``
on CPU tensors runs the kernels under Triton's interpreter, which only works when
``TRITON_INTERPRET=1`` was set before :mod:`triton` was first imported.
"""

from __future__ import annotations

import functools
import os

import torch

BACKENDS = ("auto", "torch", "triton")
#: the oldest Triton whose interpreter runs every kernel here (3.1's refuses their aranges, 3.3's
#: lacks builder methods they use); compiled, on CUDA, every kernel builds with Triton >= 3.1
MIN_INTERPRETER_TRITON = (3, 4)


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:  # pragma: no cover - triton is a hard dependency
        return False
    return True


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def resolve(backend: str, *tensors: torch.Tensor) -> str:
    """Return ``"torch"`` or ``"triton"`` for these tensors."""
    check_backend(backend)
    on_cuda = any(t.is_cuda for t in tensors)
    if backend == "auto":
        return "triton" if on_cuda and triton_available() else "torch"
    if backend == "triton" and not on_cuda:
        if not interpreter_on():
            raise RuntimeError(
                "backend='triton' on CPU tensors needs Triton's interpreter: set "
                "TRITON_INTERPRET=1 in the environment before triton is imported"
            )
        import triton

        if version_tuple(triton.__version__) < MIN_INTERPRETER_TRITON:
            need = ".".join(map(str, MIN_INTERPRETER_TRITON))
            raise RuntimeError(
                f"backend='triton' on CPU tensors runs the kernels under Triton's interpreter, and Triton "
                f"{triton.__version__}'s cannot run them: it needs triton>={need} (on CUDA tensors the "
                f"compiled kernels work with this Triton)"
            )
    return backend


@functools.lru_cache(maxsize=8)
def version_tuple(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as "3.6.0" or "3.4.0+git1234"."""
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)

