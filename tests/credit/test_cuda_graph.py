"""estimate(..., cuda_graph=True): the pipeline replayed as a CUDA graph (milegpo.credit.cuda_graph)
equals the reference; it refuses a CPU batch and the torch backend."""

from __future__ import annotations

import pytest
import torch

from milegpo.credit import estimate, presets

from .batches import make_batch
from .test_estimate import compare


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.gpu
def test_cuda_graph_replay_matches_reference(monkeypatch):
    from milegpo.credit import cuda_graph
    from milegpo.credit.cuda_graph import _GRAPHS, clear_graphs
    from milegpo.credit.synthetic import benchmark_batch

    monkeypatch.setattr(cuda_graph, "MAX_GRAPHS", 32)  # keep all 12 (method, variant, preset) graphs
    clear_graphs()
    first = benchmark_batch(n_groups=3, group_size=5, horizon=12, seed=1).to("cuda")
    compare(first, backend="triton", cuda_graph=True)  # captures one graph per method / variant / preset
    captured = len(_GRAPHS)
    assert captured == 12
    second = benchmark_batch(n_groups=3, group_size=5, horizon=12, seed=2, self_loop_p=0.6).to("cuda")
    assert len(second) == len(first)
    compare(second, backend="auto", cuda_graph=True)  # same size: replays, new inputs
    assert len(_GRAPHS) == captured
    # results of earlier calls are copies: a later replay does not overwrite them
    r1 = estimate(first, "milegpo", presets.ALFWORLD, cuda_graph=True)
    keep = r1.advantages.clone(), r1.nodes["phi_pos"].clone()
    estimate(second, "milegpo", presets.ALFWORLD, cuda_graph=True)
    assert torch.equal(r1.advantages, keep[0]) and torch.equal(r1.nodes["phi_pos"], keep[1])
    compare(make_batch(3, n_groups=2, k=4, horizon=8).to("cuda"), backend="triton", cuda_graph=True)


def test_cuda_graph_needs_a_cuda_batch_and_the_triton_backend():
    batch = make_batch(0, n_groups=1, k=2, horizon=3)
    with pytest.raises(ValueError, match="cuda_graph=True needs a batch on a CUDA device"):
        estimate(batch, "milegpo", presets.ALFWORLD, cuda_graph=True)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda_graph=True needs backend 'triton' or 'auto'"):
            estimate(batch.to("cuda"), "milegpo", presets.ALFWORLD, backend="torch", cuda_graph=True)
