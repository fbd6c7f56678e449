"""MileGPO credit assignment and its baselines over a :class:`StepBatch`.

>>> from milegpo.credit import StepBatch, estimate, presets, diagnostics
>>> result = estimate(batch, "milegpo", presets.ALFWORLD, variant="full")
>>> result.advantages  # (N,) float64, input row order

Backends: ``reference`` (plain Python, one function per equation: the oracle),
``torch`` (vectorised over the whole batch, CPU or CUDA), ``triton`` (the same
pipeline on the Triton kernels of :mod:`milegpo_kernels`), ``auto`` (Triton for
CUDA tensors, torch otherwise).
"""

from __future__ import annotations

from . import presets
from .batch import FIELDS, REWARD_LIMIT, SINK, BatchError, BatchTypeError, StepBatch
from .config import METHODS, VARIANTS, CreditConfig, check_method
from .diagnostic_metrics import diagnostic_parts, diagnostics, diagnostics_from_parts, merge_diagnostic_parts
from .result import CreditResult
from .similarity import SketchTable, merge_similar_states
from ..state_sketches import StateSimilarity

BACKENDS = ("auto", "reference", "torch", "triton")


def estimate(
    batch: StepBatch,
    method: str,
    config: CreditConfig = presets.ALFWORLD,
    variant: str = "full",
    backend: str = "auto",
    *,
    cuda_graph: bool = False,
) -> CreditResult:
    """Advantages of one rollout batch.

    batch: a validated :class:`StepBatch` of N rows.
    method: ``grpo`` | ``gigpo`` | ``graphgpo`` | ``milegpo``.
    config: a :class:`CreditConfig` (``presets.ALFWORLD`` or ``presets.WEBSHOP``).
    variant: MileGPO ablation ``md`` (eq. 7) | ``rcs`` (eq. 8) | ``full`` (eq. 19);
      ignored by the other methods.
    backend: ``auto`` | ``reference`` | ``torch`` | ``triton``.
    cuda_graph: replay the pipeline as a CUDA graph captured once per batch size
      (CUDA batch, ``triton``/``auto`` backend; see :mod:`milegpo.credit.cuda_graph`):
      for repeated calls at one size, where launching its ~60 small kernels from
      Python costs more than running them.

    Returns a :class:`CreditResult`; ``.advantages`` is (N,) float64 in input order.
    """
    if not isinstance(batch, StepBatch):
        raise TypeError(f"estimate: batch must be a StepBatch, got {type(batch).__name__}")
    check_method(method, variant)
    if not isinstance(config, CreditConfig):
        raise TypeError(f"estimate: config must be a CreditConfig, got {type(config).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown credit backend {backend!r}; expected one of {BACKENDS}")
    if cuda_graph:
        from .cuda_graph import estimate_graphed

        return estimate_graphed(batch, method, config, variant, backend)
    if backend == "reference":
        from .reference import estimate_reference

        return estimate_reference(batch, method, config, variant)
    if backend == "auto":
        backend = "triton" if batch.device.type == "cuda" else "torch"
    from .vectorized import estimate_vectorized

    return estimate_vectorized(batch, method, config, variant, backend=backend)


__all__ = [
    "BACKENDS", "FIELDS", "METHODS", "REWARD_LIMIT", "SINK", "VARIANTS", "BatchError", "BatchTypeError",
    "CreditConfig", "CreditResult", "SketchTable", "StateSimilarity", "StepBatch", "diagnostic_parts", "diagnostics",
    "diagnostics_from_parts", "estimate", "merge_diagnostic_parts", "merge_similar_states", "presets",
]
