"""Served environments: the household world served over OpenEnv's session protocol on loopback, trained against
from 2 trainer processes (torchrun, gloo, CPU): the recipe a cluster user follows with servers on other machines."""

import pytest

pytest.importorskip("websockets")

from milegpo.envs.openenv import serve  # noqa: E402

from .test_trainer import torchrun  # noqa: E402


@pytest.mark.slow
def test_two_trainer_processes_train_against_a_served_household(tmp_path, warm_checkpoint, monkeypatch):
    """Both processes play their groups on one loopback server (each episode its own session) and train one
    iteration; every process's StepBatch is the one it records playing the same tasks locally, bit for bit."""
    with serve("household") as server:
        monkeypatch.setenv("MILEGPO_ENV_URL", server.url)
        served = torchrun(tmp_path / "served", 2, warm_checkpoint, "served")
    monkeypatch.delenv("MILEGPO_ENV_URL")
    local = torchrun(tmp_path / "local", 2, warm_checkpoint, "served")
    for rank in range(2):
        assert served[rank]["global_step"] == local[rank]["global_step"] == 1
        assert served[rank]["kinds"] == ["served-household"] and local[rank]["kinds"] == ["household"]
        assert served[rank]["errors"] == [] and len(served[rank]["batch"]["state"]) > 0
        assert served[rank]["batch"] == local[rank]["batch"], rank
