"""TRL behind one seam: no module of milegpo (nor an example, script or experiment) but :mod:`milegpo.trl_seam`
names a private attribute of TRL, or of the transformers / accelerate objects a GRPOTrainer is made of, and the
seam lists every such name it uses. The tests and benchmarks are left out: they compare with TRL's own methods.

A private name is one TRL (``grpo_trainer.py``, ``base_trainer.py``, the vLLM wrapper, ``chat_template_utils.py``,
``trl/trainer/utils.py``), transformers' ``trainer.py`` or accelerate's ``accelerator.py`` / ``state.py`` defines
with one leading underscore: a method, a class, a module-level name, or an attribute it assigns. Outside the seam
these are refused: importing one, overriding one in a subclass of a TRL / transformers class, reading or writing
one on any object, except a name milegpo defines itself read on ``self`` (``TextEnv._step``), and passing one as a
keyword (a stand-in object's state).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import trl

from milegpo import trl_seam

ROOT = Path(__file__).resolve().parents[2]
#: where a private TRL name may not appear (the tests and benchmarks compare with TRL's own methods)
SCANNED = ("milegpo", "examples", "scripts", "experiments")
SEAM = ROOT / "milegpo" / "trl_seam.py"
OWNERS = ("trl.trainer.grpo_trainer", "trl.trainer.base_trainer", "trl.generation.vllm_generation",
          "trl.chat_template_utils", "trl.trainer.utils", "transformers.trainer", "accelerate.accelerator",
          "accelerate.state")
FOREIGN = ("trl", "transformers", "accelerate")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_private_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, module-level names, attributes it assigns."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(node.name):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
            out.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _private(node.id):
            out.add(node.id)
    return out


def trl_private_names() -> set[str]:
    names = set()
    for module in OWNERS:
        names |= defined_private_names(ast.parse(Path(importlib.util.find_spec(module).origin).read_text()))
    return names


def _foreign_bases(tree: ast.AST) -> set[str]:
    """The names of the classes a module imports from TRL / transformers / accelerate, and of milegpo's trainers."""
    names = {"GRPOHooks", "MileGPOTrainer"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FOREIGN:
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def private_uses(path: Path, private: set[str], own: set[str]) -> list[str]:
    """Where ``path`` uses one of ``private`` (see the module docstring); ``own``: the private names milegpo itself
    defines, allowed on ``self``."""
    tree = ast.parse(path.read_text(), str(path))
    bases = _foreign_bases(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FOREIGN:
            found += [f"{path}:{node.lineno} imports {node.module}.{a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.ClassDef):
            derived = any((b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")) in bases for b in node.bases)
            for item in node.body if derived else ():
                targets = ([item.name] if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else
                           [t.id for t in getattr(item, "targets", [getattr(item, "target", None)])
                            if isinstance(t, ast.Name)])
                found += [f"{path}:{item.lineno} overrides {name} in {node.name}" for name in targets
                          if name in private]
        elif isinstance(node, ast.Attribute) and node.attr in private:
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not (on_self and node.attr in own):
                found.append(f"{path}:{node.lineno} uses .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in private and node.arg not in own:  # a stand-in's state
            found.append(f"{path}:{getattr(node, 'lineno', '?')} passes {node.arg}=")
    return found


def _scanned_files() -> list[Path]:
    return [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py")) if p != SEAM]


def test_every_private_trl_name_goes_through_the_seam():
    private = trl_private_names()
    files = _scanned_files()
    own = set()
    for path in files:
        if path.is_relative_to(ROOT / "milegpo"):
            own |= defined_private_names(ast.parse(path.read_text()))
    found = [use for path in files for use in private_uses(path, private, own)]
    assert not found, "private TRL names outside milegpo/trl_seam.py (add a function there):\n" + "\n".join(found)


def test_the_seam_lists_every_private_name_it_uses():
    private = trl_private_names()
    tree = ast.parse(SEAM.read_text())
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in private}
    used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names if _private(a.name)}
    used |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg in private}
    used |= {item.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
             for item in n.body if isinstance(item, ast.FunctionDef) and item.name in private}
    used |= {t.id for n in ast.walk(tree) if isinstance(n, ast.ClassDef) for item in n.body
             if isinstance(item, ast.Assign) for t in item.targets if isinstance(t, ast.Name) and t.id in private}
    listed = {name for names in trl_seam.PRIVATE_NAMES.values() for name in names}
    assert used - listed == set(), f"used in trl_seam.py but not in PRIVATE_NAMES: {sorted(used - listed)}"
    assert listed - used == set(), f"listed in PRIVATE_NAMES but not used: {sorted(listed - used)}"
    assert listed <= private, f"listed but not a private name of TRL / transformers / accelerate: {listed - private}"


def test_the_scan_finds_a_planted_private_use(tmp_path):
    """The scan itself: a private import, an override of a private hook, a read of GRPOTrainer's state on another
    object and on ``self`` (a name milegpo does not define) are each found; milegpo's own name on self is not."""
    planted = tmp_path / "planted.py"
    planted.write_text("from trl import GRPOTrainer\nfrom trl.chat_template_utils import _validate_tool_calls\n\n"
                       "class Mine(GRPOTrainer):\n    _name = 'x'\n\n    def _prepare_inputs(self, inputs):\n"
                       "        self._step += 1\n        return self._own(inputs)\n\n"
                       "def f(trainer):\n    return trainer._metrics['train']\n")
    private = trl_private_names()
    found = [re.sub(r"^.*?:\d+ ", "", use) for use in private_uses(planted, private, own={"_own", "_step"})]
    assert found == ["imports trl.chat_template_utils._validate_tool_calls", "overrides _name in Mine",
                     "overrides _prepare_inputs in Mine", "uses ._metrics"], found
    found = [re.sub(r"^.*?:\d+ ", "", use) for use in private_uses(planted, private, own=set())]
    assert "uses ._step" in found and len(found) == 5, found  # a name milegpo does not define, on self too


def test_trl_is_pinned_to_the_tested_release():
    """pyproject's TRL range is the release the seam was checked against, and it is the one installed."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    major, minor = trl_seam.TESTED_TRL
    assert f'"trl>={major}.{minor},<{major}.{minor + 1}"' in pyproject
    assert trl_seam.trl_version_mismatch(trl.__version__) is None
