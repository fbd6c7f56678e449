"""Hooks on the package's Triton kernels under Triton's interpreter (CPU), for the tests and the
developer scripts. Not used by the ops themselves.

:func:`hooked_kernels` replaces every interpreted kernel of the Triton modules (found by
name: ``milegpo_kernels.triton_*`` and the fused policy loss, so a new module needs no
list updated) by a stand-in that calls ``on_launch(module, name, kernel, args, kwargs)``
before each ``kernel[grid](...)`` launch; a call of a ``@triton.jit`` helper from inside
another kernel passes straight through. :func:`in_kernel` tells whether a launch is running
(torch ops the interpreter runs for a kernel are not the caller's). Used by
``scripts/compile_kernels.py`` and ``scripts/credit_op_count.py``.

:func:`grid_order` runs each launch's programs in another order than the interpreter's
(the test suite shuffles them: tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil

_DEPTH = [0]


def triton_modules() -> list[str]:
    """The modules holding the package's Triton kernels."""
    import milegpo_kernels

    names = sorted(f"milegpo_kernels.{m.name}" for m in pkgutil.iter_modules(milegpo_kernels.__path__)
                   if m.name.startswith("triton_"))
    return names + ["milegpo_kernels.policy_loss.fused"]


def in_kernel() -> bool:
    return _DEPTH[0] > 0


class _Hook:
    def __init__(self, module: str, name: str, kernel, on_launch):
        self.module, self.name, self.kernel, self.on_launch = module, name, kernel, on_launch

    def __call__(self, *args, **kwargs):  # a @triton.jit helper called from inside a kernel
        return self.kernel(*args, **kwargs)

    def __getattr__(self, name):  # e.g. .fn of a scan's combine function
        return getattr(self.kernel, name)

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def run(*args, **kwargs):
            self.on_launch(self.module, self.name, self.kernel, args, kwargs)
            _DEPTH[0] += 1
            try:
                return launch(*args, **kwargs)
            finally:
                _DEPTH[0] -= 1

        return run


@contextlib.contextmanager
def hooked_kernels(on_launch, modules: list[str] | None = None):
    """Inside the block every interpreted kernel of ``modules`` (default: :func:`triton_modules`)
    reports its launches to ``on_launch``. Needs ``TRITON_INTERPRET=1`` (compiled kernels are
    not hooked)."""
    patched = []
    try:
        for mod_name in modules or triton_modules():
            mod = importlib.import_module(mod_name)
            for name in dir(mod):
                kernel = getattr(mod, name)
                if type(kernel).__name__ == "InterpretedFunction":
                    patched.append((mod, name, kernel))
                    setattr(mod, name, _Hook(mod_name, name, kernel, on_launch))
        yield
    finally:
        for mod, name, kernel in patched:
            setattr(mod, name, kernel)


GRID_ORDERS = ("sequential", "reverse", "shuffle")


@contextlib.contextmanager
def grid_order(order: str = "shuffle", seed: int = 0):
    """Inside the block Triton's interpreter runs each launch's programs in ``order``:
    ``sequential`` (its own: program 0, 1, 2, ...), ``reverse``, or ``shuffle`` (a fresh
    permutation per launch, drawn from ``seed``). On a GPU programs run concurrently in no
    set order; the interpreter runs them one after another, always in the same order, so a
    kernel whose result depends on which program runs first (a plain store racing another
    program's, a read of what another program writes in the same launch) passes there and
    may fail on a GPU. Running the tests in other orders catches that class of fault (not
    every race: the programs still never interleave). Needs ``TRITON_INTERPRET=1``."""
    if order not in GRID_ORDERS:
        raise ValueError(f"grid_order: order must be one of {GRID_ORDERS}, got {order!r}")
    import random

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not (hasattr(builder, "set_grid_dim") and hasattr(builder, "set_grid_idx")):  # Triton internals moved
        raise RuntimeError("grid_order: this Triton's interpreter has no set_grid_dim / set_grid_idx to reorder")
    # the interpreter's own methods (an enclosing grid_order's are instance attributes: saved and
    # put back on exit, not composed with this one)
    set_dim, set_idx = (getattr(type(builder), m).__get__(builder) for m in ("set_grid_dim", "set_grid_idx"))
    outer = {m: builder.__dict__[m] for m in ("set_grid_dim", "set_grid_idx") if m in builder.__dict__}
    rng = random.Random(seed)
    launch = {}

    def grid_dim(nx, ny, nz):
        set_dim(nx, ny, nz)
        n = nx * ny * nz
        perm = range(n) if order == "sequential" else range(n - 1, -1, -1) if order == "reverse" else rng.sample(
            range(n), n)
        launch.update(perm=perm, dim=(nx, ny, nz))

    def grid_idx(x, y, z):
        _, ny, nz = launch["dim"]
        p = launch["perm"][(x * ny + y) * nz + z]
        set_idx(p // (ny * nz), p // nz % ny, p % nz)

    builder.set_grid_dim, builder.set_grid_idx = grid_dim, grid_idx
    try:
        yield
    finally:
        for m in ("set_grid_dim", "set_grid_idx"):
            if m in outer:
                setattr(builder, m, outer[m])
            else:
                delattr(builder, m)
