"""Stand-ins for methods of Triton's interpreter builder, put back on exit: what the grid-order,
poison and memory checks of :mod:`milegpo_kernels.testing` hook."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def on_builder(replace, over_outer: bool):
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
