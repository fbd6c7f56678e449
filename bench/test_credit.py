"""End-to-end credit: plain-Python reference vs vectorised torch (CPU, and CUDA when
present) vs the Triton pipeline (CUDA only), eager and replayed as a CUDA graph
(``estimate(..., cuda_graph=True)``; captured before timing). The batch is built and
validated on the host, as the trainer does, so it brings its (group, traj, t) row order
to the GPU; ``triton_graph_raw`` replays the graph for the same batch built with
``validate=False``, whose rows the pipeline sorts on the GPU (three more sorts);
``triton_graph_nodes`` replays it and also reads the node table and the rows' node ids,
whose canonical (group, key) order is sorted on first read (two sorts and a few gathers
the advantages do not need).

MileGPO full (ALFWorld preset) on 16 groups x 8 trajectories x 50 steps = 6,400 rows
and on 10x that (160 groups, 64,000 rows). Ratios are measured in this run and put
in ``extra_info`` and the end-of-run table (bench/conftest.py):
``speedup_vs_reference`` (reference median / this median, same batch),
``speedup_vs_torch_cpu``, ``speedup_vs_torch_cuda`` and ``speedup_vs_triton_eager`` for
the Triton pipelines,
``growth_vs_6400`` (64,000-row median / 6,400-row median, same backend; linear is 10).
A speed-up is recorded only after the backend matched the reference on the
benchmark batch itself. The CPU torch path runs with one intra-op thread (recorded as
``torch_threads``): at these sizes a second thread only adds synchronisation, and on a
shared 2-core machine it made the median 2-6x slower and erratic.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from milegpo.credit import StepBatch, estimate, presets
from milegpo.credit.synthetic import benchmark_batch

SIZES = {6400: 16, 64000: 160}
BACKENDS = ["reference", "torch", "torch_cuda", "triton", "triton_graph", "triton_graph_raw", "triton_graph_nodes"]
CUDA_IMPLS = ("torch_cuda", "triton", "triton_graph", "triton_graph_raw", "triton_graph_nodes")
HAS_CUDA = torch.cuda.is_available()
_BATCHES: dict[int, object] = {}
_REFERENCE: dict[int, torch.Tensor] = {}


@contextlib.contextmanager
def intra_op_threads(n: int):
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def batch_of(rows: int):
    if rows not in _BATCHES:
        _BATCHES[rows] = benchmark_batch(n_groups=SIZES[rows], group_size=8, horizon=50, seed=0)
        assert len(_BATCHES[rows]) == rows
    return _BATCHES[rows]


def reference_advantages(rows: int) -> torch.Tensor:
    if rows not in _REFERENCE:
        _REFERENCE[rows] = estimate(batch_of(rows), "milegpo", presets.ALFWORLD, "full", backend="reference").advantages
    return _REFERENCE[rows]


@pytest.mark.parametrize("rows", sorted(SIZES))
@pytest.mark.parametrize("impl", BACKENDS)
def test_credit_milegpo_full(benchmark, medians, median_of, record_ratio, rows, impl):
    if impl in CUDA_IMPLS and not HAS_CUDA:
        pytest.skip("needs CUDA")
    benchmark.group = f"credit milegpo full, {rows} rows"
    device = "cuda" if impl in CUDA_IMPLS else "cpu"
    backend = "torch" if impl == "torch_cuda" else "triton" if impl.startswith("triton") else impl
    graph = impl.startswith("triton_graph")
    b = batch_of(rows).to(device)
    if impl == "triton_graph_raw":  # no row order from validation: the pipeline sorts the rows on the GPU
        b = StepBatch(**b.as_dict(), validate=False)

    def run():
        result = estimate(b, "milegpo", presets.ALFWORLD, "full", backend=backend, cuda_graph=graph)
        out = result.advantages
        if impl == "triton_graph_nodes":  # also the node table and the rows' node ids in canonical order
            out = (out, result.rows["node"], result.rows["next_node"], *result.nodes.values())
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    with intra_op_threads(1 if impl == "torch" else torch.get_num_threads()):
        if impl != "reference":  # correctness gate (also compiles the kernels)
            out = run()
            torch.testing.assert_close((out[0] if isinstance(out, tuple) else out).cpu(), reference_advantages(rows),
                                       atol=1e-9, rtol=1e-9)
        benchmark.pedantic(run, rounds=3 if impl == "reference" else 10, iterations=1, warmup_rounds=1)
        used_threads = torch.get_num_threads()
    # op / impl / rows: scripts/bench_table.py tabulates it beside the kernels ("python" = the reference)
    benchmark.extra_info.update(op="credit_milegpo_full", impl={"reference": "python"}.get(impl, impl), rows=rows,
                                torch_threads=used_threads)
    me = median_of(benchmark)
    if me is None:  # --benchmark-disable
        return
    medians[f"{impl}/{rows}"] = me
    for other in ("reference", "torch", "torch_cuda", "triton"):
        if other != impl and f"{other}/{rows}" in medians and BACKENDS.index(other) < BACKENDS.index(impl):
            name = {"reference": "speedup_vs_reference", "torch": "speedup_vs_torch_cpu",
                    "torch_cuda": "speedup_vs_torch_cuda", "triton": "speedup_vs_triton_eager"}[other]
            record_ratio(benchmark, name, medians[f"{other}/{rows}"] / me)
    if rows == 64000 and f"{impl}/6400" in medians:
        record_ratio(benchmark, "growth_vs_6400", me / medians[f"{impl}/6400"])


# ---- the field's methods (issues 42, 47): HGPO, G2PO and BEACON, each under its ALFWorld script's values
# (presets.ALFWORLD; benchmark_batch's milestones: a few spine states and the win)
FIELD_METHODS = ("hgpo", "g2po", "beacon")
FIELD_BACKENDS = ["reference", "torch", "torch_cuda", "triton"]
_FIELD_REFERENCE: dict[tuple[str, int], torch.Tensor] = {}


def field_reference(method: str, rows: int) -> torch.Tensor:
    if (method, rows) not in _FIELD_REFERENCE:
        _FIELD_REFERENCE[method, rows] = estimate(batch_of(rows), method, presets.ALFWORLD,
                                                  backend="reference").advantages
    return _FIELD_REFERENCE[method, rows]


@pytest.mark.parametrize("rows", sorted(SIZES))
@pytest.mark.parametrize("impl", FIELD_BACKENDS)
@pytest.mark.parametrize("method", FIELD_METHODS)
def test_credit_field_methods(benchmark, medians, median_of, record_ratio, method, rows, impl):
    """HGPO / G2PO / BEACON end to end on the same batches as MileGPO: the plain-Python reference against the torch
    pipeline (CPU, one thread; CUDA) and the Triton one, in one run; ``speedup_vs_reference`` as above."""
    if impl in CUDA_IMPLS and not HAS_CUDA:
        pytest.skip("needs CUDA")
    benchmark.group = f"credit {method}, {rows} rows"
    device = "cuda" if impl in CUDA_IMPLS else "cpu"
    backend = "torch" if impl == "torch_cuda" else impl
    b = batch_of(rows).to(device)

    def run():
        out = estimate(b, method, presets.ALFWORLD, backend=backend).advantages
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    with intra_op_threads(1 if impl == "torch" else torch.get_num_threads()):
        if impl != "reference":  # correctness gate (also compiles the kernels)
            torch.testing.assert_close(run().cpu(), field_reference(method, rows), atol=1e-9, rtol=1e-9)
        benchmark.pedantic(run, rounds=3 if impl == "reference" else 10, iterations=1, warmup_rounds=1)
        used_threads = torch.get_num_threads()
    benchmark.extra_info.update(op=f"credit_{method}", impl={"reference": "python"}.get(impl, impl), rows=rows,
                                torch_threads=used_threads)
    me = median_of(benchmark)
    if me is None:  # --benchmark-disable
        return
    medians[f"{method}/{impl}/{rows}"] = me
    for other in ("reference", "torch", "torch_cuda"):
        if other != impl and f"{method}/{other}/{rows}" in medians and (
                FIELD_BACKENDS.index(other) < FIELD_BACKENDS.index(impl)):
            name = {"reference": "speedup_vs_reference", "torch": "speedup_vs_torch_cpu",
                    "torch_cuda": "speedup_vs_torch_cuda"}[other]
            record_ratio(benchmark, name, medians[f"{method}/{other}/{rows}"] / me)
    if rows == 64000 and f"{method}/{impl}/6400" in medians:
        record_ratio(benchmark, "growth_vs_6400", me / medians[f"{method}/{impl}/6400"])


# ---- HGPO's history past the batch's longest episode (issue 48.6): the depths stop at the longest episode
@pytest.mark.parametrize("depths", ["uncapped", "capped"])
def test_credit_hgpo_long_history(benchmark, medians, median_of, record_ratio, depths, monkeypatch):
    """HGPO with ``hgpo_history=64`` on episodes of at most 10 steps (160 groups x 8 trajectories, 12,800 rows;
    torch, CPU, one thread). ``capped`` forms the depths up to the longest episode (10), as the estimator does;
    ``uncapped`` all 65 (the cap switched off: the same advantages, checked); ``speedup_vs_uncapped`` is
    uncapped median / capped median, in this run."""
    from milegpo.credit import hgpo

    benchmark.group = "credit hgpo, hgpo_history 64, episodes <= 10 steps"
    b = benchmark_batch(n_groups=160, group_size=8, horizon=10, seed=0)
    config = presets.ALFWORLD.replace(hgpo_history=64)
    want = estimate(b, "hgpo", config, backend="torch").advantages
    if depths == "uncapped":
        monkeypatch.setattr(hgpo, "depth_count", lambda config, longest: int(config.hgpo_history) + 1)

    def run():
        return estimate(b, "hgpo", config, backend="torch").advantages

    with intra_op_threads(1):
        assert torch.equal(run(), want)  # the same numbers either way
        benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(op="credit_hgpo_history_64", impl=depths, rows=len(b), torch_threads=1)
    me = median_of(benchmark)
    if me is None:
        return
    medians[f"hgpo-long/{depths}"] = me
    if depths == "capped" and "hgpo-long/uncapped" in medians:
        record_ratio(benchmark, "speedup_vs_uncapped", medians["hgpo-long/uncapped"] / me)
