"""similar_state_keys, shingle_overlap, connected_labels (milegpo_kernels.similarity): the Triton kernels vs
their torch twins vs plain Python (tests/kernels/helpers.py says how)."""

from __future__ import annotations

import random

import pytest
import torch

try:  # a dev extra; the benchmarks import this module's references without it
    from hypothesis import example, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    st = None

from milegpo_kernels import connected_labels, shingle_overlap, similar_state_keys
from milegpo_kernels.similarity import connected_labels_torch, shingle_overlap_torch, similar_state_keys_torch

from ..properties import examples
from .helpers import I64_MIN, SINK, i64, random_keys, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")


# plain-Python references (the benchmarks import them)


def reference_connected_labels(src: list[int], dst: list[int], num_nodes: int) -> list[int]:
    """Union-find; every node's label is the smallest node of its component."""
    parent = list(range(num_nodes))

    def root(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for s, d in zip(src, dst):
        rs, rd = root(s), root(d)
        if rs != rd:
            parent[max(rs, rd)] = min(rs, rd)
    return [root(v) for v in range(num_nodes)]


def reference_shingle_overlap(a: list[int], b: list[int], sets: list[list[int]]) -> list[int]:
    return [len(set(sets[i]) & set(sets[j])) for i, j in zip(a, b)]


def reference_similar_state_keys(group: list[int], key: list[int], sketch: list[int], bands: list[list[int]],
                          threshold: float | None = None, sets: list[list[int]] | None = None) -> list[int]:
    """The op's definition: nodes are the distinct (group, key) with a sketch; two nodes are candidates when a
    band (same index) agrees; with a threshold a candidate is kept when |A & B| / |A | B| >= threshold (two
    empty sets: kept); components of the kept pairs; the component's smallest key; rows without a sketch
    keep their key."""
    nodes = sorted({(g, k, s) for g, k, s in zip(group, key, sketch) if s >= 0})
    index = {(g, k): i for i, (g, k, _) in enumerate(nodes)}
    src, dst = [], []
    for i, (g, k, s) in enumerate(nodes):
        for j in range(i):
            g2, k2, s2 = nodes[j]
            if g2 != g or not any(x == y for x, y in zip(bands[s], bands[s2])):
                continue
            if threshold is not None:
                inter = len(set(sets[s]) & set(sets[s2]))
                union = len(set(sets[s]) | set(sets[s2]))
                if union and inter / union < threshold:
                    continue
            src.append(i)
            dst.append(j)
    root = reference_connected_labels(src, dst, len(nodes))
    return [nodes[root[index[(g, k)]]][1] if s >= 0 else k for g, k, s in zip(group, key, sketch)]


# helpers


def csr(sets: list[list[int]], device):
    offsets = [0]
    for s in sets:
        offsets.append(offsets[-1] + len(s))
    return i64(offsets, device), i64([v for s in sets for v in sorted(s)], device)


def random_table(rng: random.Random, n_sets: int, n_bands: int, pool: int = 12, max_len: int = 9):
    """Sets over a small pool of values (heavy overlap), bands drawn from few values (many candidates)."""
    sets = [sorted(rng.sample(range(-pool // 2, pool - pool // 2), rng.randrange(0, max_len + 1)))
            for _ in range(n_sets)]
    sets = [[v * (1 << 50) for v in s] for s in sets]  # wide values: the search compares int64, not small ints
    bands = [[rng.randrange(3) for _ in range(n_bands)] for _ in range(n_sets)]
    return sets, bands


def run_all(group, key, sketch, bands, threshold, sets, device):
    """The op on Triton and its twin on CPU; both must equal plain Python."""
    want = reference_similar_state_keys(group, key, sketch, bands, threshold, sets)
    off, val = csr(sets, device)
    args = (i64(group, device), i64(key, device), i64(sketch, device), i64(bands, device).reshape(len(bands), -1))
    got = similar_state_keys(*args, threshold, off, val, backend="triton")
    assert got.dtype == torch.int64 and got.device.type == torch.device(device).type
    assert to_cpu(got).tolist() == want
    twin = similar_state_keys_torch(*(t.cpu() for t in args), threshold, off.cpu(), val.cpu())
    assert twin.tolist() == want
    return want


# connected_labels


@pytest.mark.parametrize("n_nodes, n_edges, n_comp", [(0, 0, 1), (1, 0, 1), (5, 3, 1), (300, 200, 1), (300, 250, 7),
                                                      (2100, 1500, 3)])
def test_connected_labels_random(n_nodes, n_edges, n_comp, device):
    """Random edges inside components of consecutive nodes (the layout the pipeline passes), self-loops too."""
    rng = random.Random(n_nodes + n_edges)
    cuts = sorted(rng.sample(range(1, max(n_nodes, 2)), min(n_comp - 1, max(n_nodes - 1, 0))))
    bounds = [0] + cuts + [n_nodes]
    src, dst, offsets = [], [], [0]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        for _ in range(n_edges // n_comp if hi > lo else 0):
            src.append(rng.randrange(lo, hi))
            dst.append(rng.randrange(lo, hi) if rng.random() < 0.9 else src[-1])
        offsets.append(len(src))
    want = reference_connected_labels(src, dst, n_nodes)
    s, d, off = i64(src, device), i64(dst, device), i64(offsets, device)
    for edge_offsets in (None, off):
        got = connected_labels(s, d, n_nodes, edge_offsets, backend="triton")
        assert to_cpu(got).tolist() == want
        twin = connected_labels_torch(s.cpu(), d.cpu(), n_nodes, None if edge_offsets is None else off.cpu())
        assert twin.tolist() == want


@pytest.mark.parametrize("n", [2, 64, 1500])
def test_connected_labels_long_chains(n, device):
    """A path n-1 -> ... -> 0 listed from its far end, and one from its near end: the worst case of plain
    propagation (one hop a round); hooking labels' own nodes shortens it."""
    chain_down = [(i, i - 1) for i in range(n - 1, 0, -1)]
    chain_up = [(n + i, n + i + 1) for i in range(n - 1)]
    src = [s for s, _ in chain_down + chain_up]
    dst = [d for _, d in chain_down + chain_up]
    want = [0] * n + [n] * n
    got = connected_labels(i64(src, device), i64(dst, device), 2 * n, backend="triton")
    assert to_cpu(got).tolist() == want == reference_connected_labels(src, dst, 2 * n)
    assert connected_labels_torch(i64(src, "cpu"), i64(dst, "cpu"), 2 * n).tolist() == want


def test_connected_labels_errors(device):
    e = i64([0, 1], device)
    with pytest.raises(TypeError, match="src and dst must be int64"):
        connected_labels(e.int(), e, 3, backend="triton")
    with pytest.raises(ValueError, match="must not share nodes"):
        connected_labels_torch(i64([0, 1], "cpu"), i64([1, 2], "cpu"), 3, i64([0, 1, 2], "cpu"))


# shingle_overlap


@pytest.mark.parametrize("n_pairs", [0, 1, 17, 300])
def test_shingle_overlap_random(n_pairs, device):
    rng = random.Random(n_pairs)
    sets = [sorted(rng.sample(range(-40, 40), rng.randrange(0, 30))) for _ in range(25)]
    sets.append(list(range(-200, 200, 3)))  # a long set: many tiles, deep searches
    sets.append([I64_MIN, -1, 0, SINK])  # extreme values
    a = [rng.randrange(len(sets)) for _ in range(n_pairs)]
    b = [rng.randrange(len(sets)) for _ in range(n_pairs)]
    want = reference_shingle_overlap(a, b, sets)
    off, val = csr(sets, device)
    got = shingle_overlap(i64(a, device), i64(b, device), off, val, backend="triton")
    assert to_cpu(got).tolist() == want
    got = shingle_overlap(i64(a, device), i64(b, device), off, val, max(len(s) for s in sets), backend="triton")
    assert to_cpu(got).tolist() == want
    assert shingle_overlap_torch(i64(a, "cpu"), i64(b, "cpu"), off.cpu(), val.cpu()).tolist() == want


def test_shingle_overlap_errors(device):
    off, val = csr([[1, 2], [2]], device)
    with pytest.raises(ValueError, match=r"b\[1\] = 2 is outside \[0, 2\)"):
        shingle_overlap(i64([0, 1], device), i64([1, 2], device), off, val, backend="triton")
    with pytest.raises(ValueError, match="from 0 to len"):
        shingle_overlap(i64([0], device), i64([1], device), off, val[:2], backend="triton")
    with pytest.raises(TypeError, match="a must be a 1-d int64"):
        shingle_overlap(i64([0], device).int(), i64([1], device), off, val, backend="torch")


# similar_state_keys


@pytest.mark.parametrize("n_rows, n_groups, threshold", [
    (0, 1, None), (0, 1, 0.5), (1, 1, None), (1, 1, 0.5), (9, 2, None), (9, 2, 0.3), (9, 2, 1.0),
    (150, 3, None), (150, 3, 0.3), (150, 3, 0.6), (150, 3, 1.0), (400, 5, None), (400, 5, 0.6)])
def test_similar_state_keys_random(n_rows, n_groups, threshold, device):
    """Repeated (group, key) rows, keys of several groups sharing sketches, rows without a sketch."""
    rng = random.Random(n_rows * 7 + n_groups + int(10 * (threshold or 0)))
    sets, bands = random_table(rng, 30, 3)
    keys = random_keys(40, "wide", rng)
    sketch_of = {k: rng.randrange(len(sets)) for k in keys}
    key = [rng.choice(keys) for _ in range(n_rows)]
    group = [rng.randrange(n_groups) for _ in range(n_rows)]
    sketch = [sketch_of[k] if rng.random() < 0.9 else -1 for k in key]
    sketch = [s if s >= 0 or all(k2 != k or s2 < 0 for k2, s2 in zip(key, sketch)) else sketch_of[k]
              for k, s in zip(key, sketch)]  # a key has a sketch on all its rows or on none
    run_all(group, key, sketch, bands, threshold, sets, device)


@pytest.mark.parametrize("kind", ["adversarial", "small"])
def test_similar_state_keys_adversarial_keys(kind, device):
    """The sink, int64 min, -1 and 0 as keys; every band agreeing (one bucket per band); identical sets."""
    rng = random.Random(3)
    key = random_keys(120, kind, rng)
    group = [rng.randrange(2) for _ in key]
    distinct = sorted(set(key) - {SINK})
    sketch_of = {k: i for i, k in enumerate(distinct)}
    sketch = [-1 if k == SINK else sketch_of[k] for k in key]
    sets = [[1, 2, 3]] * len(distinct)
    for bands in ([[7, 7]] * len(distinct), [[i, -i] for i in range(len(distinct))]):
        for threshold in (None, 1.0):
            merged = run_all(group, key, sketch, bands, threshold, sets, device)
            assert all((m == SINK) == (k == SINK) for m, k in zip(merged, key))  # the sink never merges


def test_similar_state_keys_chains_and_star(device):
    """A~B~C with A !~ C (verified): one component; a star D~E, D~F with E !~ F: one component."""
    # A={1,2,3,4}, B={2,3,4,5}, C={3,4,5,6}: J(A,B) = J(B,C) = 3/5, J(A,C) = 2/6
    # D={10,11,12}, E={10,11}, F={11,12}: J(D,E) = J(D,F) = 2/3, J(E,F) = 1/3
    sets = [[1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6], [10, 11, 12], [10, 11], [11, 12]]
    bands = [[0]] * len(sets)  # one bucket: every pair is a candidate
    key = [30, 20, 10, 5, 6, 7]
    group = [0] * 6
    assert run_all(group, key, list(range(6)), bands, 0.5, sets, device) == [10, 10, 10, 5, 5, 5]
    assert run_all(group, key, list(range(6)), bands, 0.7, sets, device) == key
    assert run_all(group, key, list(range(6)), bands, None, sets, device) == [5] * 6


def test_similar_state_keys_groups_never_mix(device):
    """The same keys and sketches in two groups: each group merges only its own rows."""
    sets = [[1, 2], [1, 2], [9]]
    bands = [[4], [4], [5]]
    key = [3, 1, 2, 3, 2]
    group = [0, 0, 0, 1, 1]
    assert run_all(group, key, [0, 1, 2, 0, 2], bands, 0.9, sets, device) == [1, 1, 2, 3, 2]


@pytest.mark.parametrize("threshold", [None, 0.25, 1.0])
def test_similar_state_keys_key_in_several_groups(threshold, device):
    """Issue 52: one key in three task groups (a task played by several groups, a shared first observation) is
    one node per group, so there are more components than verified pairs; hypothesis's falsifying example."""
    rng = random.Random(0)
    sets, bands = random_table(rng, 8, 2, pool=6, max_len=5)
    group, key = [0, 1, 2, 2], [-3, -3, -3, -2]
    merged = run_all(group, key, [0, 0, 0, 1], bands, threshold, sets, device)  # every backend == plain Python
    assert merged[:3] == [-3, -3, -3]  # the shared key never leaves its groups' nodes


def test_similar_state_keys_errors(device):
    g, k = i64([0, 0], device), i64([1, 2], device)
    bands = i64([[1], [2]], device)
    with pytest.raises(ValueError, match="needs shingle_offsets and shingles"):
        similar_state_keys(g, k, i64([0, 1], device), bands, 0.5, backend="triton")
    with pytest.raises(ValueError, match=r"sketch\[1\] = 2 is not a row of bands"):
        similar_state_keys(g, k, i64([0, 2], device), bands, backend="triton")
    with pytest.raises(ValueError, match="threshold must be in"):
        off, val = csr([[1], [2]], device)
        similar_state_keys(g, k, i64([0, 1], device), bands, 0.0, off, val, backend="triton")
    with pytest.raises(TypeError, match="bands must be a 2-d int64"):
        similar_state_keys(g, k, i64([0, 1], device), i64([1, 2], device), backend="triton")


if st is not None:
    @example(rows=[(0, 0), (1, 0), (2, 0), (2, 1)], threshold=0.25, seed=0)  # issue 52: a key in 3 groups
    @settings(max_examples=examples(25))
    @given(rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7)), max_size=40),
           threshold=st.sampled_from([None, 0.25, 0.5, 0.8, 1.0]), seed=st.integers(0, 1000))
    def test_similar_state_keys_property(rows, threshold, seed, device):
        """Any rows over 8 keys with their sketches: the plain-Python definition."""
        rng = random.Random(seed)
        sets, bands = random_table(rng, 8, 2, pool=6, max_len=5)
        group = [g for g, _ in rows]
        key = [k - 3 for _, k in rows]
        run_all(group, key, [k + 3 for k in key], bands, threshold, sets, device)
