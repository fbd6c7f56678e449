"""milegpo_kernels._interpreter_compat: older Tritons' interpreter faults under NumPy 2, fixed
where present (Triton 3.4.0 and 3.6.0 have both; scripts/triton_version_check.sh runs the kernel
and credit tests under such a Triton)."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as ti

from milegpo_kernels import _interpreter_compat as compat
from milegpo_kernels import interpreter_on

pytestmark = pytest.mark.skipif(not interpreter_on(), reason="interpreter only")


@triton.jit
def _invert_and_loop_kernel(off_ptr, key_ptr, out_ptr, count_ptr, BLOCK: tl.constexpr):
    """out = ~key (uint64); count[pid] = steps of BLOCK in [off[pid], off[pid + 1])."""
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, ~tl.load(key_ptr + pid))
    lo = tl.load(off_ptr + pid)
    hi = tl.load(off_ptr + pid + 1)
    steps = tl.full([], 0, tl.int64)
    for _ in range(lo, hi, BLOCK):  # loop bounds read from memory
        steps += 1
    tl.store(count_ptr + pid, steps)


def test_a_kernel_with_both_constructs_runs_under_this_interpreter():
    off = torch.tensor([0, 5, 20, 20])
    key = torch.tensor([0, 7, 2**63], dtype=torch.uint64)
    out = torch.empty(3, dtype=torch.uint64)
    count = torch.empty(3, dtype=torch.int64)
    _invert_and_loop_kernel[(3,)](off, key, out, count, BLOCK=4)
    assert count.tolist() == [2, 4, 0]
    assert out.view(torch.int64).tolist() == (~key.view(torch.int64)).tolist()


def test_the_probes_find_no_fault_after_import():
    assert not compat._unsigned_all_ones_fails(ti, tl)
    assert not compat._tensor_index_fails(ti, tl)


def _faulty_all_ones(self, type):  # Triton 3.6.0 under NumPy 2: np.full(1, -1, dtype=np.uint64) is refused
    if np.issubdtype(ti._get_np_dtype(type), np.unsignedinteger):
        raise OverflowError("Python integer -1 out of bounds for uint64")
    return ti.TensorHandle(np.full(1, -1, dtype=ti._get_np_dtype(type)), type.scalar)


def _refused_index(self):  # Triton 3.6.0 under NumPy 2.4: int() of a one-element array is refused
    raise TypeError("only 0-dimensional arrays can be converted to Python scalars")


def _faulty_patch_lang_tensor(tensor, *scope):  # with a patch scope (Triton >= 3.6) or without (<= 3.5)
    if scope:
        scope[0].set_attr(tensor, "__index__", _refused_index)
    else:
        tensor.__index__ = _refused_index


def test_install_fixes_an_interpreter_with_the_faults(monkeypatch):
    monkeypatch.setattr(ti.InterpreterBuilder, "get_all_ones_value", _faulty_all_ones)
    monkeypatch.setattr(ti, "_patch_lang_tensor", _faulty_patch_lang_tensor)
    monkeypatch.setattr(compat, "FIXES", [])
    assert compat._unsigned_all_ones_fails(ti, tl) and compat._tensor_index_fails(ti, tl)
    assert compat.install() == ["unsigned ~x", "loop bounds read from memory"]
    assert not compat._unsigned_all_ones_fails(ti, tl) and not compat._tensor_index_fails(ti, tl)
    assert compat.install() == []  # once only
    assert ti.interpreter_builder.get_all_ones_value(tl.int32).data.tolist() == [-1]  # signed: as before


def test_install_does_nothing_without_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(ti.InterpreterBuilder, "get_all_ones_value", _faulty_all_ones)
    assert compat.install() == []
    with pytest.raises(OverflowError):
        ti.interpreter_builder.get_all_ones_value(tl.uint64)


def test_an_interpreter_too_old_for_the_kernels_is_named(monkeypatch):
    from milegpo_kernels import segment_max

    x, seg = torch.tensor([1.0, 3.0, 2.0]), torch.tensor([0, 0, 1])
    monkeypatch.setattr(triton, "__version__", "3.3.1")
    with pytest.raises(RuntimeError, match=r"Triton 3\.3\.1's cannot run them: it needs triton>=3\.4"):
        segment_max(x, seg, 2, backend="triton")
    assert segment_max(x, seg, 2, backend="torch").tolist() == [3.0, 2.0]  # the torch twin is unaffected
    monkeypatch.setattr(triton, "__version__", "3.4.0+git1a2b3c")
    assert segment_max(x, seg, 2, backend="triton").tolist() == [3.0, 2.0]
