"""milegpo._moved: every old import path of the table still gives the new module's objects."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import subprocess
import sys

import pytest

from milegpo._moved import MOVED, MovedFinder


def _is_module(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package: path names a function
        return False


MODULE_ROWS = sorted((old, new) for old, new in MOVED.items() if _is_module(new))
NAME_ROWS = sorted((old, new) for old, new in MOVED.items() if (old, new) not in MODULE_ROWS)


def test_every_row_has_a_new_home():
    # a table row whose new path is neither a module nor a name of one would pass unseen below
    assert MODULE_ROWS, "no module rows"
    for old, new in NAME_ROWS:
        module, _, name = new.rpartition(".")
        assert _is_module(module), f"{old} -> {new}: {module} is no module"
        assert hasattr(importlib.import_module(module), name), f"{old} -> {new}: {module} has no {name}"
    assert not set(MOVED) & set(MOVED.values()), "a row's new path is another row's old one"


@pytest.mark.parametrize("old, new", MODULE_ROWS)
def test_old_module_path_gives_the_new_module(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)  # import it afresh: the warning comes once
    with pytest.warns(DeprecationWarning, match=f"{old} is now {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new  # the new module, not a copy
    parent, _, child = old.rpartition(".")
    package = importlib.import_module(parent)
    assert getattr(package, child) is module  # `from parent import child` too
    assert importlib.machinery.PathFinder.find_spec(old, package.__path__) is None  # no file left at the old path
    assert MovedFinder().find_spec(old) is not None


@pytest.mark.parametrize("old, new", NAME_ROWS)
def test_old_name_gives_the_new_object(old, new):
    old_module, _, old_name = old.rpartition(".")
    new_module, _, new_name = new.rpartition(".")
    with pytest.warns(DeprecationWarning, match=new):
        got = getattr(importlib.import_module(old_module), old_name)
    assert got is getattr(importlib.import_module(new_module), new_name)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        getattr(importlib.import_module(new_module), "not_a_name")


def test_import_milegpo_stays_light():
    code = "import sys, milegpo; print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
