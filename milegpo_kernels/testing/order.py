"""Launch and lane order under Triton's interpreter: :func:`grid_order` runs each launch's programs,
and each atomic's lanes, in another order than the interpreter's (the test suite shuffles them:
tests/conftest.py), and refuses a grid a CUDA device would (:func:`check_grid`)."""

from __future__ import annotations

import contextlib

from .interpreter import on_builder

GRID_ORDERS = ("sequential", "reverse", "shuffle")

#: the most programs a CUDA launch takes on grid axes 0, 1, 2 (the interpreter takes any number)
CUDA_GRID_LIMITS = (2**31 - 1, 65535, 65535)


def check_grid(grid) -> None:
    """Raise if a CUDA device would refuse a launch of ``grid`` programs (x, y, z): more than
    :data:`CUDA_GRID_LIMITS` on an axis. The interpreter runs such a launch (slowly); on a GPU it
    fails with "invalid argument", so a grid that grows with the input (rows on axis 1, say)
    would pass every CPU test and fail on a large batch."""
    for axis, (n, most) in enumerate(zip(grid, CUDA_GRID_LIMITS)):
        if n > most:
            raise RuntimeError(f"launch grid {tuple(grid)}: {n:,} programs on axis {axis}, over the {most:,} "
                               "a CUDA device launches; put the long dimension on axis 0 or loop in the kernel")


@contextlib.contextmanager
def grid_order(order: str = "shuffle", seed: int = 0):
    """Inside the block Triton's interpreter runs each launch's programs in ``order``:
    ``sequential`` (its own: program 0, 1, 2, ...), ``reverse``, or ``shuffle`` (a fresh
    permutation per launch, drawn from ``seed``). On a GPU programs run concurrently in no
    set order; the interpreter runs them one after another, always in the same order, so a
    kernel whose result depends on which program runs first (a plain store racing another
    program's, a read of what another program writes in the same launch) passes there and
    may fail on a GPU. Running the tests in other orders catches that class of fault (not
    every race: the programs still never interleave; :func:`race_check` sees those).

    The lanes of each atomic (``tl.atomic_add`` / ``max`` / ``cas`` ...) are taken in the same
    kind of order: reversed, or a fresh permutation per call. The interpreter applies them lane
    0, 1, 2, ...; a GPU in no set order, so float sums land in another order (results differ
    in their last bits) and a compare-and-swap is won by another lane. A test that asks for
    the interpreter's bits there would pass here and fail on a GPU. A launch whose grid a GPU
    refuses (:func:`check_grid`) fails here too. Needs ``TRITON_INTERPRET=1``."""
    if order not in GRID_ORDERS:
        raise ValueError(f"grid_order: order must be one of {GRID_ORDERS}, got {order!r}")
    import random

    import numpy as np

    rng = random.Random(seed)
    launch = {}

    def grid_dim(set_dim):
        def run(nx, ny, nz):
            check_grid((nx, ny, nz))
            set_dim(nx, ny, nz)
            n = nx * ny * nz
            perm = range(n) if order == "sequential" else range(n - 1, -1, -1) if order == "reverse" else \
                rng.sample(range(n), n)
            launch.update(perm=perm, dim=(nx, ny, nz))
        return run

    def grid_idx(set_idx):
        def run(x, y, z):
            _, ny, nz = launch["dim"]
            p = launch["perm"][(x * ny + y) * nz + z]
            set_idx(p // (ny * nz), p // nz % ny, p % nz)
        return run

    _LANE_ORDERS.append((order, np.random.default_rng(seed)))
    try:
        with on_builder({"set_grid_dim": grid_dim, "set_grid_idx": grid_idx}, over_outer=False), \
                on_builder(_LANE_HOOKS if len(_LANE_ORDERS) == 1 else {}, over_outer=True):
            yield
    finally:
        _LANE_ORDERS.pop()


#: (order, rng) of the open :func:`grid_order` blocks, innermost last: the atomics' lanes follow it
_LANE_ORDERS: list = []


def _lanes(handles_at):
    """A stand-in for an atomic that hands it its lanes in the innermost :func:`grid_order`'s order
    (the handles at positions ``handles_at``: pointers, values, mask) and puts the old values it
    returns back in their lanes."""
    import numpy as np

    def make(own):
        def run(*a, **kw):
            order, rng = _LANE_ORDERS[-1] if _LANE_ORDERS else ("sequential", None)
            shape = np.shape(a[handles_at[0]].data)
            n = int(np.prod(shape))
            if order == "sequential" or n < 2:
                return own(*a, **kw)
            p = np.arange(n - 1, -1, -1) if order == "reverse" else rng.permutation(n)
            a = list(a)
            for i in handles_at:
                h = a[i]
                if h is not None:
                    a[i] = type(h)(np.ascontiguousarray(np.broadcast_to(h.data, shape).reshape(-1)[p]),
                                   h.dtype)
            out = own(*a, **kw)
            back = np.empty_like(out.data)
            back[p] = out.data
            return type(out)(back.reshape(shape), out.dtype)
        return run
    return make


# create_atomic_rmw(op, ptr, val, mask, sem, scope), create_atomic_cas(ptr, cmp, val, sem, scope)
_LANE_HOOKS = {"create_atomic_rmw": _lanes((1, 2, 3)), "create_atomic_cas": _lanes((0, 1, 2))}
