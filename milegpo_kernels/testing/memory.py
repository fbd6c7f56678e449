"""Memory checks under Triton's interpreter: garbage where a GPU leaves garbage, and every access
held to the kernel's tensors and to the other programs' and lanes'.

:func:`bounds_check` holds every access to the tensors the kernel was given and
:func:`poison_masked_loads` gives masked-off lanes NaN / garbage instead of 0 (both on with every
test: tests/conftest.py); :func:`garbage_empty` fills ``torch.empty`` with the same garbage
(the kernel tests: tests/kernels/conftest.py); :func:`race_check` fails a launch whose programs
race on memory (tests/kernels/test_races.py), and also one in which the lanes of one program
race: a store sending different values from several lanes to one element (the interpreter's
last lane wins; a GPU's is unspecified), or a lane loading an element another lane stored
earlier (no barrier orders them on a GPU; the interpreter runs a block's lanes as one array
operation, so the load always sees the store). A lane loading what another lane updated
atomically is allowed: the graph relaxations read their neighbours' latest values on purpose
(Gauss-Seidel), and settle in a later sweep what a sweep missed.
"""

from __future__ import annotations

import contextlib

from .interpreter import on_builder

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

    with on_builder({"create_masked_load": make}, over_outer=True):
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
        with on_builder(hooks, over_outer=True):
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


@contextlib.contextmanager
def garbage_empty():
    """Inside the block ``torch.empty`` / ``torch.empty_like`` return tensors filled with NaN (floats),
    True (bools) or :data:`POISON_INT` (integers, the type's minimum where that is smaller), so a
    kernel that forgets to write an output element fails instead of passing by luck."""
    import torch

    empty, empty_like = torch.empty, torch.empty_like

    def fill(t):
        if t.dtype.is_floating_point:
            return t.fill_(float("nan"))
        if t.dtype == torch.bool:
            return t.fill_(True)
        return t.fill_(max(POISON_INT, torch.iinfo(t.dtype).min))

    torch.empty = lambda *args, **kwargs: fill(empty(*args, **kwargs))
    torch.empty_like = lambda *args, **kwargs: fill(empty_like(*args, **kwargs))
    try:
        yield
    finally:
        torch.empty, torch.empty_like = empty, empty_like
