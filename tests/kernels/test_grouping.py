"""dense_ids (milegpo_kernels.grouping): the Triton kernel vs its torch twin vs plain Python
(tests/kernels/helpers.py says how)."""

from __future__ import annotations

import random

import pytest
import torch

try:  # a dev extra; the benchmarks import this module's references without it
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    st = None

from milegpo_kernels import dense_ids
from milegpo_kernels.grouping import dense_ids_torch

from ..properties import examples
from .helpers import BLOCK, I64_MIN, SINK, SIZES, i64, random_keys, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")


# plain-Python reference (the benchmarks import it)


def reference_dense_ids(*cols: list[int]) -> tuple[list[int], int, list[bool]]:
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


def _same_partition(ids_a, ids_b):
    """The two id arrays induce the same partition of the rows (a bijection)."""
    a, b = to_cpu(ids_a).tolist(), to_cpu(ids_b).tolist()
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
    assert to_cpu(first).tolist() == py_first
    assert int(first.sum()) == py_count


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["small", "wide", "adversarial"])
def test_dense_ids_nodes(n, kind, device):
    rng = random.Random(n * 31 + len(kind))
    group = [rng.randrange(4) for _ in range(n)]
    key = random_keys(n, kind, rng)
    py = reference_dense_ids(group, key)
    g, k = i64(group, device), i64(key, device)
    res = dense_ids(g, k, backend="triton")
    _check_dense(res, py, device)
    twin = dense_ids_torch(g.cpu(), k.cpu())
    _check_dense(twin, py, "cpu")
    assert torch.equal(to_cpu(res.is_first), twin.is_first)  # both mark the first occurrence
    # triton ids are numbered in order of first occurrence, run to run the same
    assert torch.equal(to_cpu(res.ids), torch.tensor(py[0], dtype=torch.int64))


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
    py = reference_dense_ids(group, key)
    res = dense_ids(i64(group, device), i64(key, device), backend="triton", table_size=table_size)
    _check_dense(res, py, device)


def test_dense_ids_collisions_many_duplicates(device):
    """A table barely bigger than the rows, few distinct tuples, long duplicate runs."""
    rng = random.Random(5)
    n = 2000
    group = [rng.randrange(3) for _ in range(n)]
    key = [rng.choice([SINK, -1, 7, I64_MIN]) for _ in range(n)]
    res = dense_ids(i64(group, device), i64(key, device), backend="triton", table_size=n + 1)
    _check_dense(res, reference_dense_ids(group, key), device)


@pytest.mark.parametrize("sem", ["relaxed", "acq_rel"])
@pytest.mark.parametrize("peek", [False, True])
def test_dense_ids_insert_variants(sem, peek, device):
    """The insert kernel's tuning knobs change no id: hot duplicate runs, a full table."""
    rng = random.Random(11)
    n = BLOCK + 300
    group = [rng.randrange(3) for _ in range(n)]
    key = [rng.choice([SINK, -1, 7, I64_MIN]) if rng.random() < 0.7 else rng.randrange(-50, 50) for _ in range(n)]
    py = reference_dense_ids(group, key)
    for table_size, insert_block in ((None, BLOCK), (n, BLOCK), (8 * n, 256), (n, 256)):
        res = dense_ids(i64(group, device), i64(key, device), backend="triton", table_size=table_size, sem=sem,
                        peek=peek, insert_block=insert_block)
        _check_dense(res, py, device)
        assert torch.equal(to_cpu(res.ids), torch.tensor(py[0], dtype=torch.int64))


if st is not None:
    _KEY_POOL = st.sampled_from([SINK, I64_MIN, -1, 0, 1, -2, SINK - 1, 42])

    @settings(max_examples=examples(40))
    @given(rows=st.lists(st.tuples(st.integers(0, 3), _KEY_POOL | st.integers(I64_MIN, SINK)), max_size=60),
           slack=st.integers(0, 3))
    def test_dense_ids_property(rows, slack, device):
        """Any rows, a table of n + slack slots (mostly full): the partition of plain Python."""
        group = [g for g, _ in rows]
        key = [k for _, k in rows]
        res = dense_ids(i64(group, device), i64(key, device), backend="triton", table_size=max(len(rows), 1) + slack)
        _check_dense(res, reference_dense_ids(group, key), device)


@pytest.mark.parametrize("n", [0, 1, 2049])
def test_dense_ids_edges_three_columns(n, device):
    rng = random.Random(n + 3)
    group = [rng.randrange(5) for _ in range(n)]
    state = [rng.choice([SINK, -3, 4, 5, -1]) for _ in range(n)]
    nxt = [rng.choice([SINK, -3, 4, 5]) for _ in range(n)]
    py = reference_dense_ids(group, state, nxt)
    cols = [i64(c, device) for c in (group, state, nxt)]
    _check_dense(dense_ids(*cols, backend="triton"), py, device)
    _check_dense(dense_ids_torch(*[c.cpu() for c in cols]), py, "cpu")


@pytest.mark.parametrize("n", [1, 300, BLOCK + 1])
def test_dense_ids_five_columns(n, device):
    # the kernel reads three columns; more are numbered two at a time first
    rng = random.Random(n + 5)
    cols = [[rng.choice([SINK, -1, 0, 2, I64_MIN]) for _ in range(n)] for _ in range(5)]
    py = reference_dense_ids(*cols)
    tensors = [i64(c, device) for c in cols]
    _check_dense(dense_ids(*tensors, backend="triton"), py, device)
    _check_dense(dense_ids(*tensors, backend="triton", table_size=n + 1), py, device)
    _check_dense(dense_ids_torch(*[c.cpu() for c in tensors]), py, "cpu")


def test_dense_ids_one_column_and_errors(device):
    key = [SINK, 3, SINK, -1, 3]
    _check_dense(dense_ids(i64(key, device), backend="triton"), reference_dense_ids(key), device)
    with pytest.raises(ValueError, match="table_size"):
        dense_ids(i64(key, device), backend="triton", table_size=2)
    with pytest.raises(TypeError, match="column 1 must be int64"):
        dense_ids(i64(key, device), i64(key, device).int(), backend="triton")


def test_dense_ids_1e5_rows(device):
    """1e5 (group, key) rows: 16 groups of wide keys, many repeats."""
    n = 100_000
    gen = torch.Generator().manual_seed(0)
    group = torch.randint(0, 16, (n,), generator=gen)
    pool = torch.randint(I64_MIN, SINK, (5000,), generator=gen)
    pool[0] = SINK
    key = pool[torch.randint(0, 5000, (n,), generator=gen)]
    res = dense_ids(group.to(device), key.to(device), backend="triton")
    _check_dense(res, reference_dense_ids(group.tolist(), key.tolist()), device)
