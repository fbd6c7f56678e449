"""The package's layers: every import, function-local ones included, runs one way, and no circle of files.

Each module of ``milegpo`` and ``milegpo_kernels`` belongs to the unit of :data:`LAYERS` that is the longest
prefix of its dotted name; a module may import its own unit and the units of lower layers, never one of its
own layer or above. :data:`LAYERS` is read from the layer table of docs/house.md (the house's one-page map), so
the map and the test are one list. The order, lowest first, and why:

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
``importlib.import_module`` of a constant), so an upward import cannot hide in a function. Inside a unit, no
circle of files: no module imports, through any chain of imports (function-local and ``TYPE_CHECKING`` ones
included), a module that imports it back. The credit registry imports nothing of ``milegpo.credit`` (it is the leaf every method
registers with). No file outside ``milegpo_kernels`` is over :data:`MAX_LINES` lines unless its docstring says
why. Apart from that, no module outside a package imports one of its private (``_name``) modules, in the tests,
benchmarks and scripts too, and inside ``milegpo_kernels`` a family's ``torch_ops`` never imports its Triton
kernels and no op imports the test machinery.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("milegpo", "milegpo_kernels")
#: the house's map, whose layer table is :data:`LAYERS`
HOUSE = ROOT / "docs" / "house.md"


def read_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The layers of the table under "## The layers" of docs/house.md, lowest first: each row ``| n | `unit`,
    `unit` | ...``, its units the backticked names of its second cell; the rows must be numbered 0, 1, 2..."""
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if re.match(r"^\| *\d+ *\|", line)]
    numbers = [int(number) for number, _ in rows]
    assert numbers == list(range(len(rows))), f"docs/house.md: layer rows numbered {numbers}, expected 0, 1, 2..."
    return tuple(tuple(re.findall(r"`([\w.]+)`", units)) for _, units in rows)


#: the layers, lowest first (docs/house.md's table); a unit imports its own modules and lower layers' only
LAYERS: tuple[tuple[str, ...], ...] = read_layers(HOUSE.read_text())
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
#: the most lines a file outside milegpo_kernels has without a reason at its top
MAX_LINES = 700
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


def test_the_layer_table_is_the_house_map():
    """The table is read from docs/house.md, and it is whole: every package's top unit is in it, once."""
    units = [unit for layer in LAYERS for unit in layer]
    assert len(units) == len(set(units)) and {"milegpo_kernels", "milegpo", "milegpo.credit"} <= set(units)
    assert LAYERS[0] == ("milegpo_kernels",) and LAYERS[-1] == ("milegpo",)
    table = "## The layers\n\n| layer | units |\n| --- | --- |\n| 0 | `a.b`, `c` |\n| 1 | `d` |\n\n## Next\n| 7 | `x` |"
    assert read_layers(table) == (("a.b", "c"), ("d",))


def imports_of_from(path: Path, node: ast.ImportFrom) -> set[str]:
    """The modules ``from m import a, b`` in ``path`` imports: ``m.a`` where that is a module, and ``m`` for a name
    that is not (importing a submodule runs its package's ``__init__`` too: Python's order of loading, not an
    import of that file, so it is not counted)."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[:len(package) - node.level + 1] if node.level else []
    module = ".".join(base + ([node.module] if node.module else []))
    subs = {f"{module}.{alias.name}" for alias in node.names if _is_module(f"{module}.{alias.name}")}
    return subs | ({module} if len(subs) < len(node.names) else set())


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of the packages it imports anywhere (function-local, ``TYPE_CHECKING`` and
    ``import_module`` of a constant included; ``from`` imports as :func:`imports_of_from` reads them)."""
    graph = {}
    for path in package_files():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                targets |= imports_of_from(path, node)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) ==
                  "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
                targets.add(node.args[0].value)
        graph[module_name(path)] = {t for t in targets if t.split(".")[0] in PACKAGES and _is_module(t)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The circles of ``graph``: its strongly connected components of more than one module (or a module that
    imports itself), each a sorted tuple (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(tuple(sorted(component)))
    return sorted(found)


def test_no_circle_of_files():
    """No module imports, through any chain of imports, a module that imports it back (a circle held together by
    imports moved into functions was six files of milegpo.credit, issue 49)."""
    found = circles(import_graph())
    assert not found, "circles of imports (a module imports, however indirectly, one that imports it back):\n" + \
        "\n".join(" -> ".join(c) for c in found)


def test_a_planted_circle_fails_the_circle_test(tmp_path, monkeypatch):
    """The circle test itself: two credit modules that import each other, one of them in a function and the
    other under TYPE_CHECKING, are a circle; a third module importing both is not in it."""
    pkg = tmp_path / "milegpo" / "credit"
    pkg.mkdir(parents=True)
    (tmp_path / "milegpo" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from . import a, b, c\n")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    (pkg / "c.py").write_text("from . import a, b\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("milegpo",))
    graph = import_graph()
    assert graph["milegpo.credit.c"] == {"milegpo.credit.a", "milegpo.credit.b"}
    assert circles(graph) == [("milegpo.credit.a", "milegpo.credit.b")]
    with pytest.raises(AssertionError, match="milegpo.credit.a -> milegpo.credit.b"):
        test_no_circle_of_files()


def test_the_credit_registry_is_a_leaf():
    """milegpo/credit/registry.py imports no module of milegpo.credit: every method registers with it, none is
    imported by it (gymnasium's registration.py imports no environment)."""
    graph = import_graph()
    assert not {t for t in graph["milegpo.credit.registry"] if t.startswith("milegpo.credit")}
    methods = {m for m in graph if m.startswith("milegpo.credit.") and "milegpo.credit.registry" in graph[m]}
    assert {"milegpo.credit.paper", "milegpo.credit.hgpo", "milegpo.credit.g2po"} <= methods


def test_no_file_is_long_without_a_reason():
    """A file outside milegpo_kernels over MAX_LINES lines says why at its top (a docstring line holding "over
    700 lines")."""
    long = []
    for folder in ("milegpo", "tests", "bench", "scripts", "experiments", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).is_dir() else ():
            lines = path.read_text().splitlines()
            where = str(path.relative_to(ROOT))
            if len(lines) > MAX_LINES:
                docstring = ast.get_docstring(ast.parse("\n".join(lines))) or ""
                if f"over {MAX_LINES} lines" not in docstring.lower():
                    long.append(f"{where}: {len(lines)} lines, no reason in its docstring")
    assert not long, "\n".join(long)


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
