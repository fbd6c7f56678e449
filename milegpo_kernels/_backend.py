"""Backend choice shared by every op: torch on CPU, Triton on CUDA.

``backend`` is one of ``"auto"``, ``"torch"``, ``"triton"``. ``auto`` picks Triton
for CUDA tensors when Triton kernels exist for the op, torch otherwise. ``triton``
on CPU tensors runs the kernels under Triton's interpreter, which only works when
``TRITON_INTERPRET=1`` was set before :mod:`triton` was first imported.
"""

from __future__ import annotations

import os

import torch

BACKENDS = ("auto", "torch", "triton")


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
    if backend == "triton":
        if not on_cuda and not interpreter_on():
            raise RuntimeError(
                "backend='triton' on CPU tensors needs Triton's interpreter: set "
                "TRITON_INTERPRET=1 in the environment before triton is imported"
            )
    return backend

