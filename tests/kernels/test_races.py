"""No two programs of a launch race: every Triton op of the package under the interpreter's race
check (:func:`milegpo_kernels.testing.race_check`), with blocks of 32 so that even small
inputs spread over many programs.

The interpreter runs a launch's programs one after another; a GPU runs them at once. A kernel
whose programs store different values to the same bytes, or read (or plainly write) bytes that
another program of the same launch writes, gives a timing-dependent result there and a fixed one
here: the check records every byte each program touches and fails such a launch. The results
must also still equal the plain-Python reference (small blocks change every kernel's tiling).
"""

import contextlib

import pytest
import torch
import triton
import triton.language as tl

from milegpo.credit import estimate, presets
from milegpo.credit.synthetic import paths_batch
from milegpo_kernels import dense_ids, max_normalize, segment_max, segment_normalize, sibling_mean
from milegpo_kernels import interpreter_on
from milegpo_kernels.policy_loss import fused as fused_mod
from milegpo_kernels.policy_loss import fused_policy_loss
from milegpo_kernels.testing import (
    POISON_INT,
    OutOfBoundsError,
    RaceError,
    bounds_check,
    poison_masked_loads,
    race_check,
    triton_modules,
)

from ..credit.batches import make_batch
from ..credit.test_estimate import compare

pytestmark = pytest.mark.skipif(not interpreter_on(), reason="interpreter only")

SMALL = 32


@pytest.fixture
def small_blocks(monkeypatch):
    """Every credit kernel module's block sizes set to 32: many programs per launch. All modules
    are imported before any is patched: one that imports another's BLOCK would keep the 32."""
    import importlib

    for mod in [importlib.import_module(name) for name in triton_modules()]:
        for attr in ("BLOCK", "SEG_BLOCK"):
            if isinstance(getattr(mod, attr, None), int):
                monkeypatch.setattr(mod, attr, SMALL)


# ---------------------------------------------------------------- the check itself


@triton.jit
def _reads_next_program(x_ptr, out_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, i)
    tl.store(x_ptr + i, tl.load(out_ptr + (i + BLOCK) % (3 * BLOCK)))


@triton.jit
def _stores_its_id(out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.program_id(0) + tl.zeros((BLOCK,), tl.int32))


@triton.jit
def _reads_an_accumulator(acc_ptr, out_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(acc_ptr, 1)
    tl.store(out_ptr + i, tl.load(acc_ptr) + tl.zeros((BLOCK,), tl.int32))


@triton.jit
def _lanes_clash(out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i // 2, i)  # lanes 2k and 2k + 1 both store to element k: which wins?


@triton.jit
def _reads_next_lane(x_ptr, out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, i)
    tl.store(x_ptr + i, tl.load(out_ptr + (i + 1) % BLOCK))  # no barrier: lane i may read before lane i+1 stored


@triton.jit
def _reads_own_lane(x_ptr, out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, i)
    tl.store(x_ptr + i, tl.load(out_ptr + i) + 1)  # the same thread: program order holds


@triton.jit
def _lanes_agree(out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i // 2, i // 2)  # same element, same value: fine


@triton.jit
def _no_race(out_ptr, acc_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, i)
    tl.atomic_add(acc_ptr + i % 2, 1)  # many programs, one accumulator: what atomics are for
    tl.store(out_ptr + 3 * BLOCK + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.int32))  # equal values


def _ints(n):
    return torch.zeros(n, dtype=torch.int32)


@pytest.mark.parametrize("kernel, args, what", [
    (_reads_next_program, lambda: (_ints(48), _ints(48)), "load of stored bytes at .* out_ptr"),
    (_stores_its_id, lambda: (_ints(16),), "plain stores of different values at 64 bytes of out_ptr"),
    (_reads_an_accumulator, lambda: (_ints(1), _ints(48)), "load of atomically updated bytes at 4 bytes of acc_ptr"),
    (_lanes_clash, lambda: (_ints(8),), "one store's lanes sending different values at 32 bytes of out_ptr"),
    (_reads_next_lane, lambda: (_ints(16), _ints(16)),
     "a lane loading what another lane of its program stored at 64 bytes of out_ptr"),
])
def test_race_check_names_the_race(kernel, args, what):
    with pytest.raises(RaceError, match=what), race_check():
        kernel[(3,)](*args(), BLOCK=16)


def test_race_check_passes_atomics_and_equal_stores_and_restores_the_interpreter():
    out, acc = _ints(64), _ints(2)
    with race_check():
        _no_race[(3,)](out, acc, BLOCK=16)
    assert acc.tolist() == [24, 24] and out[:48].tolist() == list(range(48))
    half, x = _ints(8), _ints(16)
    with race_check():
        _lanes_agree[(1,)](half, BLOCK=16)
        _reads_own_lane[(1,)](x, _ints(16), BLOCK=16)
    assert half.tolist() == list(range(8)) and x.tolist() == list(range(1, 17))
    _stores_its_id[(3,)](_ints(16), BLOCK=16)  # outside the block: not checked


@triton.jit
def _copy(x_ptr, out_ptr, n, shift, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i + shift, mask=i < n, other=0), mask=i < n)


@pytest.mark.parametrize("check", [bounds_check, race_check])
def test_bounds_check_names_an_access_outside_the_tensors(check):
    x, out = torch.arange(40, dtype=torch.int32), _ints(40)
    with check():
        _copy[(3,)](x, out, 40, 0, BLOCK=16)  # 48 lanes, 8 masked off: fine
        _copy[(1,)](x[8:24], out, 16, 0, BLOCK=16)  # a view
    assert out.tolist() == list(range(8, 24)) + list(range(16, 40))
    with pytest.raises(OutOfBoundsError, match=r"_copy: a load of 1 element\(s\) outside .* nearest tensor x_ptr "
                                               r"\(16 x 4 bytes\), element 16 of it"), check():
        _copy[(1,)](x[8:24], out, 16, 1, BLOCK=16)  # one past the view's end (inside x's storage)
    with pytest.raises(OutOfBoundsError, match="_copy: a store of 2 element"), check():
        _copy[(1,)](x, out[:14], 16, 0, BLOCK=16)


@triton.jit
def _sum_loaded(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + i, mask=i < n), axis=0))  # no other=: lanes past n undefined


def test_poisoned_masked_loads_show_a_kernel_using_undefined_lanes():
    """The test suite runs with masked-off lanes of a load without ``other`` poisoned (conftest):
    a kernel summing them gets NaN / garbage here, as it may on a GPU, not the interpreter's 0."""
    for dtype, bad in ((torch.float64, lambda v: v != v), (torch.int64, lambda v: v != 6)):
        x, out = torch.tensor([1, 2, 3, 9], dtype=dtype), torch.zeros(1, dtype=dtype)
        _sum_loaded[(1,)](x, out, 3, BLOCK=8)  # the suite's fixture is on: poisoned
        assert bad(out.item()), dtype
        with poison_masked_loads():  # nested: still poisoned
            _sum_loaded[(1,)](x, out, 3, BLOCK=8)
        assert bad(out.item()), dtype
        _sum_loaded[(1,)](x, out, 4, BLOCK=4)  # nothing masked: exact
        assert out.item() == 15
    assert POISON_INT < 0


# ---------------------------------------------------------------- the package's kernels


@pytest.mark.parametrize("seed, kwargs", [
    (0, dict(n_groups=3, k=4, horizon=10)),
    (1, dict(n_groups=2, k=6, horizon=12, n_states=3, p_self=0.6)),
    (5, dict(n_groups=3, k=4, horizon=4, one_step=True)),
])
def test_credit_pipeline_has_no_race(small_blocks, seed, kwargs):
    """Every method and variant, both presets, the GPU's static layout (padding slots)."""
    batch = make_batch(seed, **kwargs)
    with race_check():
        compare(batch, backend="triton", static_shapes=True)


def test_credit_pipeline_has_no_race_with_a_sink_and_shared_states(small_blocks):
    paths = [(0, [1, 2, 3, -1]), (0, [1, 2, 2, 3, -1]), (0, [1, 4, 4, 4]), (1, [5, 6, 5, 6, 7]),
             (1, [5, 7, -1]), (2, [8, 9])]
    batch = paths_batch([(g, [s if s != -1 else (1 << 63) - 1 for s in seq]) for g, seq in paths],
                        shuffle_seed=3)
    with race_check():
        for method in ("grpo", "gigpo", "graphgpo", "milegpo"):
            estimate(batch, method, presets.ALFWORLD, backend="triton")
        compare(batch, backend="triton", static_shapes=True)


@pytest.mark.parametrize("seed, kwargs", [
    (1, dict(n_groups=2, k=6, horizon=12, n_states=3, p_self=0.6)),
    (2, dict(n_groups=4, k=8, horizon=16, n_states=4, p_self=0.3)),
])
def test_credit_pipeline_lanes_agree_at_the_default_blocks(seed, kwargs):
    """The package's own block sizes: one program holds whole segments and tables, so this is
    where two lanes of one store could aim at the same element (shared states, revisits)."""
    batch = make_batch(seed, **kwargs)
    with race_check():
        compare(batch, backend="triton", static_shapes=True)


def test_segment_ops_have_no_race(small_blocks):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, generator=g, dtype=torch.float64)
    seg = torch.randint(0, 7, (300,), generator=g)
    valid = torch.rand(300, generator=g) < 0.7
    with race_check():
        got = (sibling_mean(x, seg, 7, valid, backend="triton"), max_normalize(x, seg, 7, valid, backend="triton"),
               segment_max(x, seg, 7, valid, fill=-1.0, backend="triton"))
    want = (sibling_mean(x, seg, 7, valid, backend="torch"), max_normalize(x, seg, 7, valid, backend="torch"),
            segment_max(x, seg, 7, valid, fill=-1.0, backend="torch"))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_fused_policy_loss_has_no_race(monkeypatch):
    """Forward and backward, several row and vocabulary tiles."""
    monkeypatch.setattr(fused_mod, "BLOCK_V", 64)
    monkeypatch.setattr(fused_mod, "BLOCK_N", 4)
    g = torch.Generator().manual_seed(0)
    b, t, h, v = 3, 5, 16, 700
    hidden = torch.randn(b, t, h, generator=g, requires_grad=True)
    weight = torch.randn(v, h, generator=g, requires_grad=True)
    ids = torch.randint(0, v, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.int64)
    mask[0, 3:] = 0
    adv = torch.randn(b, generator=g)
    old = -torch.rand(b, t, generator=g) * 5
    grads = {}
    for backend in ("triton", "torch"):
        hidden.grad = weight.grad = None
        with race_check() if backend == "triton" else contextlib.nullcontext():
            loss = fused_policy_loss(hidden, weight, ids, mask, adv, old, beta=0.0, backend=backend)[0]
            loss.backward()
        grads[backend] = (loss.detach(), hidden.grad.clone(), weight.grad.clone())
    torch.testing.assert_close(grads["triton"], grads["torch"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("peek", [False, True])
@pytest.mark.parametrize("table_size", [None, 300])
def test_hash_grouping_has_no_race(peek, table_size):
    """Many programs inserting into one table, collisions forced by a table barely larger than
    the rows. ``peek`` (off by default: measured slower) reads a slot before its compare-and-swap,
    a plain read of what other programs' atomics write: a race by design, and a harmless one (a
    stale EMPTY leads to the CAS, which returns the truth; a stale row is still a row of the
    slot's tuple, as the slot only ever moves to a smaller row of the same tuple). The check
    names exactly that read; the ids are right either way."""
    from milegpo_kernels.grouping.triton_ops import dense_ids_triton

    g = torch.Generator().manual_seed(1)
    a = torch.randint(-3, 3, (290,), generator=g)
    b = torch.randint(-(2**62), 2**62, (5,), generator=g)[torch.randint(0, 5, (290,), generator=g)]
    if peek:
        only_peek = (r"^_insert_kernel: load of atomically updated bytes at \d+ bytes of table_ptr "
                     r"\(first at element \d+\)$")
        with pytest.raises(RaceError, match=only_peek), race_check():
            dense_ids_triton(a, b, table_size=table_size, peek=peek, insert_block=SMALL)
        got = dense_ids_triton(a, b, table_size=table_size, peek=peek, insert_block=SMALL)
    else:
        with race_check():
            got = dense_ids_triton(a, b, table_size=table_size, peek=peek, insert_block=SMALL)
    want = dense_ids(a, b, backend="torch")
    # ids are numbered by first occurrence on the Triton path, in sorted order by the twin: same partition
    assert int(got.count) == int(want.count)
    pairs = set(zip(got.ids.tolist(), want.ids.tolist()))
    assert len(pairs) == int(want.count)


def test_runs_variant_of_the_normalisation_has_no_race(small_blocks):
    from milegpo_kernels.segment.triton_ops import segment_normalize_triton

    g = torch.Generator().manual_seed(2)
    seg = torch.sort(torch.randint(0, 9, (400,), generator=g)).values  # runs of equal ids, as in the pipeline
    x = torch.randn(400, generator=g, dtype=torch.float64)
    with race_check():
        got = segment_normalize_triton(x, seg, 9, "mean_std", 1e-6, "unit", runs=True)
    torch.testing.assert_close(got, segment_normalize(x, seg, 9, "mean_std", 1e-6, "unit", backend="torch"),
                               rtol=1e-12, atol=1e-12)


def test_similarity_ops_have_no_race(small_blocks):
    """Label propagation (one program per task group, blocks of 32 edges: many blocks a sweep, hooks that
    reach back into earlier blocks), the overlap kernel's pairs and the band buckets' hash table, under the
    race check; the merged keys equal plain Python."""
    import random

    from .test_similarity import csr, reference_similar_state_keys, random_table

    rng = random.Random(4)
    sets, bands = random_table(rng, 40, 3)
    key = [rng.randrange(-30, 30) for _ in range(150)]
    group = [rng.randrange(4) for _ in key]
    sketch = [(k + 30) % 40 for k in key]
    off, val = csr(sets, "cpu")
    args = (torch.tensor(group), torch.tensor(key), torch.tensor(sketch), torch.tensor(bands))
    from milegpo_kernels import similar_state_keys

    for threshold in (None, 0.5):
        with race_check():
            got = similar_state_keys(*args, threshold, off, val, backend="triton")
        assert got.tolist() == reference_similar_state_keys(group, key, sketch, bands, threshold, sets)
