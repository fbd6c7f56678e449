"""Shared set-up: a private cache folder, a small embedded catalog, the hand-written fixture."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixture"
#: the small catalog of these tests (the embedded default has 3,000 products)
SMALL = {"catalog_size": 300, "catalog_seed": 0, "test_goals": 40}


@pytest.fixture(autouse=True, scope="session")
def _private_cache(private_webshop_cache):
    """Every test here plays in a private cache (tests/conftest.py's ``private_webshop_cache``)."""


@pytest.fixture
def fixture_dir(tmp_path) -> Path:
    """A copy of the hand-written WebShop files (tests may break it)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "webshop-data"))


@pytest.fixture(scope="session")
def small_tasks():
    from milegpo.envs.webshop import webshop_tasks

    return {split: webshop_tasks(split, None, **SMALL) for split in ("train", "test")}
