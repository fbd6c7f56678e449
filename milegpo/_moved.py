"""Old import paths of the ``milegpo`` package, kept working for now (issue 19).

:data:`MOVED` maps an old dotted path to its new one, one row per move. A row names a
module (``milegpo.credit.graphed`` -> ``milegpo.credit.cuda_graph``): importing the old
path gives the new module itself (the same object, so patching one patches the other),
with a :class:`DeprecationWarning` naming the new path; or it names a function or class
renamed in its move (``milegpo.credit.diagnose.format_diagnostics`` ->
``milegpo.credit.diagnostic_metrics.diagnostics_text``): the new module answers the old
name through its ``__getattr__ = moved_names(__name__)`` line, with the same warning.

:func:`install` puts the finder first on :data:`sys.meta_path`; ``milegpo/__init__.py``
calls it. This module imports nothing but the standard library.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old dotted path -> new dotted path (a module, or a name inside a module); one row a line, sorted by old path
MOVED: dict[str, str] = {
    "milegpo.credit.diagnose": "milegpo.credit.diagnostic_metrics",
    "milegpo.credit.diagnose.credit_diagnostics": "milegpo.credit.diagnostic_metrics.diagnostics",
    "milegpo.credit.diagnose.format_diagnostics": "milegpo.credit.diagnostic_metrics.diagnostics_text",
    "milegpo.credit.graphed": "milegpo.credit.cuda_graph",
    "milegpo.main_job": "milegpo.job",
    "milegpo.plots": "milegpo.job.plots",
    "milegpo.tiny": "milegpo.job.policy",
    "milegpo.vllm_sync": "milegpo.trainer.vllm_sync",
}


def _warn(old: str, new: str) -> None:
    """A DeprecationWarning attributed to the first frame outside the import machinery and this module."""
    level, frame = 1, sys._getframe(1)  # stacklevel counts frames from _warn's, skipping importlib's bootstrap
    while frame is not None:
        name = frame.f_code.co_filename
        if not ("importlib" in name and "_bootstrap" in name):  # the frames warnings.warn skips itself
            level += 1
            if name != __file__ and "importlib" not in name:
                break
        frame = frame.f_back
    warnings.warn(f"{old} is now {new}; import it from there (the old path goes in a later release)",
                  DeprecationWarning, stacklevel=level)


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the module rows of :data:`MOVED`: ``import old`` imports ``new`` and binds it under
    the old name too."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        try:
            if importlib.util.find_spec(new) is None:
                return None
        except ModuleNotFoundError:  # a row naming a function: its new path is no module
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None  # a placeholder; exec_module puts the new module in its place

    def exec_module(self, module):
        new = MOVED[module.__name__]
        _warn(module.__name__, new)
        sys.modules[module.__name__] = importlib.import_module(new)  # what the import statement returns


def moved_names(module_name: str):
    """The module ``__getattr__`` that answers the renamed-name rows of :data:`MOVED` whose new
    home is ``module_name`` (reached by its old module path or its new one)."""
    aliases = {module_name} | {old for old, new in MOVED.items() if new == module_name}
    renamed = {old.rpartition(".")[2]: new for old, new in MOVED.items()
               if old.rpartition(".")[0] in aliases and new.rpartition(".")[0] == module_name}

    def __getattr__(name: str):
        if name not in renamed:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        _warn(f"{module_name}.{name}", renamed[name])
        return getattr(sys.modules[module_name], renamed[name].rpartition(".")[2])

    return __getattr__


def install() -> None:
    """Put the finder of :data:`MOVED` first on :data:`sys.meta_path` (once)."""
    if not any(type(f).__name__ == "MovedFinder" and type(f).__module__ == __name__ for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())


__all__ = ["MOVED", "MovedFinder", "install", "moved_names"]
