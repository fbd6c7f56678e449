"""The property tests' profile (tests/properties.py): derandomized unless a developer asks to explore, so a red
CI run always means a change broke something (issue 52)."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")

from .properties import PROFILE, examples  # noqa: E402


def test_the_default_profile_is_derandomized_without_a_database():
    if PROFILE != "ci":
        pytest.skip(f"MILEGPO_HYPOTHESIS={PROFILE}: a developer's exploring run")
    current = hypothesis.settings.default
    assert current.derandomize and current.database is None
    assert examples(7) == 7


def test_an_unknown_profile_is_refused(monkeypatch):
    import importlib

    from . import properties

    monkeypatch.setenv("MILEGPO_HYPOTHESIS", "nightly")
    with pytest.raises(ValueError, match="MILEGPO_HYPOTHESIS='nightly': expected one of"):
        importlib.reload(properties)
    monkeypatch.delenv("MILEGPO_HYPOTHESIS")
    importlib.reload(properties)
