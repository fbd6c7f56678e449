"""The credit-method registry: a method added by one registration is estimated on every backend and listed
wherever methods are listed."""

from __future__ import annotations

import pytest
import torch

from milegpo.credit import METHODS, CreditMethod, estimate, get_method, method_variants, presets, register
from milegpo.credit.reference import ReferenceTerms
from milegpo.credit.synthetic import random_batch
from milegpo.credit.vectorized import method_tables


def _half_reference(terms: ReferenceTerms) -> list:
    return [0.5 * terms.episode_adv[i] for i in range(len(terms.rows))]


def _half_tables(rows, row_values, config, variant):
    return method_tables("half_grpo", rows, 0.5 * row_values["episode_adv"], row_values)


@pytest.fixture
def half_grpo():
    method = register(CreditMethod("half_grpo", "A = Norm_q(Z) / 2", _half_reference, _half_tables,
                                   row_keys=("episode_score", "episode_adv"),
                                   settings={"half_grpo-webshop-norm": {"norm": "mean"}}))
    try:
        yield method
    finally:
        METHODS.pop("half_grpo")


def test_a_registered_method_is_estimated_on_every_backend_and_listed(half_grpo):
    batch = random_batch(3, 5, 10, seed=4)
    grpo = estimate(batch, "grpo", presets.ALFWORLD, backend="reference").advantages
    for backend in ("reference", "torch"):
        result = estimate(batch, "half_grpo", presets.ALFWORLD, backend=backend)
        torch.testing.assert_close(result.advantages, 0.5 * grpo, rtol=0, atol=1e-12)
        assert tuple(result.rows) == ("episode_score", "episode_adv") and result.nodes == {}
    labels = method_variants()
    assert labels["half_grpo"] == ("half_grpo", "full", {})
    assert labels["half_grpo-webshop-norm"] == ("half_grpo", "full", {"norm": "mean"})
    assert "half_grpo-webshop-norm" not in method_variants(settings=False)

    from milegpo.evidence.quality import estimate_all

    assert "half_grpo" in estimate_all(batch, presets.ALFWORLD, "torch")


def test_the_paper_methods_and_their_labels():
    # the paper's four, then the field's methods of issue 42 (HGPO, G2PO) and 47 (BEACON), in registration order
    assert tuple(METHODS) == ("grpo", "gigpo", "graphgpo", "milegpo", "hgpo", "g2po", "beacon")
    assert list(method_variants()) == ["grpo", "gigpo", "gigpo-verl", "graphgpo", "milegpo-md", "milegpo-rcs",
                                       "milegpo-full", "hgpo", "g2po", "beacon"]
    assert method_variants()["gigpo-verl"] == ("gigpo", "full", {"invalid_penalty_on_step_return": True,
                                                                  "invalid_penalty_in_step_reward": False})


def test_registry_errors_name_the_method():
    with pytest.raises(ValueError, match=r"unknown credit method 'nope'; expected one of \('grpo'"):
        get_method("nope")
    with pytest.raises(ValueError, match="'grpo' is registered already"):
        register(METHODS["grpo"])
    with pytest.raises(TypeError, match="expected a CreditMethod, got dict"):
        register({"name": "x"})
    with pytest.raises(ValueError, match="CreditMethod 'x': needs a name and variants"):
        CreditMethod("x", "", _half_reference, _half_tables, row_keys=(), variants=("best",))
    with pytest.raises(ValueError, match="unknown credit method 'nope'"):
        estimate(random_batch(1, 2, 3, seed=0), "nope")
