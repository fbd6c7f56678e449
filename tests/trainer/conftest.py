import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from warm_checkpoints import build_warm_checkpoint  # noqa: E402


@pytest.fixture(scope="session")
def warm_checkpoint(tmp_path_factory):
    """A warm-started tiny Qwen2 + tokenizer on disk. MILEGPO_TINY_CACHE=<dir> reuses one across sessions."""
    path = os.environ.get("MILEGPO_TINY_CACHE") or str(tmp_path_factory.mktemp("tiny") / "model")
    return build_warm_checkpoint(path)
