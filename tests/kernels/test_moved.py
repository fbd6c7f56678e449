"""Every old module path of milegpo_kernels (the table in milegpo_kernels/_moved.py) still imports:
as the new module itself, with a DeprecationWarning naming the new path and the importing code."""

import importlib
import sys

import pytest

from milegpo_kernels._moved import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_old_path_gives_the_new_module(old, new):
    sys.modules.pop(old, None)  # a fresh import of the old path, whatever ran before
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}") as caught:
        module = importlib.import_module(old)
    assert [w.filename for w in caught if issubclass(w.category, DeprecationWarning)] == [__file__]
    assert module is importlib.import_module(new) and module.__name__ == module.__spec__.name == new
    assert sys.modules[old] is module
    parent, _, name = old.rpartition(".")
    assert getattr(importlib.import_module(parent), name) is module  # `import old as x` / `old.attr` work too


def test_paths_that_never_moved_are_not_answered():
    from milegpo_kernels._moved import _MovedFinder

    assert _MovedFinder().find_spec("milegpo_kernels.no_such_module") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("milegpo_kernels.no_such_module")
