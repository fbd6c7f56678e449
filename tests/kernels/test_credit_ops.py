"""Credit-assignment ops: Triton kernels vs their torch twins vs plain Python.

Every op runs on random and adversarial inputs (empty, one row, lengths around the
kernels' block of 1024, forced hash collisions, the success-sink key, negative
keys) through three implementations:

- ``py_*``: plain Python, written from the op's definition (the ground truth; the
  benchmarks import these same functions);
- the torch twin (the CPU path);
- the Triton kernels (``backend="triton"``: compiled on CUDA, under Triton's
  interpreter on CPU), with ``torch.empty`` returning NaN / garbage so an output
  element the kernel forgets to write fails the test.

Integer results must match exactly; float results to 1e-12 relative (atomics sum in
any order), and a torch-twin zero (an all-equal segment) must be an exact zero.
"""

from __future__ import annotations

import math
import os
import random
from collections import deque

import pytest
import torch

try:  # a dev extra; the benchmarks import this module's references without it
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    st = None

from milegpo_kernels import (
    INF,
    count_distinct,
    dense_ids,
    hop_distance,
    max_normalize,
    max_times_potential,
    segment_max,
    segment_normalize,
    sibling_mean,
)
from milegpo_kernels.counting import count_distinct_torch
from milegpo_kernels.graph import hop_distance_torch, max_times_potential_torch
from milegpo_kernels.grouping import dense_ids_torch
from milegpo_kernels.segment import (
    EQUAL_TOL,
    max_normalize_torch,
    segment_max_torch,
    segment_normalize_torch,
    sibling_mean_torch,
)

SINK = (1 << 63) - 1
I64_MIN = -(1 << 63)
BLOCK = 1024  # the row kernels; the graph kernels sweep edges in blocks of 4096
RTOL = 1e-12

pytestmark = pytest.mark.usefixtures("garbage_empty")


# ---------------------------------------------------------------------------
# plain-Python references (the benchmarks import these)
# ---------------------------------------------------------------------------


def py_dense_ids(*cols: list[int]) -> tuple[list[int], int, list[bool]]:
    """Ids numbered in order of first occurrence; is_first at each tuple's first row."""
    seen: dict[tuple[int, ...], int] = {}
    ids, first = [], []
    for row in zip(*cols):
        new = row not in seen
        if new:
            seen[row] = len(seen)
        ids.append(seen[row])
        first.append(new)
    return ids, len(seen), first


def py_count_distinct(seg, member, positive, num_segments):
    """(distinct, distinct_pos, total) per segment; positive read at the pair's first row."""
    distinct = [0] * num_segments
    distinct_pos = [0] * num_segments
    total = [0] * num_segments
    seen = set()
    for s, m, p in zip(seg, member, positive):
        total[s] += 1
        if (s, m) not in seen:
            seen.add((s, m))
            distinct[s] += 1
            distinct_pos[s] += int(p)
    return distinct, distinct_pos, total


def py_hop_distance(src, dst, target):
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


def py_max_times_potential(src, dst, seed, factor):
    """phi(s) = max(seed(s), max over edges s -> d of phi(d) * factor), by worklist
    relaxation to the fixed point; the power is formed by repeated multiplication.
    seed: list of floats (V,) or of lists (V, k)."""
    if seed and isinstance(seed[0], list):
        cols = [py_max_times_potential(src, dst, [row[j] for row in seed], factor) for j in range(len(seed[0]))]
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


def _segments(seg, num_segments, valid=None):
    members = [[] for _ in range(num_segments)]
    for i, s in enumerate(seg):
        if valid is None or valid[i]:
            members[s].append(i)
    return members


def py_segment_normalize(x, seg, num_segments, mode="mean_std", eps=1e-6, singleton="zero"):
    members = _segments(seg, num_segments)
    out = [0.0] * len(x)
    for rows in members:
        vals = [x[i] for i in rows]
        n = len(vals)
        if n == 0:
            continue
        if n == 1:
            i = rows[0]
            out[i] = 0.0 if singleton == "zero" else (x[i] / (1.0 + eps) if mode == "mean_std" else x[i])
            continue
        mx, mn = max(vals), min(vals)
        if mx - mn <= EQUAL_TOL * max(abs(mx), abs(mn), 1.0):
            continue
        mean = sum(vals) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
        for i in rows:
            out[i] = (x[i] - mean) / (std + eps) if mode == "mean_std" else x[i] - mean
    return out


def py_sibling_mean(x, seg, num_segments, valid=None):
    members = _segments(seg, num_segments, valid)
    mean, n = [0.0] * len(x), [0] * len(x)
    for rows in members:
        total = sum(x[i] for i in rows)
        for i in rows:
            if len(rows) > 1:
                mean[i] = (total - x[i]) / (len(rows) - 1)
    for i, s in enumerate(seg):
        n[i] = len(members[s])
    return mean, n


def py_segment_max(x, seg, num_segments, valid=None, fill=0.0):
    return [max((x[i] for i in rows), default=fill) for rows in _segments(seg, num_segments, valid)]


def py_max_normalize(x, seg, num_segments, valid=None):
    members = _segments(seg, num_segments, valid)
    out = [0.0] * len(x)
    for rows in members:
        mx = max((x[i] for i in rows), default=0.0)
        for i in rows:
            out[i] = x[i] / mx if mx > 0 else 0.0
    return out


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _i64(vals, device):
    return torch.tensor(vals, dtype=torch.int64, device=device)


def _cpu(t):
    return t.detach().cpu() if isinstance(t, torch.Tensor) else torch.as_tensor(t)


def _close(got, want, rtol=RTOL, exact_zeros=None):
    """Elementwise |got - want| <= rtol * max(|want|, 1); zeros of want are exact, or, given
    ``exact_zeros`` (a bool per element), those where it is True: the zeros an op makes by
    design. A zero the reference reaches by chance (x equal to its segment's mean in the
    reference's order of summation) is a few ulps off where float atomics sum in another order,
    as on a GPU (and under the interpreter's shuffled lane order: tests/conftest.py)."""
    got = _cpu(got).to(torch.float64)
    want = torch.as_tensor(want, dtype=torch.float64).reshape(got.shape)
    assert not torch.isnan(got).any(), "NaN in the output: an element was not written"
    err = (got - want).abs() / want.abs().clamp(min=1.0)
    assert err.max().item() <= rtol if err.numel() else True, f"max rel err {err.max().item():.3e}"
    zero = want == 0
    if exact_zeros is not None:
        zero &= torch.as_tensor(exact_zeros, dtype=torch.bool).reshape(got.shape)
    assert torch.equal(got[zero], want[zero]), "an exact zero of the reference is not exactly 0"


def py_flat_segments(x, seg, num_segments) -> list[bool]:
    """Per element: its segment has one element or all-equal values (to EQUAL_TOL), so that
    segment_normalize gives it exactly 0 by design."""
    flat = [True] * len(x)
    for rows in _segments(seg, num_segments):
        vals = [x[i] for i in rows]
        if len(vals) > 1:
            mx, mn = max(vals), min(vals)
            if mx - mn > EQUAL_TOL * max(abs(mx), abs(mn), 1.0):
                for i in rows:
                    flat[i] = False
    return flat


def _same_partition(ids_a, ids_b):
    """The two id arrays induce the same partition of the rows (a bijection)."""
    a, b = _cpu(ids_a).tolist(), _cpu(ids_b).tolist()
    fwd, bwd = {}, {}
    for x, y in zip(a, b):
        assert fwd.setdefault(x, y) == y and bwd.setdefault(y, x) == x
    return True


def _check_dense(res, py, device):
    ids, count, first = res
    py_ids, py_count, py_first = py
    assert ids.device.type == torch.device(device).type and count.dim() == 0
    assert count.device == ids.device, "count must stay a 0-d tensor on the input's device"
    assert int(count) == py_count
    assert ids.dtype == torch.int64 and first.dtype == torch.bool
    if py_count:
        assert 0 <= int(ids.min()) and int(ids.max()) == py_count - 1
    assert _same_partition(ids, py_ids)
    assert _cpu(first).tolist() == py_first
    assert int(first.sum()) == py_count


def _keys(n, kind, rng):
    if kind == "small":
        return [rng.randrange(-5, 6) for _ in range(n)]
    if kind == "wide":
        return [rng.randrange(I64_MIN, SINK + 1) for _ in range(n)]
    if kind == "adversarial":  # sink, int64 min, -1 (the table's empty mark), 0, negatives
        pool = [SINK, I64_MIN, -1, 0, 1, -2, SINK - 1, I64_MIN + 1, -(1 << 40)]
        return [rng.choice(pool) for _ in range(n)]
    raise ValueError(kind)


# ---------------------------------------------------------------------------
# grouping
# ---------------------------------------------------------------------------

SIZES = [0, 1, 7, BLOCK - 1, BLOCK + 1, 2500]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["small", "wide", "adversarial"])
def test_dense_ids_nodes(n, kind, device):
    rng = random.Random(n * 31 + len(kind))
    group = [rng.randrange(4) for _ in range(n)]
    key = _keys(n, kind, rng)
    py = py_dense_ids(group, key)
    g, k = _i64(group, device), _i64(key, device)
    res = dense_ids(g, k, backend="triton")
    _check_dense(res, py, device)
    twin = dense_ids_torch(g.cpu(), k.cpu())
    _check_dense(twin, py, "cpu")
    assert torch.equal(_cpu(res.is_first), twin.is_first)  # both mark the first occurrence
    # triton ids are numbered in order of first occurrence, run to run the same
    assert torch.equal(_cpu(res.ids), torch.tensor(py[0], dtype=torch.int64))


@pytest.mark.parametrize("n,table_size", [(1, 1), (9, 9), (300, 300), (BLOCK + 76, BLOCK + 200)])
def test_dense_ids_forced_collisions(n, table_size, device):
    """A (nearly) full table: distinct keys collide and probe far, across programs."""
    rng = random.Random(n)
    key = [rng.randrange(I64_MIN, SINK + 1) for _ in range(n)]  # all distinct (a.s.)
    key[0] = SINK
    if n > 2:
        key[1] = -1
        key[-1] = SINK  # one duplicate: the count is n - 1 or so
    group = [0] * n
    py = py_dense_ids(group, key)
    res = dense_ids(_i64(group, device), _i64(key, device), backend="triton", table_size=table_size)
    _check_dense(res, py, device)


def test_dense_ids_collisions_many_duplicates(device):
    """A table barely bigger than the rows, few distinct tuples, long duplicate runs."""
    rng = random.Random(5)
    n = 2000
    group = [rng.randrange(3) for _ in range(n)]
    key = [rng.choice([SINK, -1, 7, I64_MIN]) for _ in range(n)]
    res = dense_ids(_i64(group, device), _i64(key, device), backend="triton", table_size=n + 1)
    _check_dense(res, py_dense_ids(group, key), device)


@pytest.mark.parametrize("sem", ["relaxed", "acq_rel"])
@pytest.mark.parametrize("peek", [False, True])
def test_dense_ids_insert_variants(sem, peek, device):
    """The insert kernel's tuning knobs change no id: hot duplicate runs, a full table."""
    rng = random.Random(11)
    n = BLOCK + 300
    group = [rng.randrange(3) for _ in range(n)]
    key = [rng.choice([SINK, -1, 7, I64_MIN]) if rng.random() < 0.7 else rng.randrange(-50, 50) for _ in range(n)]
    py = py_dense_ids(group, key)
    for table_size, insert_block in ((None, BLOCK), (n, BLOCK), (8 * n, 256), (n, 256)):
        res = dense_ids(_i64(group, device), _i64(key, device), backend="triton", table_size=table_size, sem=sem,
                        peek=peek, insert_block=insert_block)
        _check_dense(res, py, device)
        assert torch.equal(_cpu(res.ids), torch.tensor(py[0], dtype=torch.int64))


if st is not None:
    _KEY_POOL = st.sampled_from([SINK, I64_MIN, -1, 0, 1, -2, SINK - 1, 42])

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(rows=st.lists(st.tuples(st.integers(0, 3), _KEY_POOL | st.integers(I64_MIN, SINK)), max_size=60),
           slack=st.integers(0, 3))
    def test_dense_ids_property(rows, slack, device):
        """Any rows, a table of n + slack slots (mostly full): the partition of plain Python."""
        group = [g for g, _ in rows]
        key = [k for _, k in rows]
        res = dense_ids(_i64(group, device), _i64(key, device), backend="triton", table_size=max(len(rows), 1) + slack)
        _check_dense(res, py_dense_ids(group, key), device)


@pytest.mark.parametrize("n", [0, 1, 2049])
def test_dense_ids_edges_three_columns(n, device):
    rng = random.Random(n + 3)
    group = [rng.randrange(5) for _ in range(n)]
    state = [rng.choice([SINK, -3, 4, 5, -1]) for _ in range(n)]
    nxt = [rng.choice([SINK, -3, 4, 5]) for _ in range(n)]
    py = py_dense_ids(group, state, nxt)
    cols = [_i64(c, device) for c in (group, state, nxt)]
    _check_dense(dense_ids(*cols, backend="triton"), py, device)
    _check_dense(dense_ids_torch(*[c.cpu() for c in cols]), py, "cpu")


@pytest.mark.parametrize("n", [1, 300, BLOCK + 1])
def test_dense_ids_five_columns(n, device):
    # the kernel reads three columns; more are numbered two at a time first
    rng = random.Random(n + 5)
    cols = [[rng.choice([SINK, -1, 0, 2, I64_MIN]) for _ in range(n)] for _ in range(5)]
    py = py_dense_ids(*cols)
    tensors = [_i64(c, device) for c in cols]
    _check_dense(dense_ids(*tensors, backend="triton"), py, device)
    _check_dense(dense_ids(*tensors, backend="triton", table_size=n + 1), py, device)
    _check_dense(dense_ids_torch(*[c.cpu() for c in tensors]), py, "cpu")


def test_dense_ids_one_column_and_errors(device):
    key = [SINK, 3, SINK, -1, 3]
    _check_dense(dense_ids(_i64(key, device), backend="triton"), py_dense_ids(key), device)
    with pytest.raises(ValueError, match="table_size"):
        dense_ids(_i64(key, device), backend="triton", table_size=2)
    with pytest.raises(TypeError, match="column 1 must be int64"):
        dense_ids(_i64(key, device), _i64(key, device).int(), backend="triton")


def test_dense_ids_1e5_rows(device):
    """1e5 (group, key) rows: 16 groups of wide keys, many repeats."""
    n = 100_000
    gen = torch.Generator().manual_seed(0)
    group = torch.randint(0, 16, (n,), generator=gen)
    pool = torch.randint(I64_MIN, SINK, (5000,), generator=gen)
    pool[0] = SINK
    key = pool[torch.randint(0, 5000, (n,), generator=gen)]
    res = dense_ids(group.to(device), key.to(device), backend="triton")
    _check_dense(res, py_dense_ids(group.tolist(), key.tolist()), device)


# ---------------------------------------------------------------------------
# counting
# ---------------------------------------------------------------------------


def _incidences(n, num_segments, n_members, rng, member_keys="small"):
    seg = [rng.randrange(num_segments) for _ in range(n)]
    members = list(range(n_members)) if member_keys == "small" else _keys(n_members, "adversarial", rng)
    member = [rng.choice(members) for _ in range(n)]
    won = {m: rng.random() < 0.4 for m in members}
    positive = [won[m] for m in member]
    return seg, member, positive


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("member_keys", ["small", "adversarial"])
def test_count_distinct(n, member_keys, device):
    rng = random.Random(n + 11)
    num_segments = max(1, n // 5) + 3  # some segments stay empty
    seg, member, positive = _incidences(n, num_segments, 40, rng, member_keys)
    want = py_count_distinct(seg, member, positive, num_segments)
    args = (_i64(seg, device), _i64(member, device), torch.tensor(positive, dtype=torch.bool, device=device))
    got = count_distinct(*args, num_segments, backend="triton")
    twin = count_distinct_torch(*[a.cpu() for a in args], num_segments)
    for g, t, w in zip(got, twin, want):
        assert g.dtype == torch.int64 and g.shape == (num_segments,)
        assert _cpu(g).tolist() == w
        assert t.tolist() == w


def test_count_distinct_no_segments(device):
    e = torch.empty(0, dtype=torch.int64, device=device)
    got = count_distinct(e, e, e.bool(), 0, backend="triton")
    assert all(g.shape == (0,) for g in got)


# ---------------------------------------------------------------------------
# graph
# ---------------------------------------------------------------------------


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
    want = py_hop_distance(src, dst, target)
    s, d, t = _i64(src, device), _i64(dst, device), torch.tensor(target, dtype=torch.bool, device=device)
    got = hop_distance(s, d, t, backend="triton")
    assert got.dtype == torch.int64 and _cpu(got).tolist() == want
    assert hop_distance_torch(s.cpu(), d.cpu(), t.cpu()).tolist() == want


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("factor", [0.9, 1.0, 0.0])
def test_max_times_potential(name, factor, device):
    rng = random.Random(len(name) + 7)
    src, dst, target = GRAPHS[name](rng)
    v = len(target)
    seed = [rng.random() if (t or rng.random() < 0.05) else 0.0 for t in target]
    want = py_max_times_potential(src, dst, seed, factor)
    s, d = _i64(src, device), _i64(dst, device)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    got = max_times_potential(s, d, x, factor, backend="triton")
    assert got.shape == (v,) and _cpu(got).tolist() == want  # bit-exact
    assert max_times_potential_torch(s.cpu(), d.cpu(), x.cpu(), factor).tolist() == want
    assert torch.equal(x, torch.tensor(seed, dtype=torch.float64, device=device)), "seed was modified"


def test_max_times_potential_two_columns_and_float32(device):
    rng = random.Random(3)
    src, dst, target = _random_graph(300, BLOCK + 5, rng, 4)
    seed = [[rng.random() if rng.random() < 0.1 else 0.0, 1.0 if t else 0.0] for t in target]
    want = py_max_times_potential(src, dst, seed, 0.7)
    s, d = _i64(src, device), _i64(dst, device)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    got = max_times_potential(s, d, x, 0.7, backend="triton")
    assert got.shape == (300, 2) and _cpu(got).tolist() == want
    x32 = x.float()
    got32 = max_times_potential(s, d, x32, 0.7, backend="triton")
    assert got32.dtype == torch.float32
    assert torch.equal(_cpu(got32), max_times_potential_torch(s.cpu(), d.cpu(), x32.cpu(), 0.7))


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
    s, d, o = _i64(src, device), _i64(dst, device), _i64(off, device)
    t = torch.tensor(target, dtype=torch.bool, device=device)
    want = py_hop_distance(src, dst, target)
    assert _cpu(hop_distance(s, d, t, o, backend="triton")).tolist() == want
    assert hop_distance_torch(s.cpu(), d.cpu(), t.cpu(), o.cpu()).tolist() == want
    seed = [[rng.random() if (x or rng.random() < 0.05) else 0.0, float(x)] for x in target]
    want2 = py_max_times_potential(src, dst, seed, 0.9)
    x = torch.tensor(seed, dtype=torch.float64, device=device)
    assert _cpu(max_times_potential(s, d, x, 0.9, o, backend="triton")).tolist() == want2
    assert max_times_potential_torch(s.cpu(), d.cpu(), x.cpu(), 0.9, o.cpu()).tolist() == want2
    x1 = x[:, 0].contiguous()
    assert _cpu(max_times_potential(s, d, x1, 0.9, o, backend="triton")).tolist() == [r[0] for r in want2]


def test_edge_offsets_errors(device):
    s, d = _i64([0, 1, 2, 3], device), _i64([1, 0, 3, 2], device)
    t = torch.tensor([True, False, False, True], device=device)
    with pytest.raises(ValueError, match="edge_offsets must be .S . 1,. int64"):
        hop_distance(s, d, t, _i64([4], device), backend="triton")
    with pytest.raises(ValueError, match="edge_offsets must be .S . 1,. int64"):
        hop_distance(s, d, t, torch.tensor([0.0, 4.0], device=device), backend="torch")
    bad = {"start at 0 and end at the edge count 4": [0, 3], "non-decreasing": [0, 3, 2, 4],
           "node 0 is an endpoint of edges in components 0 and 1": [0, 1, 4]}
    for message, off in bad.items():
        with pytest.raises(ValueError, match=message):
            hop_distance(s.cpu(), d.cpu(), t.cpu(), _i64(off, "cpu"), backend="torch")
        with pytest.raises(ValueError, match=message):
            max_times_potential(s.cpu(), d.cpu(), t.cpu().double(), 0.5, _i64(off, "cpu"), backend="torch")
    ok = _i64([0, 2, 2, 4], "cpu")  # components {0, 1} and {2, 3}, an empty one between
    assert hop_distance(s.cpu(), d.cpu(), t.cpu(), ok, backend="torch").tolist() == [0, 1, 1, 0]


def test_graph_errors(device):
    s = _i64([0], device)
    with pytest.raises(ValueError, match="factor"):
        max_times_potential(s, s, torch.zeros(1, dtype=torch.float64, device=device), 1.5, backend="triton")
    with pytest.raises(TypeError, match="target"):
        hop_distance(s, s, torch.zeros(1, device=device), backend="triton")


# ---------------------------------------------------------------------------
# segment reductions
# ---------------------------------------------------------------------------


def _segment_data(n, rng, kind="random"):
    """Values with all-equal segments, near-equal ones, singletons and empty segments."""
    num_segments = max(1, n // 4) + 2
    seg = [rng.randrange(num_segments) for _ in range(n)]
    if kind == "random":
        x = [rng.gauss(0.0, 1.0) for _ in range(n)]
    elif kind == "offset":  # large offset, small spread: cancellation in the mean
        x = [1e6 + rng.gauss(0.0, 1e-3) for _ in range(n)]
    else:
        raise ValueError(kind)
    for i, s in enumerate(seg):
        if s % 5 == 0:
            x[i] = 3.25  # all equal -> exactly 0
        elif s % 5 == 1:
            x[i] = -2.0 * (1.0 + (0.4e-12 if i % 2 else 0.0))  # equal within the relative 1e-12
    return x, seg, num_segments


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("mode,singleton", [("mean_std", "zero"), ("mean_std", "unit"), ("mean", "zero"), ("mean", "unit")])
def test_segment_normalize(n, mode, singleton, device):
    x, seg, num_segments = _segment_data(n, random.Random(n + len(mode)))
    want = py_segment_normalize(x, seg, num_segments, mode, 1e-6, singleton)
    xt = torch.tensor(x, dtype=torch.float64, device=device)
    st = _i64(seg, device)
    got = segment_normalize(xt, st, num_segments, mode, 1e-6, singleton, backend="triton")
    assert got.shape == (n,) and got.dtype == torch.float64
    _close(got, want)
    twin = segment_normalize_torch(xt.cpu(), st.cpu(), num_segments, mode, 1e-6, singleton)
    _close(got, twin)  # includes: the twin's exact zeros are exact zeros here
    _close(twin, want)


@pytest.mark.parametrize("n", [1, 7, BLOCK - 1, BLOCK + 1, 2500])
@pytest.mark.parametrize("order", ["sorted", "random", "long_runs"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_segment_normalize_runs_variant(n, order, dtype, device):
    # the first pass reduces runs of equal segment ids inside the block before its atomics
    from milegpo_kernels.triton_segment import segment_normalize_triton

    rng = random.Random(n + len(order))
    x, seg, num_segments = _segment_data(n, rng)
    if order == "sorted":
        seg = sorted(seg)
    elif order == "long_runs":  # few segments, runs crossing block boundaries
        num_segments = 3
        seg = [min(2, i * 3 // n) for i in range(n)]
    x = [float(torch.tensor(v, dtype=dtype)) for v in x]  # values exact in dtype
    want = py_segment_normalize(x, seg, num_segments)
    xt, st = torch.tensor(x, dtype=dtype, device=device), _i64(seg, device)
    got = segment_normalize_triton(xt, st, num_segments, runs=True)
    _close(got, want, rtol=1e-12 if dtype == torch.float64 else 1e-4)
    plain = segment_normalize_triton(xt, st, num_segments, runs=False)
    _close(got, plain.cpu(), rtol=1e-12 if dtype == torch.float64 else 1e-4)


def test_segment_normalize_offset_and_float32(device):
    x, seg, num_segments = _segment_data(1500, random.Random(2), "offset")
    xt, st = torch.tensor(x, dtype=torch.float64, device=device), _i64(seg, device)
    got = segment_normalize(xt, st, num_segments, backend="triton")
    twin = segment_normalize_torch(xt.cpu(), st.cpu(), num_segments)
    _close(got, twin, rtol=1e-6)  # mean of ~1e6: the spread is 1e-9 of it, sums differ in the last bits
    x, seg, num_segments = _segment_data(1500, random.Random(4))
    xt, st = torch.tensor(x, dtype=torch.float32, device=device), _i64(seg, device)
    _close(segment_normalize(xt, st, num_segments, backend="triton"), segment_normalize_torch(xt.cpu(), st.cpu(), num_segments), rtol=1e-5)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_valid", [False, True])
def test_sibling_mean(n, with_valid, device):
    rng = random.Random(n + 5)
    x, seg, num_segments = _segment_data(n, rng)
    valid = [rng.random() < 0.7 for _ in range(n)] if with_valid else None
    want_mean, want_n = py_sibling_mean(x, seg, num_segments, valid)
    xt, st = torch.tensor(x, dtype=torch.float64, device=device), _i64(seg, device)
    if with_valid:
        xt = torch.where(torch.tensor(valid, dtype=torch.bool, device=device), xt, torch.full_like(xt, float("nan")))  # padded slots
    vt = None if valid is None else torch.tensor(valid, dtype=torch.bool, device=device)
    mean, cnt = sibling_mean(xt, st, num_segments, vt, backend="triton")
    _close(mean, want_mean)
    assert cnt.dtype == torch.int64 and _cpu(cnt).tolist() == want_n
    t_mean, t_cnt = sibling_mean_torch(xt.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu())
    _close(mean, t_mean)
    assert torch.equal(_cpu(cnt), t_cnt)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_valid", [False, True])
def test_max_normalize(n, with_valid, device):
    rng = random.Random(n + 9)
    x, seg, num_segments = _segment_data(n, rng)
    x = [abs(v) if s % 7 else 0.0 for v, s in zip(x, seg)]  # x >= 0; some all-zero segments
    valid = [rng.random() < 0.7 for _ in range(n)] if with_valid else None
    want = py_max_normalize(x, seg, num_segments, valid)
    xt, st = torch.tensor(x, dtype=torch.float64, device=device), _i64(seg, device)
    vt = None if valid is None else torch.tensor(valid, dtype=torch.bool, device=device)
    got = max_normalize(xt, st, num_segments, vt, backend="triton")
    assert _cpu(got).tolist() == want  # a max and one division: exact
    assert max_normalize_torch(xt.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu()).tolist() == want
    x32 = xt.float()
    got32 = max_normalize(x32, st, num_segments, vt, backend="triton")
    assert got32.dtype == torch.float32
    _close(got32, max_normalize_torch(x32.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu()), rtol=1e-6)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_valid", [False, True])
def test_segment_max(n, with_valid, device):
    """Any sign, -0.0, infinities, empty segments and a fill value; float64 and float32."""
    rng = random.Random(n + 13)
    x, seg, num_segments = _segment_data(n, rng)
    special = [0.0, -0.0, float("inf"), -float("inf"), -1e308, 5e-324]
    x = [rng.choice(special) if rng.random() < 0.1 else v for v in x]
    valid = [rng.random() < 0.7 for _ in range(n)] if with_valid else None
    vt = None if valid is None else torch.tensor(valid, dtype=torch.bool, device=device)
    st = _i64(seg, device)
    for dtype in (torch.float64, torch.float32):
        xt = torch.tensor(x, dtype=dtype, device=device)
        for fill in (0.0, -7.5):
            want = py_segment_max(_cpu(xt).tolist(), seg, num_segments, valid, fill)
            got = segment_max(xt, st, num_segments, vt, fill, backend="triton")
            assert got.dtype == dtype and got.shape == (num_segments,)
            assert _cpu(got).tolist() == want  # a max is exact
            twin = segment_max_torch(xt.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu(), fill)
            assert twin.tolist() == want


def test_segment_max_edges(device):
    x = torch.tensor([torch.finfo(torch.float64).min, 2.0, -3.0], dtype=torch.float64, device=device)
    s = _i64([0, 1, 1], device)
    got = segment_max(x, s, 3, fill=9.0, backend="triton")
    lowest = torch.finfo(torch.float64).min  # a real value, not an empty segment
    assert _cpu(got).tolist() == [lowest, 2.0, 9.0] == segment_max_torch(x.cpu(), s.cpu(), 3, fill=9.0).tolist()
    assert segment_max(x[:0], s[:0], 0, backend="triton").shape == (0,)
    assert _cpu(segment_max(x[:0], s[:0], 2, fill=1.5, backend="triton")).tolist() == [1.5, 1.5]
    ints = _i64([4, -1, 7], device)  # integers stay on the torch path
    assert _cpu(segment_max(ints, s, 2, backend="triton")).tolist() == [4, 7]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA the kernels skip such rows (a check would sync)")
def test_segment_ids_out_of_range_raise_on_cpu(device):
    x = torch.ones(4, dtype=torch.float64, device=device)
    for seg, bad in (([0, 1, 3, 0], "seg\\[2\\] = 3 is outside \\[0, 3\\)"), ([0, -1, 1, 2], "seg\\[1\\] = -1")):
        s = _i64(seg, device)
        for name, call in {
            "segment_normalize": lambda: segment_normalize(x, s, 3, backend="triton"),
            "sibling_mean": lambda: sibling_mean(x, s, 3, backend="triton"),
            "max_normalize": lambda: max_normalize(x, s, 3, backend="triton"),
            "segment_max": lambda: segment_max(x, s, 3, backend="triton"),
            "count_distinct": lambda: count_distinct(s, s, x > 0, 3, backend="triton"),
        }.items():
            with pytest.raises(ValueError, match=f"{name}: {bad}"):
                call()


def test_segment_errors(device):
    x = torch.zeros(3, dtype=torch.float64, device=device)
    s = _i64([0, 1, 1], device)
    with pytest.raises(ValueError, match="mode"):
        segment_normalize(x, s, 2, mode="median", backend="triton")
    with pytest.raises(TypeError, match="float32 or float64"):
        max_normalize(x.half(), s, 2, backend="triton")


# ---------------------------------------------------------------------------
# backend choice and device behaviour
# ---------------------------------------------------------------------------


def test_auto_backend_on_cpu_is_torch(device):
    """CPU tensors with backend="auto" take the torch path (its sorted ids)."""
    g, k = _i64([1, 0, 1], "cpu"), _i64([SINK, 5, SINK], "cpu")
    assert dense_ids(g, k).ids.tolist() == [1, 0, 1]  # sorted order: torch twin
    got = dense_ids(g.to(device), k.to(device), backend="triton")
    assert _cpu(got.ids).tolist() == [0, 1, 0]  # first-occurrence order


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        dense_ids(_i64([1], "cpu"), backend="triton")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
                    reason="needs CUDA with TRITON_INTERPRET=0")
def test_gpu_auto_backend_without_host_sync():
    """On CUDA, backend="auto" runs the kernels and no op synchronises with the host."""
    dev = "cuda"
    rng = random.Random(0)
    n = 5000
    g = torch.tensor([rng.randrange(8) for _ in range(n)], device=dev)
    k = torch.tensor(_keys(n, "adversarial", rng), device=dev)
    x = torch.randn(n, dtype=torch.float64, device=dev)
    pos = torch.rand(n, device=dev) < 0.5
    seg = torch.randint(0, 100, (n,), device=dev)
    src, dst = torch.randint(0, 300, (n,), device=dev), torch.randint(0, 300, (n,), device=dev)
    target = torch.zeros(300, dtype=torch.bool, device=dev)
    target[0] = True

    def run_all():
        return (dense_ids(g, k), count_distinct(seg, g, pos, 100), hop_distance(src, dst, target),
                max_times_potential(src, dst, target.double(), 0.9), segment_normalize(x, seg, 100),
                sibling_mean(x, seg, 100), max_normalize(x.abs(), seg, 100), segment_max(x, seg, 100))

    warm = run_all()  # compiles
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = run_all()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert int(out[0].count) == int(dense_ids_torch(g.cpu(), k.cpu()).count)
    assert torch.equal(out[2].cpu(), hop_distance_torch(src.cpu(), dst.cpu(), target.cpu()))
    assert torch.equal(out[3].cpu(), max_times_potential_torch(src.cpu(), dst.cpu(), target.double().cpu(), 0.9))
    for a, b in zip(warm[1], out[1]):
        assert torch.equal(a, b)  # integer atomics: deterministic
    assert torch.equal(out[7].cpu(), segment_max_torch(x.cpu(), seg.cpu(), 100))
