"""Two faults of older Tritons' interpreter under NumPy 2, fixed as newer Tritons fix them.

``backend="triton"`` on CPU runs the kernels under Triton's interpreter. Older Tritons' interpreter
fails there with NumPy >= 2 on code that compiles fine (under Triton 3.6.0, which CUDA builds of
torch 2.11 pin, 147 of this package's kernel and credit tests failed):

- ``~x`` on an unsigned integer: the interpreter builds the all-ones operand as
  ``np.full(1, -1, dtype=np.uint64)``, which NumPy 2 refuses (``OverflowError: Python integer
  -1 out of bounds for uint64``). Triton 3.4-3.8 have it; 3.9 builds it from
  ``np.iinfo(dtype).max``.
- a loop bound read from memory (``for start in range(lo, hi, BLOCK)`` with ``lo = tl.load(..)``):
  the interpreter's ``__index__`` calls ``int()`` on a one-element array, which NumPy 2.4
  refuses (``TypeError: only 0-dimensional arrays can be converted to Python scalars``).
  Triton 3.4-3.6 have it; 3.7 squeezes the array first.

:func:`install` probes the interpreter for each fault and, only where it is present, puts the
newer Triton's code in place; it changes nothing in compiled kernels (the interpreter is not
used there) and nothing on a Triton without the faults. It runs when :mod:`milegpo_kernels` is
imported with ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import operator

import numpy as np

from ._backend import interpreter_on

FIXES: list[str] = []  # the fixes install() put in place in this process


def _unsigned_all_ones_fails(ti, tl) -> bool:
    try:
        ti.interpreter_builder.get_all_ones_value(tl.uint64)
    except OverflowError:
        return True
    return False


def _fix_unsigned_all_ones(ti) -> None:
    original = ti.InterpreterBuilder.get_all_ones_value

    def get_all_ones_value(self, type):
        np_type = ti._get_np_dtype(type)
        if np.issubdtype(np_type, np.unsignedinteger):
            return ti.TensorHandle(np.full(1, np.iinfo(np_type).max, dtype=np_type), type.scalar)
        return original(self, type)

    ti.InterpreterBuilder.get_all_ones_value = get_all_ones_value


def _index(self):
    return int(self.handle.data.squeeze())


def _tensor_index_fails(ti, tl) -> bool:
    class Probe:  # stands in for tl.tensor: _patch_lang_tensor only sets attributes on it
        pass

    if hasattr(ti, "_LangPatchScope"):  # Triton >= 3.6: the patches are undone after each launch
        ti._patch_lang_tensor(Probe, ti._LangPatchScope())
    else:
        ti._patch_lang_tensor(Probe)
    probe = Probe()
    probe.handle = ti.TensorHandle(np.array([3], dtype=np.int64), tl.int64)  # a scalar, as a load gives it
    try:
        return operator.index(probe) != 3
    except TypeError:
        return True


def _fix_tensor_index(ti) -> None:
    original = ti._patch_lang_tensor

    def _patch_lang_tensor(tensor, *scope):
        original(tensor, *scope)
        if scope:
            scope[0].set_attr(tensor, "__index__", _index)
        else:
            tensor.__index__ = _index

    ti._patch_lang_tensor = _patch_lang_tensor


def install() -> list[str]:
    """Apply the fixes this Triton's interpreter needs (none unless ``TRITON_INTERPRET=1``);
    returns the names of those applied by this call. A Triton whose interpreter is laid out
    otherwise than 3.4-3.9's is left as it is."""
    if not interpreter_on():
        return []
    try:
        import triton.language as tl
        from triton.runtime import interpreter as ti
    except ImportError:  # pragma: no cover - triton is a hard dependency
        return []
    applied = []
    for name, fails, fix in (("unsigned ~x", _unsigned_all_ones_fails, _fix_unsigned_all_ones),
                             ("loop bounds read from memory", _tensor_index_fails, _fix_tensor_index)):
        try:
            if name in FIXES or not fails(ti, tl):
                continue
        except (AttributeError, TypeError):  # an interpreter laid out otherwise: not ours to fix
            continue
        fix(ti)
        FIXES.append(name)
        applied.append(name)
    return applied
