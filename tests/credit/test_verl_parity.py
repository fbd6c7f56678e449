"""CreditConfig.step_penalty="return": verl-agent's GiGPO trainer, which also subtracts the
invalid-action penalty from the step return after discounting (``apply_invalid_action_penalty`` on
``step_rewards``), on hand-computed values and on every backend."""

from __future__ import annotations

import math

import pytest
import torch

from milegpo.credit import SINK, CreditConfig, StepBatch, estimate, presets
from milegpo_kernels import interpreter_on

from .batches import make_batch
from .test_estimate import compare

VERL = presets.ALFWORLD.replace(step_penalty="return")
BACKENDS = ["reference", "torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])


def one_step_group(n: int = 23, invalid_row: int = 5) -> StepBatch:
    """One task group of ``n`` failed one-step trajectories from one state (one step group of n rows, every
    return 0); row ``invalid_row`` is invalid."""
    return StepBatch.from_rows([dict(group=0, traj=i, t=0, state=1, next_state=2, success=False, reward=0.0,
                                     invalid=i == invalid_row) for i in range(n)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_group_of_23_rows_with_one_invalid_row(backend):
    # R = -0.1 on the invalid row, 0 elsewhere: mean -0.1 / 23, unbiased std 0.1 / sqrt(23), so the invalid
    # row's step advantage is (-0.1 * 22 / 23) / (0.1 / sqrt(23) + 1e-6) = -4.5871 (verl-agent), milegpo 0
    batch = one_step_group()
    verl = estimate(batch, "gigpo", VERL, backend=backend)
    spec = estimate(batch, "gigpo", presets.ALFWORLD, backend=backend)
    std = 0.1 / math.sqrt(23)
    low, high = (-0.1 * 22 / 23) / (std + 1e-6), (0.1 / 23) / (std + 1e-6)
    assert low == pytest.approx(-4.5871, abs=1e-4)
    want = [low if i == 5 else high for i in range(23)]
    assert verl.rows["step_return"].tolist() == [-0.1 if i == 5 else 0.0 for i in range(23)]
    assert verl.rows["step_adv"].tolist() == pytest.approx(want, rel=1e-12)
    assert spec.rows["step_adv"].tolist() == [0.0] * 23 and spec.rows["step_return"].tolist() == [0.0] * 23
    # the episode term is the same in both (Z = -0.1 on the invalid row: the spec's penalty); to rounding,
    # as the Triton kernels' atomic sums run in another order each call
    torch.testing.assert_close(verl.rows["episode_adv"], spec.rows["episode_adv"], rtol=1e-12, atol=1e-12)
    assert verl.rows["episode_adv"][5].item() == pytest.approx(low, rel=1e-12)
    assert verl.advantages.tolist() == pytest.approx([2 * w for w in want], rel=1e-12)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "reference"])
def test_every_backend_matches_the_reference_with_the_switch(backend):
    for seed, kw in ((0, dict(n_groups=3, k=5, horizon=8, p_invalid=0.4)), (1, dict(n_groups=2, k=4, horizon=6))):
        compare(make_batch(seed, **kw), backend=backend, cases=[("gigpo", "full")],
                presets_={"verl-alfworld": VERL, "verl-webshop": presets.WEBSHOP.replace(
                    step_penalty="return")})


def test_off_by_default_and_only_gigpo_changes():
    assert CreditConfig().step_penalty == "none"
    batch = make_batch(3, n_groups=2, k=4, horizon=6, p_invalid=0.5)
    for method in ("grpo", "graphgpo", "milegpo"):
        with pytest.raises(ValueError, match=f"credit method '{method}' does not read step_penalty"):
            estimate(batch, method, VERL, backend="reference")
        assert torch.equal(estimate(batch, method, VERL.as_preset(), backend="reference").advantages,
                           estimate(batch, method, presets.ALFWORLD, backend="reference").advantages)
    assert not torch.equal(estimate(batch, "gigpo", VERL, backend="reference").rows["step_return"],
                           estimate(batch, "gigpo", presets.ALFWORLD, backend="reference").rows["step_return"])
    with pytest.raises(ValueError, match="step_penalty must be one of"):
        CreditConfig(step_penalty=1)


def test_a_winning_invalid_row_is_never_penalised_twice():
    # the success sink row is valid by construction of the envs; an invalid row before it is penalised once
    batch = StepBatch.from_rows([
        dict(group=0, traj=0, t=0, state=1, next_state=2, success=True, reward=0.0, invalid=True),
        dict(group=0, traj=0, t=1, state=2, next_state=SINK, success=True, reward=10.0, invalid=False)])
    r = estimate(batch, "gigpo", VERL, backend="reference")
    assert r.rows["step_return"].tolist() == pytest.approx([0.95 * 10 - 0.1, 10.0])
