"""hop_distance and max_times_potential (milegpo_kernels.graph): the Triton kernels vs their torch
twins vs plain Python (tests/kernels/helpers.py says how)."""

from __future__ import annotations

import random
from collections import deque

import pytest
import torch

from milegpo_kernels import INF, hop_distance, max_times_potential
from milegpo_kernels.graph import hop_distance_torch, max_times_potential_torch

from .helpers import BLOCK, i64, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")


# plain-Python references (the benchmarks import them)


def reference_hop_distance(src, dst, target):
    """Reverse BFS from every target node over the edges src -> dst."""
    v = len(target)
    into = [[] for _ in range(v)]
    for s, d in zip(src, dst):
        into[d].append(s)
    dist = [0 if t else INF for t in target]
    queue = deque(i for i in range(v) if target[i])
    while queue:
        d = queue.popleft()
        for s in into[d]:
            if dist[s] == INF:
                dist[s] = dist[d] + 1
                queue.append(s)
    return dist


def reference_max_times_potential(src, dst, seed, factor):
    """phi(s) = max(seed(s), max over edges s -> d of phi(d) * factor), by worklist
    relaxation to the fixed point; the power is formed by repeated multiplication.
    seed: list of floats (V,) or of lists (V, k)."""
    if seed and isinstance(seed[0], list):
        cols = [reference_max_times_potential(src, dst, [row[j] for row in seed], factor) for j in range(len(seed[0]))]
        return [list(r) for r in zip(*cols)]
    into = [[] for _ in range(len(seed))]
    for s, d in zip(src, dst):
        into[d].append(s)
    phi = list(seed)
    work = deque(range(len(seed)))
    queued = [True] * len(seed)
    while work:
        d = work.popleft()
        queued[d] = False
        cand = phi[d] * factor
        for s in into[d]:
            if cand > phi[s]:
                phi[s] = cand
                if not queued[s]:
                    queued[s] = True
                    work.append(s)
    return phi


def _random_graph(v, e, rng, n_targets):
    src = [rng.randrange(v) for _ in range(e)]
    dst = [rng.randrange(v) for _ in range(e)]
    target = [False] * v
    for i in rng.sample(range(v), min(n_targets, v)):
        target[i] = True
    return src, dst, target


def _chain(v, backward):
    """0 -> 1 -> ... -> v-1 with target v-1: the longest possible shortest paths, so
    the relaxation needs about v sweeps. Edges listed from the source (forward) or
    from the target (backward); a self-loop at each end changes nothing."""
    src, dst = list(range(v - 1)), list(range(1, v))
    if backward:
        src, dst = src[::-1], dst[::-1]
    src += [0, v - 1]
    dst += [0, v - 1]
    return src, dst, [i == v - 1 for i in range(v)]


GRAPHS = {
    "one_node_no_edge": lambda rng: ([], [], [True]),
    "self_loops_only": lambda rng: ([0, 1, 2], [0, 1, 2], [False, True, False]),
    "no_target": lambda rng: _random_graph(50, 200, rng, 0),
    "all_targets": lambda rng: _random_graph(20, 60, rng, 20),
    "random_sparse": lambda rng: _random_graph(400, 500, rng, 3),
    "random_block_plus_one": lambda rng: _random_graph(300, BLOCK + 1, rng, 2),
    "random_dense": lambda rng: _random_graph(200, 3000, rng, 1),
    "random_edge_block_plus_one": lambda rng: _random_graph(1000, 4097, rng, 5),
    "chain_forward": lambda rng: _chain(150, backward=False),
    "chain_backward": lambda rng: _chain(150, backward=True),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_hop_distance(name, device):
    src, dst, target = GRAPHS[name](random.Random(len(name)))
    want = reference_hop_distance(src, dst, target)
    s, d, t = i64(src, device), i64(dst, device), torch.tensor(target, dtype=torch.bool, device=device)
    got = hop_distance(s, d, t, backend="triton")
    assert got.dtype == torch.int64 and to_cpu(got).tolist() == want
    assert hop_distance_torch(s.cpu(), d.cpu(), t.cpu()).tolist() == want


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("factor", [0.9, 1.0, 0.0])
def test_max_times_potential(name, factor, device):
    rng = random.Random(len(name) + 7)
    src, dst, target = GRAPHS[name](rng)
    v = len(target)
    seed = [rng.random() if (t or rng.random() < 0.05) else 0.0 for t in target]
    want = reference_max_times_potential(src, dst, seed, factor)
    s, d = i64(src, device), i64(dst, device)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    got = max_times_potential(s, d, x, factor, backend="triton")
    assert got.shape == (v,) and to_cpu(got).tolist() == want  # bit-exact
    assert max_times_potential_torch(s.cpu(), d.cpu(), x.cpu(), factor).tolist() == want
    assert torch.equal(x, torch.tensor(seed, dtype=torch.float64, device=device)), "seed was modified"


def test_max_times_potential_two_columns_and_float32(device):
    rng = random.Random(3)
    src, dst, target = _random_graph(300, BLOCK + 5, rng, 4)
    seed = [[rng.random() if rng.random() < 0.1 else 0.0, 1.0 if t else 0.0] for t in target]
    want = reference_max_times_potential(src, dst, seed, 0.7)
    s, d = i64(src, device), i64(dst, device)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    got = max_times_potential(s, d, x, 0.7, backend="triton")
    assert got.shape == (300, 2) and to_cpu(got).tolist() == want
    x32 = x.float()
    got32 = max_times_potential(s, d, x32, 0.7, backend="triton")
    assert got32.dtype == torch.float32
    assert torch.equal(to_cpu(got32), max_times_potential_torch(s.cpu(), d.cpu(), x32.cpu(), 0.7))


def _components(rng, sizes):
    """Disjoint random graphs laid one after another: (src, dst, target, edge_offsets).
    sizes: (nodes, edges) per component; (0, 0) is an empty component."""
    src, dst, target, off = [], [], [], [0]
    for v, e in sizes:
        base = len(target)
        if v:
            s, d, t = _random_graph(v, e, rng, max(1, v // 50))
            if rng.random() < 0.5:  # a long chain through it: many sweeps
                s, d = s + list(range(v - 1)), d + list(range(1, v))
            src += [base + x for x in s]
            dst += [base + x for x in d]
            target += t
        off.append(len(src))
    return src, dst, target, off


COMPONENTS = {
    "one": [(50, 80)],
    "many_small_and_empty": [(30, 40), (0, 0), (1, 1), (25, 60), (0, 0), (40, 39)],
    "larger_than_a_program_block": [(300, 1500), (200, 300), (5, 5)],
    "first_and_last_empty": [(0, 0), (60, 90), (0, 0)],
}


@pytest.mark.parametrize("name", list(COMPONENTS))
def test_graph_ops_with_edge_offsets(name, device):
    """One program per component gives the same result as one for all edges, bit for bit."""
    rng = random.Random(len(name))
    src, dst, target, off = _components(rng, COMPONENTS[name])
    pad = 7  # padding slots, as the credit pipeline has: self-loops on node 0, in the last component
    src, dst = src + [0] * pad, dst + [0] * pad
    off[-1] += pad
    s, d, o = i64(src, device), i64(dst, device), i64(off, device)
    t = torch.tensor(target, dtype=torch.bool, device=device)
    want = reference_hop_distance(src, dst, target)
    assert to_cpu(hop_distance(s, d, t, o, backend="triton")).tolist() == want
    assert hop_distance_torch(s.cpu(), d.cpu(), t.cpu(), o.cpu()).tolist() == want
    seed = [[rng.random() if (x or rng.random() < 0.05) else 0.0, float(x)] for x in target]
    want2 = reference_max_times_potential(src, dst, seed, 0.9)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    assert to_cpu(max_times_potential(s, d, x, 0.9, o, backend="triton")).tolist() == want2
    assert max_times_potential_torch(s.cpu(), d.cpu(), x.cpu(), 0.9, o.cpu()).tolist() == want2
    x1 = x[:, 0].contiguous()
    assert to_cpu(max_times_potential(s, d, x1, 0.9, o, backend="triton")).tolist() == [r[0] for r in want2]


@pytest.mark.parametrize("layout", ["edges_only_in_the_last", "one_edge_in_every_other", "empty_between"])
def test_more_components_than_edges(layout, device):
    """Issue 52's class of bug: the component check took the edge count as "no component", so a node of
    component index >= E read as shared. Task groups without edges (one-step groups, groups whose rows are all
    padding) give more components than edges: every op that takes edge_offsets, every backend, against
    plain Python."""
    from milegpo_kernels import connected_labels
    from milegpo_kernels.similarity import connected_labels_torch

    from .test_similarity import reference_connected_labels

    sizes = {"edges_only_in_the_last": [(1, 0)] * 6 + [(3, 2)],
             "one_edge_in_every_other": [(2, 1), (1, 0)] * 4,
             "empty_between": [(0, 0), (0, 0), (0, 0), (2, 1), (0, 0), (0, 0), (2, 1)]}[layout]
    src, dst, target, off = [], [], [], [0]
    for nodes, edges in sizes:  # a chain base -> base + 1 -> ...; its last node the target
        base = len(target)
        src += [base + i for i in range(edges)]
        dst += [base + i + 1 for i in range(edges)]
        target += [i == nodes - 1 for i in range(nodes)]
        off.append(len(src))
    assert len(off) - 1 > len(src)
    s, d, o = i64(src, device), i64(dst, device), i64(off, device)
    t = torch.tensor(target, dtype=torch.bool, device=device)
    want = reference_hop_distance(src, dst, target)
    assert to_cpu(hop_distance(s, d, t, o, backend="triton")).tolist() == want
    assert hop_distance_torch(s.cpu(), d.cpu(), t.cpu(), o.cpu()).tolist() == want
    seed = [float(x) for x in target]
    want_phi = reference_max_times_potential(src, dst, seed, 0.5)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    assert to_cpu(max_times_potential(s, d, x, 0.5, o, backend="triton")).tolist() == want_phi
    assert max_times_potential_torch(s.cpu(), d.cpu(), x.cpu(), 0.5, o.cpu()).tolist() == want_phi
    want_labels = reference_connected_labels(src, dst, len(target))
    assert to_cpu(connected_labels(s, d, len(target), o, backend="triton")).tolist() == want_labels
    assert connected_labels_torch(s.cpu(), d.cpu(), len(target), o.cpu()).tolist() == want_labels


def test_edge_offsets_errors(device):
    s, d = i64([0, 1, 2, 3], device), i64([1, 0, 3, 2], device)
    t = torch.tensor([True, False, False, True], device=device)
    with pytest.raises(ValueError, match="edge_offsets must be .S . 1,. int64"):
        hop_distance(s, d, t, i64([4], device), backend="triton")
    with pytest.raises(ValueError, match="edge_offsets must be .S . 1,. int64"):
        hop_distance(s, d, t, torch.tensor([0.0, 4.0], device=device), backend="torch")
    bad = {"start at 0 and end at the edge count 4": [0, 3], "non-decreasing": [0, 3, 2, 4],
           "node 0 is an endpoint of edges in components 0 and 1": [0, 1, 4]}
    for message, off in bad.items():
        with pytest.raises(ValueError, match=message):
            hop_distance(s.cpu(), d.cpu(), t.cpu(), i64(off, "cpu"), backend="torch")
        with pytest.raises(ValueError, match=message):
            max_times_potential(s.cpu(), d.cpu(), t.cpu().double(), 0.5, i64(off, "cpu"), backend="torch")
    ok = i64([0, 2, 2, 4], "cpu")  # components {0, 1} and {2, 3}, an empty one between
    assert hop_distance(s.cpu(), d.cpu(), t.cpu(), ok, backend="torch").tolist() == [0, 1, 1, 0]


def test_graph_errors(device):
    s = i64([0], device)
    with pytest.raises(ValueError, match="factor"):
        max_times_potential(s, s, torch.zeros(1, dtype=torch.float64, device=device), 1.5, backend="triton")
    with pytest.raises(TypeError, match="target"):
        hop_distance(s, s, torch.zeros(1, device=device), backend="triton")
