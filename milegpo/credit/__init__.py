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

from typing import Mapping

from . import presets
from .batch import FIELDS, REWARD_LIMIT, SINK, BatchError, BatchTypeError, StepBatch
from .config import VARIANTS, CreditConfig
from .diagnostic_metrics import diagnostic_parts, diagnostics, diagnostics_from_parts, merge_diagnostic_parts
from .registry import (METHODS, ConfigField, CreditMethod, check_fields, check_method, field_readers, get_method,
                       method_variants, register, unregister)
from .result import CreditResult, check_finite
from .similarity import SketchTable, merge_similar_states
from ..state_sketches import StateSimilarity

# the registration line: each module registers its method(s) (registry.py's "Adding a method"); this order is the
# order of every table
from . import paper, hgpo, g2po, beacon  # noqa: E402,F401  isort: skip

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
    method: a name of :data:`METHODS` (``grpo`` | ``gigpo`` | ``graphgpo`` | ``milegpo`` | ``hgpo`` | ``g2po`` |
      ``beacon``,
      and any :func:`register` added; :mod:`milegpo.credit.registry`).
    config: a :class:`CreditConfig` (``presets.ALFWORLD`` or ``presets.WEBSHOP``); a field it changes from its
      preset (:attr:`CreditConfig.changed`) that ``method`` does not read is refused (:func:`check_fields`).
    variant: MileGPO ablation ``md`` (eq. 7) | ``rcs`` (eq. 8) | ``full`` (eq. 19); a method of one
      variant takes ``full`` only (:func:`check_method`).
    backend: ``auto`` | ``reference`` | ``torch`` | ``triton``.
    cuda_graph: replay the pipeline as a CUDA graph captured once per batch size
      (CUDA batch, ``triton``/``auto`` backend; see :mod:`milegpo.credit.cuda_graph`):
      for repeated calls at one size, where launching its ~60 small kernels from
      Python costs more than running them.

    Returns a :class:`CreditResult`; ``.advantages`` is (N,) float64 in input order.
    """
    if not isinstance(batch, StepBatch):
        raise TypeError(f"estimate: batch must be a StepBatch, got {type(batch).__name__}")
    spec = check_method(method, variant)
    if not isinstance(config, CreditConfig):
        raise TypeError(f"estimate: config must be a CreditConfig, got {type(config).__name__}")
    check_fields(method, config.changed)
    if backend not in BACKENDS:
        raise ValueError(f"unknown credit backend {backend!r}; expected one of {BACKENDS}")
    if cuda_graph:
        from .cuda_graph import estimate_graphed

        result = estimate_graphed(batch, spec, config, variant, backend)
    elif backend == "reference":
        from .reference import estimate_reference

        result = estimate_reference(batch, spec, config, variant)
    else:
        from .vectorized import estimate_vectorized

        backend = ("triton" if batch.device.type == "cuda" else "torch") if backend == "auto" else backend
        result = estimate_vectorized(batch, spec, config, variant, backend=backend)
    check_finite(method, result.advantages)  # its shape and dtype were checked where they entered
    if spec.batch_check is not None:  # what the batch lacks for this method, said (BEACON: no milestone row)
        spec.batch_check(batch)
    return result


def estimate_merged(batch: StepBatch, runs: Mapping[str, tuple[str, str, CreditConfig]], backend: str = "auto",
                    similarity: StateSimilarity | None = None, table: SketchTable | None = None,
                    ) -> tuple[StepBatch, dict[str, CreditResult]]:
    """Near-duplicate states merged, then credit: the one sequence the trainer and the ground-truth tools run.

    batch: N rows; runs: name -> (method, variant, config), each estimated on ``backend``; similarity: the
    near-duplicate rule (:class:`StateSimilarity`), None for exact keys (nothing merged); table: the sketches
    of the batch's keys (:class:`SketchTable`), needed with ``similarity``. The merge runs on the batch's
    device with ``backend``'s kernels (``torch`` / ``triton``; ``auto`` and ``reference``: Triton on CUDA,
    torch otherwise). Returns (the batch the estimates saw, {name: CreditResult}); ``runs`` may be empty."""
    if similarity is not None:
        if table is None:
            raise ValueError("estimate_merged: merging near-duplicate states needs the sketches of the batch's "
                             "keys (table=SketchTable.from_sketches(...) or .from_texts(...))")
        batch = merge_similar_states(batch, table, similarity, backend if backend in ("torch", "triton") else "auto")
    return batch, {name: estimate(batch, method, config, variant, backend)
                   for name, (method, variant, config) in runs.items()}


__all__ = [
    "BACKENDS", "FIELDS", "METHODS", "REWARD_LIMIT", "SINK", "VARIANTS", "BatchError", "BatchTypeError", "ConfigField",
    "CreditConfig", "CreditMethod", "CreditResult", "SketchTable", "StateSimilarity", "StepBatch", "check_fields",
    "check_method", "diagnostic_parts", "diagnostics", "diagnostics_from_parts", "estimate", "estimate_merged",
    "field_readers", "get_method", "merge_diagnostic_parts", "merge_similar_states", "method_variants", "presets",
    "register", "unregister",
]
