"""Kernel-test setup: Triton's interpreter for CPU runs, and garbage-filled outputs.

``TRITON_INTERPRET=1`` must be in the environment before :mod:`triton` is first
imported (tests/conftest.py sets it too, for the whole suite). On a CUDA machine,
run with ``TRITON_INTERPRET=0`` to test the compiled kernels on CUDA tensors
(scripts/gpu_check.sh does).
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


def _on_gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


@pytest.fixture(scope="session")
def device() -> str:
    """Where the Triton kernels' inputs live: "cuda" with a GPU and the interpreter
    off, else "cpu" (kernels under the interpreter)."""
    return "cuda" if _on_gpu() else "cpu"


@pytest.fixture
def garbage_empty():
    """``torch.empty`` / ``torch.empty_like`` return NaN / garbage-filled tensors, so a
    kernel that forgets to write an output element fails instead of passing by luck
    (:func:`milegpo_kernels.testing.garbage_empty`)."""
    from milegpo_kernels.testing import garbage_empty

    with garbage_empty():
        yield
