"""The credit-method registry: a method added by one registration is estimated on every backend and listed
wherever methods are listed."""

from __future__ import annotations

import pytest
import torch

from milegpo.credit import (METHODS, ConfigField, CreditConfig, CreditMethod, estimate, get_method, method_variants,
                            presets, register, unregister)
from milegpo.credit.config import non_negative
from milegpo.credit.reference import ReferenceTerms
from milegpo.credit.synthetic import random_batch
from milegpo.credit.vectorized import MethodOutput


def _half_reference(terms: ReferenceTerms) -> list:
    return [terms.config.half_weight * terms.episode_adv[i] for i in range(len(terms.rows))]


def _half_tables(rows, row_values, config, variant):
    return MethodOutput(config.half_weight * row_values["episode_adv"], row_values)


@pytest.fixture
def half_grpo():
    """A method registered from this test module, with a CreditConfig field of its own; unregistered after."""
    method = register(CreditMethod("half_grpo", "A = half_weight * Norm_q(Z)", _half_reference, _half_tables,
                                   row_keys=("episode_score", "episode_adv"),
                                   fields=(ConfigField("half_weight", 0.5, "the weight of Norm_q(Z)", float,
                                                       non_negative),),
                                   settings={"half_grpo-webshop-norm": {"norm": "mean"}}))
    try:
        yield method
    finally:
        unregister("half_grpo")
    assert "half_grpo" not in METHODS and not hasattr(presets.ALFWORLD, "half_weight")
    with pytest.raises(ValueError, match=r"unknown CreditConfig field\(s\) \['half_weight'\]"):
        presets.ALFWORLD.replace(half_weight=1.0)


def test_a_registered_method_is_estimated_on_every_backend_and_listed(half_grpo):
    batch = random_batch(3, 5, 10, seed=4)
    grpo = estimate(batch, "grpo", presets.ALFWORLD, backend="reference").advantages
    for backend in ("reference", "torch"):
        result = estimate(batch, "half_grpo", presets.ALFWORLD, backend=backend)
        torch.testing.assert_close(result.advantages, 0.5 * grpo, rtol=0, atol=1e-12)
        assert tuple(result.rows) == ("episode_score", "episode_adv") and result.nodes == {}
        # its own field is a CreditConfig field: every preset has its default, a run may change it
        doubled = estimate(batch, "half_grpo", presets.ALFWORLD.replace(half_weight=1.0), backend=backend)
        torch.testing.assert_close(doubled.advantages, grpo, rtol=0, atol=1e-12)
    assert presets.WEBSHOP.half_weight == 0.5 and CreditConfig(half_weight=2.0).to_dict()["half_weight"] == 2.0
    labels = method_variants()
    assert labels["half_grpo"] == ("half_grpo", "full", {})
    assert labels["half_grpo-webshop-norm"] == ("half_grpo", "full", {"norm": "mean"})
    assert "half_grpo-webshop-norm" not in method_variants(settings=False)

    from milegpo.evidence.quality import estimate_all

    assert "half_grpo" in estimate_all(batch, presets.ALFWORLD, "torch")
    # the field it declares is its own: another method given it refuses, naming the reader
    with pytest.raises(ValueError, match=r"credit method 'gigpo' does not read half_weight \(read by half_grpo\)"):
        estimate(batch, "gigpo", presets.ALFWORLD.replace(half_weight=1.0))


def test_a_registered_method_is_a_choice_of_the_config_and_the_cli(half_grpo, tmp_path):
    from milegpo.job import parse
    from milegpo.job import build_parser
    from milegpo.trainer.config import ConfigError, MileGPOConfig

    base = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True, bf16=False)
    cfg = MileGPOConfig(**base, credit_method="half_grpo", credit_overrides={"half_weight": 1.0})
    assert cfg.credit_config().half_weight == 1.0
    with pytest.raises(ConfigError, match=r"credit method 'milegpo' does not read half_weight \(read by half_grpo\)"):
        MileGPOConfig(**base, credit_overrides={"half_weight": 1.0})
    with pytest.raises(ConfigError, match=r"credit_variant='md': credit method 'half_grpo' has the variant\(s\) full"):
        MileGPOConfig(**base, credit_method="half_grpo", credit_variant="md")
    help_text = next(a.help for a in build_parser()._actions if a.dest == "credit_method")
    assert "half_grpo" in help_text
    _, job_cfg = parse(["--credit_method", "half_grpo", "--credit_overrides", '{"half_weight": 2.0}', "--horizon", "5",
                        "--sft_epochs", "0", "--output_dir", str(tmp_path)])
    assert job_cfg.credit_method == "half_grpo" and job_cfg.credit_config().half_weight == 2.0


def test_adding_a_method_is_the_module_the_docs_show():
    """The "adding a method" code of docs/house.md, run as the module ``milegpo/credit/mine.py`` it says to write
    (the registry's docstring shows the same code): its method is estimated, its field is a CreditConfig field,
    and unregistering it takes both away."""
    import re
    import textwrap
    from pathlib import Path

    from milegpo.credit import registry

    doc = (Path(__file__).resolve().parents[2] / "docs" / "house.md").read_text()
    code = re.search(r"## Where a new credit method goes\n.*?```python\n(.*?)```", doc, re.S).group(1)
    docstring = re.search(r"Adding a method\n-+\n.*?::\n\n(.*?)\n\n[A-Z]", registry.__doc__, re.S).group(1)
    assert textwrap.dedent(docstring).strip() == code.strip()  # one example, shown in two places
    exec(compile(code, "milegpo/credit/mine.py", "exec"), {"__name__": "milegpo.credit.mine",
                                                            "__package__": "milegpo.credit"})
    try:
        batch = random_batch(2, 4, 6, seed=1)
        mine = estimate(batch, "mine", presets.ALFWORLD.replace(mine_weight=2.0), backend="torch").advantages
        grpo = estimate(batch, "grpo", presets.ALFWORLD, backend="torch").advantages
        torch.testing.assert_close(mine, 2.0 * grpo, rtol=0, atol=1e-12)
        assert "mine" in method_variants() and get_method("mine").field_names == ("mine_weight",)
    finally:
        unregister("mine")
    assert "mine" not in METHODS


def _another_value(field: ConfigField):
    """A valid value of ``field`` other than its default."""
    from milegpo.credit.config import check_value

    if field.kind is bool:
        return not field.default
    if isinstance(field.kind, tuple):
        return next(c for c in field.kind if c != field.default)
    candidates = (1 - field.default, field.default + 1) if field.kind is int else (field.default * 0.5 + 0.05,
                                                                                  field.default + 0.3)
    for value in candidates:
        try:
            check_value(field, value)
            return value
        except (TypeError, ValueError):
            continue
    raise AssertionError(f"no other value for {field.name}")


def test_each_method_reads_only_the_fields_it_declares():
    """The declaration is true: a field a method does not declare (nor the episode term's) changes nothing of its
    result, advantages, rows or nodes, on a batch with invalid rows, loops, wins and losses."""
    from milegpo.credit.registry import CONFIG_FIELDS

    from .batches import make_batch

    batch = make_batch(11, n_groups=3, k=5, horizon=8, n_states=4, p_invalid=0.3)
    for name, method in METHODS.items():
        base = estimate(batch, name, presets.ALFWORLD, method.variants[-1], backend="torch")
        unread = [f for f in CONFIG_FIELDS.values() if not method.reads(f.name)]
        assert name == "grpo" or unread, name
        for field in unread:
            config = presets.ALFWORLD.replace(**{field.name: _another_value(field)})
            with pytest.raises(ValueError, match=f"credit method '{name}' does not read {field.name}"):
                estimate(batch, name, config, method.variants[-1], backend="torch")
            other = estimate(batch, name, config.as_preset(), method.variants[-1], backend="torch")
            assert torch.equal(other.advantages, base.advantages), (name, field.name)
            assert all(torch.equal(other.rows[k], base.rows[k]) for k in method.row_keys), (name, field.name)
            assert all(torch.equal(other.nodes[k], base.nodes[k]) for k in method.node_keys), (name, field.name)


def test_the_paper_methods_and_their_labels():
    # the paper's four, then the field's methods of issue 42 (HGPO, G2PO) and 47 (BEACON), in registration order
    assert tuple(METHODS) == ("grpo", "gigpo", "graphgpo", "milegpo", "hgpo", "g2po", "beacon")
    assert list(method_variants()) == ["grpo", "gigpo", "gigpo-verl", "graphgpo", "milegpo-md", "milegpo-rcs",
                                       "milegpo-full", "hgpo", "g2po", "beacon"]
    assert method_variants()["gigpo-verl"] == ("gigpo", "full", {"step_penalty": "return"})


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
    with pytest.raises(ValueError, match=r"credit method 'x' names undeclared CreditConfig field\(s\) \['nope'\]"):
        register(CreditMethod("x", "", _half_reference, _half_tables, row_keys=(), fields=("nope",)))
    with pytest.raises(ValueError, match=r"'x' has settings that change fields it does not read: \['eta'\]"):
        register(CreditMethod("x", "", _half_reference, _half_tables, row_keys=(), settings={"x-eta": {"eta": 1.0}}))
    with pytest.raises(ValueError, match="CreditConfig field 'eta' is declared already"):
        register(CreditMethod("x", "", _half_reference, _half_tables, row_keys=(),
                              fields=(ConfigField("eta", 0.0, "another eta", float),)))
    assert "x" not in METHODS


def test_a_field_with_a_world_default_is_read_by_that_worlds_presets():
    """A method registered after the presets were built (as every method module is) declares a field whose value
    differs per benchmark (BEACON's gamma and w): the presets of that world read it, a config of no world and the
    other world's presets the default, and replace / as_preset / pickling keep the world."""
    import pickle

    method = register(CreditMethod("half_grpo_w", "A = half_w * Norm_q(Z)", _half_reference, _half_tables,
                                   row_keys=("episode_score", "episode_adv"),
                                   fields=(ConfigField("half_w", 0.5, "the weight of Norm_q(Z)", float, non_negative,
                                                       world_defaults=(("webshop", 2.0),)),)))
    try:
        assert method.field_names == ("half_w",)
        assert (presets.WEBSHOP.world, presets.ALFWORLD.world, CreditConfig().world) == ("webshop", "alfworld", None)
        assert presets.WEBSHOP.half_w == presets.WEBSHOP_SPEC.half_w == presets.GIGPO_REFERENCE_WEBSHOP.half_w == 2.0
        assert presets.ALFWORLD.half_w == CreditConfig().half_w == 0.5
        kept = presets.WEBSHOP.replace(eta=0.5)
        assert kept.half_w == 2.0 and kept.world == "webshop" and kept.as_preset().half_w == 2.0
        assert presets.WEBSHOP.replace(half_w=1.0).half_w == 1.0
        assert pickle.loads(pickle.dumps(kept)) == kept and pickle.loads(pickle.dumps(kept)).half_w == 2.0
        assert presets.WEBSHOP != presets.WEBSHOP.replace(half_w=0.5)  # the world's value is part of the preset
    finally:
        unregister("half_grpo_w")
