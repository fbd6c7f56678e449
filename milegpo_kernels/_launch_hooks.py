"""Hooks on the package's Triton kernels under Triton's interpreter (CPU), for the tests and the
developer scripts. Not used by the ops themselves.

:func:`hooked_kernels` replaces every interpreted kernel of the Triton modules (found by
name: ``milegpo_kernels.triton_*`` and the fused policy loss, so a new module needs no
list updated) by a stand-in that calls ``on_launch(module, name, kernel, args, kwargs)``
before each ``kernel[grid](...)`` launch; a call of a ``@triton.jit`` helper from inside
another kernel passes straight through. :func:`in_kernel` tells whether a launch is running
(torch ops the interpreter runs for a kernel are not the caller's). Used by
``scripts/compile_kernels.py`` and ``scripts/credit_op_count.py``; :func:`host_checks_off`
skips the ops' host-side input checks, as CUDA tensors do.

:func:`grid_order` runs each launch's programs, and each atomic's lanes, in another order than
the interpreter's (the test suite shuffles them: tests/conftest.py) and refuses a grid a CUDA
device would (:func:`check_grid`); :func:`bounds_check` holds
every access to the tensors the kernel was given and :func:`poison_masked_loads` gives masked-off
lanes NaN / garbage instead of 0 (both on with every test); :func:`race_check` fails a launch
whose programs race on memory (tests/kernels/test_races.py), and also one in which the lanes
of one program race: a store sending different values from several lanes to one element (the
interpreter's last lane wins; a GPU's is unspecified), or a lane loading an element another
lane stored earlier (no barrier orders them on a GPU; the interpreter runs a block's lanes as
one array operation, so the load always sees the store). A lane loading what another lane
updated atomically is allowed: the graph relaxations read their neighbours' latest values on
purpose (Gauss-Seidel), and settle in a later sweep what a sweep missed.
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


#: the ops' checks of ids and counts that read CPU tensors on the host (on CUDA tensors they are
#: skipped: reading would be a host sync), by module and name
HOST_CHECKS = (("milegpo_kernels.triton_segment", "check_seg_range"),
               ("milegpo_kernels.triton_counting", "check_seg_range"),
               ("milegpo_kernels.scoring", "check_id_ranges"), ("milegpo_kernels.shaping", "check_id_ranges"),
               ("milegpo_kernels.rows", "check_id_ranges"), ("milegpo_kernels.graph_build", "_check"),
               ("milegpo_kernels.returns", "_check_graph_return"))


@contextlib.contextmanager
def host_checks_off():
    """Inside the block the host-side id / count checks of :data:`HOST_CHECKS` do nothing, as on
    CUDA tensors: CPU runs then see what a GPU call does (launches, host reads)."""
    from unittest import mock

    with contextlib.ExitStack() as stack:
        for mod_name, check in HOST_CHECKS:
            stack.enter_context(mock.patch.object(importlib.import_module(mod_name), check, lambda *a: None))
        yield


@contextlib.contextmanager
def _on_builder(replace, over_outer: bool):
    """The interpreter's builder with the methods named in ``replace`` swapped for
    ``replace[name](own)``; put back on exit. ``own``: the builder's current method of that name
    (``over_outer``: an enclosing block's stand-in stays in effect beneath this one), else the
    interpreter's own (an enclosing block's is set aside until exit)."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    missing = [m for m in replace if not hasattr(type(builder), m)]
    if missing:  # Triton's internals moved
        raise RuntimeError(f"this Triton's interpreter has no {', '.join(missing)} to hook")
    outer = {m: builder.__dict__[m] for m in replace if m in builder.__dict__}
    for m, make in replace.items():
        setattr(builder, m, make(getattr(builder, m) if over_outer else getattr(type(builder), m).__get__(builder)))
    try:
        yield builder
    finally:
        for m in replace:
            if m in outer:
                setattr(builder, m, outer[m])
            else:
                delattr(builder, m)


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
        with _on_builder({"set_grid_dim": grid_dim, "set_grid_idx": grid_idx}, over_outer=False), \
                _on_builder(_LANE_HOOKS if len(_LANE_ORDERS) == 1 else {}, over_outer=True):
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


#: what a masked-off lane of a load without ``other`` reads under :func:`poison_masked_loads`
POISON_INT = -0x5EEDBADC0FFEE


@contextlib.contextmanager
def poison_masked_loads():
    """Inside the block a ``tl.load`` with a mask and no ``other`` gives its masked-off lanes NaN
    (floats), a garbage integer (:data:`POISON_INT`, truncated to the type) or True, where the
    interpreter gives 0. On a GPU those lanes hold whatever the register held: a kernel that
    sums, compares or stores them works here by luck. Needs ``TRITON_INTERPRET=1``."""
    import numpy as np

    def make(own):
        def run(ptrs, mask, other, *rest):
            if other is None and mask is not None and not np.all(mask.data):
                ty = ptrs.get_element_ty()
                dt = np.dtype(_np_dtype(ty))
                if dt.kind == "f":
                    fill = np.nan
                elif dt.kind == "b":
                    fill = True
                else:
                    fill = np.array(POISON_INT, dtype=np.int64).astype(dt)
                other = type(ptrs)(np.full(np.shape(ptrs.data), fill, dtype=dt), ty)
            return own(ptrs, mask, other, *rest)
        return run

    with _on_builder({"create_masked_load": make}, over_outer=True):
        yield


def _np_dtype(ty):
    from triton.runtime import interpreter

    return interpreter._get_np_dtype(ty)


class RaceError(AssertionError):
    """Two programs of one launch touched the same bytes in a way whose outcome depends on their
    timing on a GPU (see :func:`race_check`)."""


class _Accesses:
    """The bytes one launch's programs read, wrote (with the values) and updated atomically."""

    def __init__(self):
        self.parts = {"load": [], "store": [], "atomic": []}
        self.lane_clashes: set = set()  # bytes one store sent different values to from two lanes
        self.lane_reads: set = set()  # bytes a lane loaded after another lane of its program stored them
        self._prog = None  # the program running, and the element addresses it stored (sorted) with their lanes
        self._stored = (None, None)

    def add(self, kind, builder, ptrs, mask, value=None):
        import numpy as np

        addr, keep = _active(ptrs, mask)
        if addr.size == 0:
            return
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        x, y, z = builder.grid_idx  # the program running (whatever order a grid_order imposes)
        _, ny, nz = builder.grid_dim
        prog = (x * ny + y) * nz + z
        if kind in ("load", "store"):
            self._lane_order(kind, prog, addr, keep, size, scalar=np.ndim(ptrs.data) == 0)
        byte_addr = (addr[:, None] + np.arange(size, dtype=np.uint64)).ravel()
        if value is None:
            val = np.zeros(byte_addr.shape, dtype=np.uint64)
        else:  # each byte carries its whole element's bits: an element stored with two values races in full
            v = np.asarray(value.data)
            v = np.ascontiguousarray(np.broadcast_to(v, ptrs.data.shape).ravel() if keep is None else
                                     np.broadcast_to(v, keep.shape)[keep])
            bits = v.view(f"u{v.dtype.itemsize}") if v.dtype.itemsize in (1, 2, 4, 8) else v.astype(np.uint64)
            val = np.repeat(bits.astype(np.uint64), size)
            if kind == "store" and addr.size > 1:
                self.lane_clashes |= _lane_clashes(addr, bits.astype(np.uint64), size)
        self.parts[kind].append((byte_addr, np.full(byte_addr.shape, prog, dtype=np.int64), val))

    def _lane_order(self, kind, prog, addr, keep, size, scalar: bool):
        """Within one program: a plain load by one lane of an element another lane stored earlier
        in the launch. A GPU orders the two only across a barrier (none of the package's kernels
        places one), so the load may see the old value; the interpreter always sees the new."""
        import numpy as np

        if self._prog != prog:
            self._prog, self._stored = prog, (np.zeros(0, np.uint64), np.zeros(0, np.int64))
        if scalar:  # one thread stores a scalar, every thread loads it
            lane = np.array([-2 if kind == "store" else -3], dtype=np.int64)
        else:
            lane = np.arange(addr.size if keep is None else keep.size, dtype=np.int64)
            lane = lane if keep is None else lane[keep.ravel()]
        keys, lanes = self._stored
        if kind == "store":
            keys, at = np.unique(np.concatenate([addr, keys]), return_index=True)  # the newest store first
            self._stored = (keys, np.concatenate([lane, lanes])[at])
            return
        if keys.size == 0:
            return
        at = np.clip(np.searchsorted(keys, addr), 0, keys.size - 1)
        other = (keys[at] == addr) & (lanes[at] != lane)
        if other.any():
            self.lane_reads |= set((addr[other][:, None] + np.arange(size, dtype=np.uint64)).ravel().tolist())

    def conflicts(self):
        """(kind, byte addresses) of every race: stores of different values by different programs, a
        plain load or store by one program of bytes another program stores or updates atomically."""
        import numpy as np

        def cat(kind):
            parts = self.parts[kind]
            if not parts:
                return (np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
            return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

        def multi_prog(addr, prog):
            """Addresses touched by more than one program."""
            pairs = np.unique(np.stack([addr.astype(np.int64, copy=False).view(np.int64), prog]), axis=1)
            a, n = np.unique(pairs[0], return_counts=True)
            return set(a[n > 1].tolist())

        loads, stores, atomics = cat("load"), cat("store"), cat("atomic")
        found = [("one store's lanes sending different values", self.lane_clashes)] if self.lane_clashes else []
        if self.lane_reads:
            found.append(("a lane loading what another lane of its program stored", self.lane_reads))
        # store / store: different programs, different values
        if stores[0].size:
            a = stores[0].view(np.int64)
            both = np.unique(np.stack([a, stores[1], stores[2].view(np.int64)]), axis=1)
            addr_vals = np.unique(both[[0, 2]], axis=1)
            a_v, n_v = np.unique(addr_vals[0], return_counts=True)
            multi_value = set(a_v[n_v > 1].tolist())
            racing = multi_value & multi_prog(stores[0], stores[1])
            if racing:
                found.append(("plain stores of different values", racing))
        # a plain load or store of bytes another program writes (plainly or atomically)
        for what, writer, other in (("load of stored bytes", stores, loads), ("load of atomically updated bytes",
                                                                             atomics, loads),
                                    ("plain store to atomically updated bytes", atomics, stores)):
            if not (writer[0].size and other[0].size):
                continue
            shared = np.intersect1d(writer[0], other[0])
            if shared.size == 0:
                continue
            addr = np.concatenate([writer[0], other[0]])
            prog = np.concatenate([writer[1], other[1]])
            sel = np.isin(addr, shared)
            racing = multi_prog(addr[sel], prog[sel])
            if racing:
                found.append((what, racing))
        return found


def _lane_clashes(addr, bits, size) -> set:
    """The bytes of the elements that one store's lanes (element addresses ``addr``, stored bits
    ``bits``) send two different values to."""
    import numpy as np

    pairs = np.unique(np.stack([addr.view(np.int64), bits.view(np.int64)]), axis=1)
    a, n = np.unique(pairs[0], return_counts=True)
    clash = a[n > 1].astype(np.uint64)
    return set((clash[:, None] + np.arange(size, dtype=np.uint64)).ravel().tolist())


class OutOfBoundsError(AssertionError):
    """A kernel touched memory outside every tensor it was given (see :func:`bounds_check`)."""


@contextlib.contextmanager
def _watch(on_access, after_launch=None):
    """Inside the block each interpreted launch's loads, stores and atomics are reported, before
    they happen, to ``on_access(launch, kind, builder, ptrs, mask, value)`` (``kind``: "load",
    "store" or "atomic"; ``launch``: a dict with the kernel's ``name`` and its tensor ``args`` as
    (name, host tensor) pairs, to which the callback may add), and each finished launch to
    ``after_launch(launch)``. Blocks nest: every enclosing block's callbacks see the accesses."""
    import inspect

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    cls = interpreter.GridExecutor
    call, init_args = cls.__call__, cls._init_args_hst
    launches: list[dict] = []  # innermost last: the launch running now

    def watched_call(self, *args, **kwargs):
        launches.append({"name": getattr(self.fn, "__name__", str(self.fn)),
                         "arg_names": inspect.getfullargspec(self.fn).args, "args": []})
        try:
            try:
                out = call(self, *args, **kwargs)
            except Exception as e:  # the interpreter wraps what a hook raised inside a program: unwrap ours
                if isinstance(e.__cause__, (OutOfBoundsError, RaceError)):
                    raise e.__cause__ from None
                raise
            if after_launch is not None:
                after_launch(launches[-1])
            return out
        finally:
            launches.pop()

    def capture_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        if launches:
            launch = launches[-1]
            named = list(zip(launch["arg_names"], args_hst)) + list(kwargs_hst.items())
            launch["args"] = [(n, a) for n, a in named if hasattr(a, "data_ptr")]
        return args_hst, kwargs_hst

    def reported(kind, ptr_at, mask_at=None, value_at=None):
        """A stand-in for a builder method that reports its access first (argument positions of
        the pointers, the mask and the stored value)."""
        def make(own):
            def run(*a, **kw):
                if launches:
                    on_access(launches[-1], kind, builder, a[ptr_at], None if mask_at is None else a[mask_at],
                              None if value_at is None else a[value_at])
                return own(*a, **kw)
            return run
        return make

    # create_masked_load(ptrs, mask, other, ...), create_masked_store(ptrs, value, mask, ...),
    # create_atomic_rmw(op, ptr, val, mask, ...), create_atomic_cas(ptr, cmp, val, ...)
    hooks = {"create_masked_load": reported("load", 0, 1), "create_masked_store": reported("store", 0, 2, 1),
             "create_atomic_rmw": reported("atomic", 1, 3), "create_atomic_cas": reported("atomic", 0)}
    cls.__call__, cls._init_args_hst = watched_call, capture_args
    try:
        with _on_builder(hooks, over_outer=True):
            yield
    finally:
        cls.__call__, cls._init_args_hst = call, init_args


def _active(ptrs, mask):
    """The element addresses of the lanes a load / store / atomic really touches."""
    import numpy as np

    addr = np.atleast_1d(np.asarray(ptrs.data, dtype=np.uint64))
    if mask is None:
        return addr.ravel(), None
    keep = np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)
    return addr[keep], keep


@contextlib.contextmanager
def race_check():
    """Inside the block every launch under Triton's interpreter records, per program, the bytes it
    loads, stores (with the values) and updates atomically, and raises :class:`RaceError` after a
    launch in which two programs race: stores of different values to the same bytes, or one
    program reading or plainly writing bytes that another program writes; also after one in which
    a single store sends different values from two lanes of one program to the same element, or
    a lane loads an element another lane of its program stored (no barrier orders them on a GPU).
    Atomic updates of the same bytes by many programs are fine (that is what they are for); so
    are stores of equal values. On a GPU the programs run at once, so such a launch's result
    depends on timing; the interpreter runs them one by one and would hide it. Every access is
    also held to the kernel's tensors (:func:`bounds_check`). Slow (it records every byte
    touched): for small shapes. Needs ``TRITON_INTERPRET=1``."""

    def record(launch, kind, builder, ptrs, mask, value):
        _check_bounds(launch, kind, ptrs, mask)
        launch.setdefault("acc", _Accesses()).add(kind, builder, ptrs, mask, value)

    def verdict(launch):
        found = launch["acc"].conflicts() if "acc" in launch else []
        if found:
            raise RaceError(f"{launch['name']}: " + "; ".join(
                f"{what} at {len(addrs)} bytes of {_owners(addrs, launch['args'])}" for what, addrs in found))

    with _watch(record, verdict):
        yield


@contextlib.contextmanager
def bounds_check():
    """Inside the block every load, store and atomic of a launch under Triton's interpreter is
    checked, before it happens, to lie inside one of the tensors the kernel was given (the span of
    each view), lanes masked off excepted; one that does not raises :class:`OutOfBoundsError`
    naming the kernel, the access and the nearest tensor. On a GPU such an access is an illegal
    address (the CUDA context is lost) or reads another tensor's memory; the interpreter reads or
    writes the process's memory wherever the pointer points, or crashes. Cheap enough to run with
    every test (tests/conftest.py does). Needs ``TRITON_INTERPRET=1``."""
    with _watch(lambda launch, kind, builder, ptrs, mask, value: _check_bounds(launch, kind, ptrs, mask)):
        yield


def _extents(args):
    """(starts, ends): the byte spans of the tensors ``args`` ((name, tensor) pairs), merged
    where they overlap and sorted."""
    import numpy as np

    spans = []
    for _, t in args:
        if t.numel() == 0:
            continue
        last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        spans.append((t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()))
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return np.array([m[0] for m in merged], dtype=np.uint64), np.array([m[1] for m in merged], dtype=np.uint64)


def _check_bounds(launch, kind, ptrs, mask):
    import numpy as np

    addr, _ = _active(ptrs, mask)
    if addr.size == 0:
        return
    if "extents" not in launch:
        launch["extents"] = _extents(launch["args"])
    starts, ends = launch["extents"]
    size = np.uint64(max(1, ptrs.get_element_ty().primitive_bitwidth // 8))
    at = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    inside = (at >= 0) & (addr + size <= ends[np.maximum(at, 0)]) if starts.size else np.zeros(addr.shape, bool)
    if inside.all():
        return
    bad = addr[~inside]
    first = int(bad.min())
    near = min(((abs(first - t.data_ptr()), name, t) for name, t in launch["args"] if t.numel()),
               default=None, key=lambda x: x[0])
    where = "" if near is None else (
        f"; nearest tensor {near[1]} ({near[2].numel()} x {near[2].element_size()} bytes), element "
        f"{(first - near[2].data_ptr()) // near[2].element_size()} of it")
    raise OutOfBoundsError(f"{launch['name']}: a {kind} of {bad.size} element(s) outside every tensor it was "
                           f"given{where}")


def _owners(addrs, args) -> str:
    """The kernel arguments whose memory holds ``addrs`` (with the first element index), for the error."""
    found = {}
    for a in sorted(addrs):
        for name, t in args:
            start = t.data_ptr()
            if start <= a < start + t.numel() * t.element_size():
                found.setdefault(name, (a - start) // t.element_size())
                break
        else:
            found.setdefault("?", a)
    return ", ".join(f"{n} (first at element {i})" for n, i in found.items())
