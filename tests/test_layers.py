"""The package's layers: every import, function-local ones included, runs one way.

Each module of ``milegpo`` and ``milegpo_kernels`` belongs to the unit of :data:`LAYERS` that is the longest
prefix of its dotted name; a module may import its own unit and the units of lower layers, never one of its
own layer or above. The order, lowest first, and why:

- ``milegpo_kernels``: tensor ops, no milegpo, no TRL (the credit pipeline and the policy loss run on them);
- ``state_keys`` / ``usage`` / ``files``: a state's key, the one-line usage error, whole-or-nothing file writes, the
  standard library only; ``trl_seam``: every private name of TRL milegpo touches (TRL only, no milegpo module);
- ``state_sketches``: shingles and MinHash sketches of observations (near-duplicate states), on the keys;
- ``credit``: advantages of a StepBatch (the algorithm), no environment, no rollout, no config;
- ``envs``: the worlds; ``rollout``: episodes of the worlds into StepBatches;
- ``trainer``: MileGPOConfig and MileGPOTrainer (TRL), which play rollouts and estimate credit;
- ``job``: ``milegpo train`` / ``eval`` around the trainer;
- ``evidence``: the ground-truth tools, which play saved policies with the job's own flags and trainer;
- ``cli``: the ``milegpo`` command; ``milegpo`` itself: the package's lazy names.

The imports are read with :mod:`ast` (every ``import`` and ``from ... import`` anywhere in a module, and
``importlib.import_module`` of a constant), so an upward import cannot hide in a function. Apart from that,
no module outside a package imports one of its private (``_name``) modules, in the tests, benchmarks and
scripts too, and inside ``milegpo_kernels`` a family's ``torch_ops`` never imports its Triton kernels and no
op imports the test machinery.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("milegpo", "milegpo_kernels")
#: the layers, lowest first; a unit imports its own modules and lower layers' only
LAYERS: tuple[tuple[str, ...], ...] = (
    ("milegpo_kernels",),
    ("milegpo.state_keys", "milegpo.usage", "milegpo.files", "milegpo.trl_seam"),
    ("milegpo.state_sketches",),
    ("milegpo.credit",),
    ("milegpo.envs",),
    ("milegpo.rollout",),
    ("milegpo.trainer",),
    ("milegpo.job",),
    ("milegpo.evidence",),
    ("milegpo.cli",),
    ("milegpo",),
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
#: the folders besides the packages whose imports of private modules are checked
OTHER_CODE = ("tests", "bench", "scripts", "experiments", "examples")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, int]]:
    """(dotted name, line) of everything ``path`` imports: modules, and for ``from m import a`` both ``m`` and
    ``m.a`` (``a`` may be a submodule); relative imports resolved."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [(module, node.lineno)] + [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
              and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.args[0].value, node.lineno))
    return out


def unit_of(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RANK:
            return ".".join(parts[:n])
    raise KeyError(module)


def package_files():
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def test_every_module_has_a_layer():
    homeless = [module_name(p) for p in package_files()
                if unit_of(module_name(p)) == "milegpo" and module_name(p) != "milegpo"]
    assert not homeless, f"modules in no layer of LAYERS (add their unit where it belongs): {homeless}"


def test_imports_run_down_the_layers():
    upward = []
    for path in package_files():
        source = unit_of(module_name(path))
        for target, line in imports(path):
            if target.split(".")[0] not in PACKAGES:
                continue
            unit = unit_of(target)
            if unit != source and RANK[unit] >= RANK[source]:
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {target} ({source} -> {unit})")
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_the_layer_test_sees_function_local_and_relative_imports(tmp_path, monkeypatch):
    """The reader itself: an import inside a function, a relative one and an import_module are all found."""
    pkg = tmp_path / "milegpo" / "credit"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("import os\n\ndef f():\n    from ..job import parse\n    from . import batch\n"
                                "    importlib.import_module('milegpo.trainer')\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = {name for name, _ in imports(pkg / "mod.py")}
    assert {"os", "milegpo.job", "milegpo.job.parse", "milegpo.credit", "milegpo.credit.batch",
            "milegpo.trainer"} <= found
    assert unit_of("milegpo.job.parse") == "milegpo.job" and RANK["milegpo.job"] > RANK["milegpo.credit"]


def _private_part(module: str) -> str | None:
    """The dotted prefix of ``module`` up to its first private (``_name``, not dunder) part, or None."""
    parts = module.split(".")
    for n, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:n + 1])
    return None


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _owner(private: str) -> str:
    """The package a private module or name belongs to: a module's package, or the package of the module that
    defines the name."""
    parent = private.rpartition(".")[0]
    if _is_module(private) or (ROOT.joinpath(*parent.split(".")) / "__init__.py").is_file():
        return parent
    return parent.rpartition(".")[0]


def test_no_private_module_is_imported_from_outside_its_package():
    """In the packages no private module or name is imported from outside its package; in the tests,
    benchmarks, scripts and experiments no private module is, but by its own test (``_x`` by ``test_x.py``)."""
    outside = []
    for path in package_files():
        here = module_name(path)
        for target, line in imports(path):
            private = _private_part(target)
            if target.split(".")[0] in PACKAGES and private is not None:
                owner = _owner(private)
                if not (here == owner or here.startswith(owner + ".")):
                    outside.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    for path in [p for d in OTHER_CODE if (ROOT / d).is_dir() for p in sorted((ROOT / d).rglob("*.py"))]:
        for target, line in imports(path):
            private = _private_part(target)
            if (target.split(".")[0] in PACKAGES and private is not None and _is_module(private)
                    and path.stem != "test" + private.rpartition(".")[2]):
                outside.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not outside, "private modules imported from outside their package:\n" + "\n".join(outside)


def test_kernel_families_keep_their_inner_order():
    """A family's torch twins never import its Triton kernels, and no op imports :mod:`milegpo_kernels.testing`."""
    wrong = []
    for path in sorted((ROOT / "milegpo_kernels").rglob("*.py")):
        here = module_name(path)
        for target, line in imports(path):
            if here.endswith(".torch_ops") and target.startswith(here.rpartition(".")[0] + ".triton_ops"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} (torch twin -> Triton kernel)")
            if target.startswith("milegpo_kernels.testing") and not here.startswith("milegpo_kernels.testing"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} (an op -> the test machinery)")
    assert not wrong, "\n".join(wrong)


def test_import_milegpo_stays_light():
    code = "import sys, milegpo; print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_config_does_not_load_the_trainer():
    """``milegpo.trainer`` names its classes lazily: the config (the CLI's flags) does not import the trainer."""
    code = ("import sys; from milegpo.trainer.config import MileGPOConfig; "
            "print('milegpo.trainer.milegpo_trainer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
