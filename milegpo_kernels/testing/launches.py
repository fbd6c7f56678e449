"""Hooks on the package's Triton kernels under Triton's interpreter (CPU): every launch reported,
and whether one is running.

:func:`hooked_kernels` replaces every interpreted kernel of the Triton modules (found by
name: each op family's ``triton_ops``, the shared helpers and the fused policy loss, so a new
family needs no list updated) by a stand-in that calls ``on_launch(module, name, kernel, args,
kwargs)`` before each ``kernel[grid](...)`` launch; a call of a ``@triton.jit`` helper from inside
another kernel passes straight through. :func:`in_kernel` tells whether a launch is running
(torch ops the interpreter runs for a kernel are not the caller's). Used by
``scripts/compile_kernels.py``, ``scripts/credit_op_count.py`` and :func:`no_host_reads`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil

_DEPTH = [0]


def triton_modules() -> list[str]:
    """The modules holding the package's Triton code: each op family's ``triton_ops``, the shared
    helpers, the fused policy loss."""
    import milegpo_kernels

    root = milegpo_kernels.__path__[0]
    families = sorted(m.name for m in pkgutil.iter_modules([root])
                      if m.ispkg and os.path.exists(os.path.join(root, m.name, "triton_ops.py")))
    return [f"milegpo_kernels.{f}.triton_ops" for f in families] + ["milegpo_kernels.triton_helpers",
                                                                       "milegpo_kernels.policy_loss.fused"]


def in_kernel() -> bool:
    """Whether a hooked kernel launch (:func:`hooked_kernels`) is running."""
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
