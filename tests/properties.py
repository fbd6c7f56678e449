"""Hypothesis profiles for the property tests, loaded by ``tests/conftest.py``.

- ``ci`` (the default, what the README's ``pytest`` and ``.ci/run`` use): derandomized, no example database.
  The examples are a function of each test's source, so a red run always means a change broke something,
  and the same run is red on every machine.
- ``explore`` (``MILEGPO_HYPOTHESIS=explore pytest tests/kernels tests/credit``): random examples, ten times
  as many, the example database in ``.hypothesis/`` so a failure found once is replayed first next time.
  Hypothesis prints a falsifying example as a ``@reproduce_failure`` blob; add it as an ``@example`` or a
  fixed test before fixing the cause.
"""

from __future__ import annotations

import os

PROFILE = os.environ.get("MILEGPO_HYPOTHESIS", "ci")
PROFILES = ("ci", "explore")
if PROFILE not in PROFILES:
    raise ValueError(f"MILEGPO_HYPOTHESIS={PROFILE!r}: expected one of {PROFILES}")

#: how many times a test's own example budget the profile runs
SCALE = {"ci": 1, "explore": 10}[PROFILE]


def examples(n: int) -> int:
    """A test's example budget under the loaded profile: ``n`` in CI, ``10 * n`` when exploring."""
    return n * SCALE


def load() -> None:
    """Register both profiles and load the one ``$MILEGPO_HYPOTHESIS`` names (``ci`` when unset)."""
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # a dev extra; without it the property tests are not defined
        return
    quiet = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
    settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                              suppress_health_check=quiet)
    settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True,
                              suppress_health_check=quiet)
    settings.load_profile(PROFILE)
