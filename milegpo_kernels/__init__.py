"""milegpo_kernels: GPU ops on flat tensors for MileGPO credit and the policy loss.

Every op has a torch implementation (the CPU path and the oracle of its Triton
kernel) and one public function that picks the backend: Triton for CUDA tensors,
torch for CPU tensors; ``backend="triton"`` on CPU runs the kernels under Triton's
interpreter (``TRITON_INTERPRET=1``). This package never imports milegpo, TRL,
transformers or an environment.

One folder per op family (``grouping``, ``counting``, ``graph``, ``graph_layout``, ``ordering``,
``segment``, ``scoring``, ``shaping``, ``returns``, ``similarity``): ``<family>/__init__.py`` the public ops,
which pick the backend, ``<family>/torch_ops.py`` their result / parameter types, input checks
and torch twins, ``<family>/triton_ops.py`` the Triton kernels and their launchers (it imports
``torch_ops``, never the other way); ``policy_loss/`` holds ``naive.py`` (the math) and
``fused.py`` (kernels, autograd, the public op). Shared Triton helpers are in
:mod:`.triton_helpers`, parameter records and host-side id checks in :mod:`.inputs`, test
machinery in :mod:`.testing`.
:func:`resolve_backend` tells which backend a call on given tensors takes; :func:`interpreter_on`
whether Triton's interpreter is on.
"""

from . import _interpreter_compat
from ._backend import interpreter_on, resolve as resolve_backend
from .counting import DistinctCounts, count_distinct
from .graph import INF, hop_distance, max_times_potential
from .graph_layout import GraphArrays, graph_arrays, graph_arrays_torch
from .grouping import DenseIds, dense_ids, lexsort
from .ordering import OrderedRows, ordered_rows, ordered_rows_torch
from .returns import (
    GraphReturn,
    discounted_returns,
    discounted_returns_torch,
    episode_scores,
    episode_scores_torch,
    graph_return,
    graph_return_torch,
)
from .scoring import GraphScores, ScoreParams, graph_scores, graph_scores_torch
from .similarity import connected_labels, shingle_overlap, similar_state_keys
from .shaping import ShapedAdvantage, ShapingParams, shaped_advantage, shaped_advantage_torch
from .policy_loss import PolicyLossStats, fused_policy_loss, naive_policy_loss
from .segment import (
    max_normalize,
    segment_count,
    segment_max,
    segment_normalize,
    segment_sum,
    sibling_mean,
)

__all__ = [
    "INF",
    "interpreter_on",
    "resolve_backend",
    "PolicyLossStats",
    "DenseIds",
    "DistinctCounts",
    "GraphArrays",
    "GraphReturn",
    "OrderedRows",
    "GraphScores",
    "ScoreParams",
    "ShapedAdvantage",
    "ShapingParams",
    "count_distinct",
    "dense_ids",
    "discounted_returns",
    "discounted_returns_torch",
    "episode_scores",
    "episode_scores_torch",
    "fused_policy_loss",
    "graph_arrays",
    "graph_arrays_torch",
    "graph_return",
    "graph_return_torch",
    "graph_scores",
    "graph_scores_torch",
    "hop_distance",
    "lexsort",
    "max_normalize",
    "max_times_potential",
    "naive_policy_loss",
    "ordered_rows",
    "ordered_rows_torch",
    "segment_count",
    "segment_max",
    "segment_normalize",
    "segment_sum",
    "shaped_advantage",
    "shaped_advantage_torch",
    "sibling_mean",
    "connected_labels",
    "shingle_overlap",
    "similar_state_keys",
]

_interpreter_compat.install()  # older Tritons' interpreter under NumPy 2 (see the module)
