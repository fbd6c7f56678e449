"""What the ops share about their inputs: parameter records filled from a config, the id checks
that read tensors on the host, and the one switch those checks read.

The id checks (:func:`check_id_ranges`, :func:`check_seg_range`, and the count checks of
``graph_arrays`` and ``graph_return``) read tensor values on the host. On CUDA tensors that
would be a host sync, so they skip them (the kernels skip out-of-range ids instead); inside
``with host_checks(False):`` they skip CPU tensors too, so that a CPU run does what a GPU
call does (its launches, its host reads): ``scripts/credit_op_count.py`` and the host-read
test (tests/credit/test_triton_backend.py) run that way. Every op asks :func:`reads_host`.
"""

from __future__ import annotations

import contextlib
import contextvars

import torch

_HOST_CHECKS = contextvars.ContextVar("milegpo_kernels_host_checks", default=True)


@contextlib.contextmanager
def host_checks(enabled: bool):
    """Inside the block the ops' host-side id / count checks run (``True``, the default outside any
    block) or are skipped on CPU tensors as on CUDA ones (``False``). Blocks nest."""
    if not isinstance(enabled, bool):
        raise TypeError(f"host_checks: enabled must be a bool, got {enabled!r}")
    token = _HOST_CHECKS.set(enabled)
    try:
        yield
    finally:
        _HOST_CHECKS.reset(token)


def reads_host(t: torch.Tensor) -> bool:
    """Whether a check may read ``t``'s values on the host: ``t`` is not on CUDA and host checks
    are on (:func:`host_checks`)."""
    return not t.is_cuda and _HOST_CHECKS.get()


def params_of(cls, config):
    """A NamedTuple of scalars (``cls``) filled from the same-named attributes of ``config`` (a
    ``milegpo.credit.CreditConfig``): the ops' parameter records take their values from it."""
    return cls(**{f: getattr(config, f) for f in cls._fields})


def check_id_ranges(ids: dict, op: str) -> None:
    """Raise ValueError naming the first id outside its range, for ``{name: (ids, bound)}`` on
    the host; CUDA ids are not read (a host sync): the kernels skip out-of-range ids."""
    for name, (ids, bound) in ids.items():
        if not reads_host(ids):
            continue
        bad = torch.nonzero((ids < 0) | (ids >= bound))
        if bad.numel():
            i = int(bad[0, 0])
            raise ValueError(f"{op}: {name}[{i}] = {int(ids[i])} is outside [0, {bound})")


def check_seg_range(seg, num_segments: int, name: str) -> None:
    """Raise ValueError naming the first element whose segment id is outside
    ``[0, num_segments)``. Reads the ids on the host: the Triton wrappers call it for
    CPU tensors (the interpreter) only; on CUDA their kernels skip such elements,
    since checking would need a host synchronisation."""
    if not reads_host(seg) or seg.numel() == 0:
        return
    bad = torch.nonzero((seg < 0) | (seg >= num_segments))
    if bad.numel():
        i = int(bad[0, 0])
        raise ValueError(f"{name}: seg[{i}] = {int(seg[i])} is outside [0, {num_segments}) (num_segments)")
