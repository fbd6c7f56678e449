"""Module paths of milegpo_kernels that moved, kept importable for now.

:data:`MOVED` maps each old dotted path to the new one. :func:`install` (run by the package's
``__init__``) puts a finder first on ``sys.meta_path`` that answers an import of an old path
with the new module itself, registered under the old name as well (``import
milegpo_kernels.triton_segment`` gives ``milegpo_kernels.segment.triton_ops``: the same
objects, so patching one patches the other), and emits a DeprecationWarning naming the new
path. One table, no shim file per old module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old dotted path -> new dotted path (one row per line)
MOVED: dict[str, str] = {
    "milegpo_kernels._common": "milegpo_kernels.inputs",
    "milegpo_kernels._launch_hooks": "milegpo_kernels.testing",
    "milegpo_kernels.graph_build": "milegpo_kernels.graph_layout",
    "milegpo_kernels.rows": "milegpo_kernels.ordering",
    "milegpo_kernels.triton_counting": "milegpo_kernels.counting.triton_ops",
    "milegpo_kernels.triton_graph": "milegpo_kernels.graph.triton_ops",
    "milegpo_kernels.triton_graph_build": "milegpo_kernels.graph_layout.triton_ops",
    "milegpo_kernels.triton_grouping": "milegpo_kernels.grouping.triton_ops",
    "milegpo_kernels.triton_returns": "milegpo_kernels.returns.triton_ops",
    "milegpo_kernels.triton_rows": "milegpo_kernels.ordering.triton_ops",
    "milegpo_kernels.triton_scoring": "milegpo_kernels.scoring.triton_ops",
    "milegpo_kernels.triton_segment": "milegpo_kernels.segment.triton_ops",
    "milegpo_kernels.triton_shaping": "milegpo_kernels.shaping.triton_ops",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {self.new}: import it from there (the old path goes in a later "
                      "release)", DeprecationWarning, stacklevel=_importer_level())
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec  # the import system set the old path's spec: the module keeps its own


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, _MovedLoader(new))


def _importer_level() -> int:
    """The warning's stacklevel that names the code doing the import: past this module and
    ``importlib.import_module`` (``warnings`` itself skips importlib's bootstrap frames)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (_bootstrap(frame) or frame.f_code.co_filename in (__file__, importlib.__file__)):
        level += not _bootstrap(frame)
        frame = frame.f_back
    return level


def _bootstrap(frame) -> bool:
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
