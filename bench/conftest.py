"""Shared benchmark plumbing: ratios measured in the same run, printed at the end.

A benchmark calls ``record_ratio(name, value)`` (a fixture) after it has run; every
ratio also lands in the benchmark's ``extra_info`` (so it is in --benchmark-json
output) and in a table printed when the session ends.
"""

from __future__ import annotations

import pytest

_RATIOS: list[tuple[str, str, float]] = []
_MEDIANS: dict[str, float] = {}


@pytest.fixture
def medians() -> dict[str, float]:
    """Median seconds of the benchmarks run so far in this session, by a key the benchmark chose."""
    return _MEDIANS


@pytest.fixture
def median_of():
    """``median_of(benchmark)``: its median seconds, or None under ``--benchmark-disable``
    (the function ran once as a smoke test, untimed: no ratio to record)."""
    def median(benchmark) -> float | None:
        stats = benchmark.stats
        return None if stats is None else stats.stats.median

    return median


@pytest.fixture
def record_ratio(request):
    def record(benchmark, name: str, value: float) -> None:
        benchmark.extra_info[name] = value
        _RATIOS.append((request.node.name, name, value))

    return record


def pytest_terminal_summary(terminalreporter):
    if not _RATIOS:
        return
    terminalreporter.section("ratios measured in this run")
    for test, name, value in _RATIOS:
        terminalreporter.write_line(f"{test:<60} {name:<36} {value:10.2f}")
