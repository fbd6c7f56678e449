"""Every Triton kernel variant the project launches compiles for sm_90 (H100/H200).

The interpreter runs kernels as Python, so it cannot see errors of compiled mode;
scripts/compile_kernels.py records the launches under the interpreter and compiles
each one with Triton's front end and ptxas, which needs no GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compile_kernels.py"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                    reason="on a GPU the compiled kernels run for real in the other kernel tests")
def test_all_kernels_compile_for_sm90():
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "FAIL" not in proc.stdout
    assert "kernel variants compiled for sm_90" in proc.stdout
