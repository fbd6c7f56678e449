"""The package's layers: what importing it costs."""

from __future__ import annotations

import subprocess
import sys


def test_import_milegpo_stays_light():
    code = "import sys, milegpo; print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
