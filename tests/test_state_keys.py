"""milegpo.state_keys: the one definition of SINK and the state key, shared by the envs and credit."""

from __future__ import annotations

import subprocess
import sys

import milegpo.credit
import milegpo.credit.batch
import milegpo.envs
import milegpo.envs.base
from milegpo import state_keys


def test_envs_and_credit_reexport_the_one_definition():
    for module in (milegpo.envs, milegpo.envs.base, milegpo.credit, milegpo.credit.batch):
        # the same int object: a second definition (another literal) would be another object
        assert module.SINK is state_keys.SINK and module.SINK == (1 << 63) - 1, module.__name__
        assert "SINK" in module.__all__, module.__name__
    for module in (milegpo.envs, milegpo.envs.base):
        assert module.state_key is state_keys.state_key and module.canonical_state is state_keys.canonical_state


def test_state_keys_imports_no_torch():
    code = "import sys, milegpo.state_keys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
