"""shaped_advantage: Triton kernels vs torch twin vs plain Python (spec eqs. 9-10, 20-22).

Inputs: random potentials over V nodes, rows pointing at them (many rows per node, single
rows, rows whose returns are all equal inside their node, which must give exact zeros),
lengths around the kernels' block of 1024, both normalisation modes, out-of-range ids.
"""

from __future__ import annotations

import random

import pytest
import torch

from milegpo.credit import presets
from milegpo_kernels import ShapedAdvantage, ShapingParams, shaped_advantage, shaped_advantage_torch

from .helpers import BLOCK, check_close
from .test_segment import reference_flat_segments, reference_segment_normalize

pytestmark = pytest.mark.usefixtures("garbage_empty")

DEFAULT = ShapingParams.of(presets.ALFWORLD)
PARAMS = {
    "default": DEFAULT,
    "mean": DEFAULT._replace(norm="mean", gamma_phi=0.9, w_neg=0.7, lam=0.5, eta=0.35, w_step=0.8, w_ep=0.4),
}


def reference_shaped_advantage(phi, node, next_node, r_graph, episode_adv, p: ShapingParams = DEFAULT) -> dict:
    n, v = len(node), len(phi)
    delta_pos = [max(p.gamma_phi * p.w_pos * phi[next_node[i]][0] - p.w_pos * phi[node[i]][0], 0.0)
                 for i in range(n)]
    delta_neg = [max(p.gamma_phi * p.w_neg * phi[next_node[i]][1] - p.w_neg * phi[node[i]][1], 0.0)
                 for i in range(n)]
    r_shaped = [r_graph[i] + p.c * p.lam * (delta_pos[i] - delta_neg[i]) for i in range(n)]
    a_graph = reference_segment_normalize(r_graph, node, v, p.norm, p.norm_eps, "zero")
    a_mix = reference_segment_normalize(r_shaped, node, v, p.norm, p.norm_eps, "zero")
    a_res = [a_mix[i] - a_graph[i] for i in range(n)]
    adv = [p.w_step * (a_graph[i] + p.eta * a_res[i]) + p.w_ep * episode_adv[i] for i in range(n)]
    return {"delta_pos": delta_pos, "delta_neg": delta_neg, "r_shaped": r_shaped, "a_graph": a_graph,
            "a_mix": a_mix, "a_res": a_res, "adv": adv}


def _inputs(rng: random.Random, n: int, v: int, kind: str = "random"):
    v = max(v, 1)
    phi = [[rng.random() if rng.random() < 0.5 else 0.0, rng.random() if rng.random() < 0.3 else 0.0]
           for _ in range(v)]
    node = [rng.randrange(v) for _ in range(n)]
    next_node = [rng.randrange(v) for _ in range(n)]
    r_graph = [rng.choice([0.0, 10.0, 2.0, 0.4, rng.random()]) for _ in range(n)]
    if kind == "equal":  # every row of a node has the same return and potentials: exact zeros
        r_graph = [float(u % 3) for u in node]
        phi = [[0.5, 0.25]] * v
        next_node = list(node)
    if kind == "zero_phi":
        phi = [[0.0, 0.0]] * v
    episode_adv = [rng.gauss(0.0, 1.0) for _ in range(n)]
    return phi, node, next_node, r_graph, episode_adv


def _tensors(phi, node, next_node, r_graph, episode_adv, device):
    f64 = torch.float64
    return (torch.tensor(phi, dtype=f64, device=device).reshape(len(phi), 2),
            torch.tensor(node, dtype=torch.int64, device=device), torch.tensor(next_node, dtype=torch.int64, device=device),
            torch.tensor(r_graph, dtype=f64, device=device), torch.tensor(episode_adv, dtype=f64, device=device))


def designed_zeros(data, want: dict) -> dict:
    """Per field, the rows where it is exactly 0 by design whatever order sums are taken in: the
    elementwise fields everywhere; a_graph / a_mix where the node's returns are all equal (or
    it has one row); a_res where both are; adv nowhere. Elsewhere a zero of the reference is a
    coincidence of its order of summation (see ``check_close``)."""
    node, v = data[1], len(data[0])
    flat_graph, flat_mix = reference_flat_segments(data[3], node, v), reference_flat_segments(want["r_shaped"], node, v)
    every = [True] * len(node)
    return {"delta_pos": every, "delta_neg": every, "r_shaped": every, "a_graph": flat_graph, "a_mix": flat_mix,
            "a_res": [a and b for a, b in zip(flat_graph, flat_mix)], "adv": [False] * len(node)}


def _check(got: ShapedAdvantage, want: dict, exact_zeros: dict | None = None):
    for name in ShapedAdvantage._fields:
        g = getattr(got, name)
        assert g.dtype == torch.float64 and g.shape == (len(want[name]),), name
        check_close(g, want[name], exact_zeros=None if exact_zeros is None else exact_zeros[name])


CASES = {
    "empty": (0, 1, "random"),
    "one_row": (1, 1, "random"),
    "few_nodes": (300, 7, "random"),
    "singletons": (200, 5000, "random"),
    "block_minus_one": (BLOCK - 1, 60, "random"),
    "block_plus_one": (BLOCK + 1, 300, "random"),
    "equal_in_node": (700, 40, "equal"),
    "zero_potentials": (500, 30, "zero_phi"),
    "large": (2500, 400, "random"),
}


@pytest.mark.parametrize("pname", list(PARAMS))
@pytest.mark.parametrize("case", list(CASES))
def test_shaped_advantage(case, pname, device):
    n, v, kind = CASES[case]
    data = _inputs(random.Random(n * 7 + v), n, v, kind)
    want = reference_shaped_advantage(*data, PARAMS[pname])
    args = _tensors(*data, device)
    _check(shaped_advantage(*args, PARAMS[pname], backend="triton"), want, designed_zeros(data, want))
    _check(shaped_advantage_torch(*(a.cpu() for a in args), PARAMS[pname]), want)  # in order on CPU: every zero


def test_shaped_advantage_equal_returns_give_exact_zeros(device):
    data = _inputs(random.Random(3), 400, 20, "equal")
    got = shaped_advantage(*_tensors(*data, device), DEFAULT, backend="triton")
    assert torch.equal(got.a_graph.cpu(), torch.zeros(400, dtype=torch.float64))
    assert torch.equal(got.a_res.cpu(), torch.zeros(400, dtype=torch.float64))


def test_shaped_advantage_errors(device):
    args = list(_tensors(*_inputs(random.Random(1), 10, 4), device))
    with pytest.raises(TypeError, match="params must be a ShapingParams"):
        shaped_advantage(*args, {"c": 1.0}, backend="triton")
    with pytest.raises(ValueError, match="params.norm must be one of"):
        shaped_advantage(*args, DEFAULT._replace(norm="std"), backend="triton")
    with pytest.raises(ValueError, match=r"phi must be \(V, 2\) torch.float64"):
        shaped_advantage(args[0][:, :1], *args[1:], DEFAULT, backend="triton")
    with pytest.raises(ValueError, match=r"r_graph must be \(10,\) torch.float64"):
        shaped_advantage(*args[:3], args[3].float(), args[4], DEFAULT, backend="triton")
    if device == "cpu":  # on CUDA the kernels skip such ids (reading them would sync)
        bad = args[2].clone()
        bad[4] = 4
        for backend in ("torch", "triton"):
            with pytest.raises(ValueError, match=r"shaped_advantage: next_node\[4\] = 4 is outside \[0, 4\)"):
                shaped_advantage(args[0], args[1], bad, *args[3:], DEFAULT, backend=backend)


def test_shaping_params_of_a_config():
    p = ShapingParams.of(presets.WEBSHOP)
    assert p.eta == presets.WEBSHOP.eta and p.norm == presets.WEBSHOP.norm


def test_shaped_advantage_1e5_rows(device):
    data = _inputs(random.Random(17), 100_000, 30_000)
    want = reference_shaped_advantage(*data)
    _check(shaped_advantage(*_tensors(*data, device), DEFAULT, backend="triton"), want, designed_zeros(data, want))
