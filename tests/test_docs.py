"""The project's own docs: every ``docs/<name>.md`` the code, notes and README cite is in the repository,
and every ``spec section N`` the code cites is a section of docs/algorithm.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITING = ("milegpo", "milegpo_kernels", "tests", "bench", "scripts", "experiments", "examples", "notes", "docs")


def _texts():
    files = [ROOT / "README.md"] + [p for d in CITING if (ROOT / d).is_dir() for p in sorted((ROOT / d).rglob("*"))
                                     if p.suffix in (".py", ".md")]
    return [(p, p.read_text(errors="replace")) for p in files]


def test_every_cited_doc_is_in_the_repository():
    missing = sorted({f"{p.relative_to(ROOT)} cites {m}" for p, text in _texts()
                      for m in re.findall(r"(?<![\w/.])docs/[\w.-]+\.md", text) if not (ROOT / m).is_file()})
    assert not missing, "\n".join(missing)


def test_every_cited_spec_section_exists():
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "algorithm.md").read_text(), re.M))
    cited = {(p.relative_to(ROOT), n) for p, text in _texts() if p.suffix == ".py"
             for n in re.findall(r"spec sections? (\d+)", text)}
    assert sections and not {c for c in cited if c[1] not in sections}
