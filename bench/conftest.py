"""Shared benchmark plumbing: ratios measured in the same run, printed at the end.

A benchmark calls ``record_ratio(name, value)`` (a fixture) after it has run; every
ratio also lands in the benchmark's ``extra_info`` (so it is in --benchmark-json
output) and in a table printed when the session ends.
"""

from __future__ import annotations

import os

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


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a live process has used so far (/proc/<pid>/stat; Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def cpu_s():
    """``cpu_s(pid)``: :func:`process_cpu_s` (the CPU time of an environment pool's worker, say)."""
    return process_cpu_s


@pytest.fixture
def load_average() -> float:
    """The machine's 1-minute load average when the benchmark starts (a figure means little without it)."""
    return os.getloadavg()[0]


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
