"""CUDA-graph replay of the credit pipeline: ``estimate(..., cuda_graph=True)``.

On a GPU the vectorised pipeline is ~60 small kernels (MileGPO, Triton path: 29 Triton
launches and ~32 ATen fills, cumsums, stacks and scatters; ``scripts/credit_op_count.py``)
on arrays of a few thousand elements: each runs for microseconds and the time goes to
launching them from Python. The pipeline makes no host synchronisation and, on CUDA,
keeps every array at a static size (2N nodes, N edges, N groups), so it can be captured
once per batch size as a CUDA graph and replayed: one launch for the whole pipeline.

A graph is captured per (device, N, method, variant, config, backend, whether the batch brings its
row order) and kept in a small least-recently-used cache (:data:`MAX_GRAPHS`; :func:`clear_graphs` frees them).
A call copies the batch into the graph's input buffers, replays it and copies the
outputs out (one fused multi-tensor copy), so results of earlier calls stay valid.
The first call for a size pays for two eager warm-up runs and the capture (a few
eager calls' worth); later calls of that size pay for the replay alone. The Triton
backend is the one that can be captured: the torch twins of the graph relaxations
test for convergence on the host.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from .batch import FIELDS, StepBatch
from .config import CreditConfig
from .registry import CreditMethod
from .result import CreditResult
from .vectorized import credit_tables, estimate_vectorized

#: graphs kept (each holds its own memory pool: roughly the memory of one eager call)
MAX_GRAPHS = 8
_GRAPHS: "OrderedDict[tuple, _GraphedEstimate]" = OrderedDict()


def clear_graphs() -> None:
    """Drop every captured credit graph (and the GPU memory their pools hold)."""
    _GRAPHS.clear()


def _copy_out(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    out = [torch.empty_like(t) for t in tensors]
    if out:
        torch._foreach_copy_(out, tensors)  # a few multi-tensor kernels instead of one copy per array
    return out


class _GraphedEstimate:
    def __init__(self, batch: StepBatch, method: CreditMethod, config: CreditConfig, variant: str, backend: str):
        order = None if batch.row_order is None else batch.row_order.clone()
        self.static = StepBatch(**{k: getattr(batch, k).clone() for k in FIELDS}, validate=False).with_row_order(order)
        device = batch.device

        def run():
            return credit_tables(self.static, method, config, variant, backend, static_shapes=True)

        # warm-up on a side stream (Triton compiles, workspaces), as torch.cuda.graphs asks
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                run()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph):
                self.tables = run()
        except RuntimeError as e:
            raise RuntimeError(f"estimate(cuda_graph=True): capturing the {backend} credit pipeline failed "
                               f"({e}); call estimate without cuda_graph") from e
        self.outputs = self.tables.tensors()
        self.method, self.config, self.variant, self.backend = method.name, config, variant, backend

    def __call__(self, batch: StepBatch) -> CreditResult:
        for k in FIELDS:
            getattr(self.static, k).copy_(getattr(batch, k))
        if self.static.row_order is not None:
            self.static.row_order.copy_(batch.row_order)
        self.graph.replay()
        tables = self.tables.like(_copy_out(self.outputs))
        return tables.result(batch, self.method, self.config, self.variant, self.backend)


def estimate_graphed(batch: StepBatch, method: CreditMethod, config: CreditConfig, variant: str,
                     backend: str) -> CreditResult:
    """See :func:`milegpo.credit.estimate` with ``cuda_graph=True``."""
    if batch.device.type != "cuda":
        raise ValueError(f"estimate: cuda_graph=True needs a batch on a CUDA device, got {batch.device}")
    if backend not in ("auto", "triton"):
        raise ValueError(f"estimate: cuda_graph=True needs backend 'triton' or 'auto', got {backend!r} (the torch "
                         "twins of the graph relaxations loop until convergence, read on the host)")
    if len(batch) == 0:
        return estimate_vectorized(batch, method, config, variant, backend="triton")
    # a batch that brings its row order runs a pipeline without the row sort: its own graph
    key = (batch.device, len(batch), method.name, variant, config, "triton", batch.row_order is not None)
    g = _GRAPHS.get(key)
    if g is None:
        g = _GraphedEstimate(batch, method, config, variant, "triton")
        _GRAPHS[key] = g
        while len(_GRAPHS) > MAX_GRAPHS:
            _GRAPHS.popitem(last=False)
    else:
        _GRAPHS.move_to_end(key)
    return g(batch)
