"""milegpo.trainer.trl_mirror (and the pieces of milegpo.trl_seam that mirror TRL's bookkeeping) against TRL's own
GRPOTrainer: every piece on the same inputs.

TRL keeps these pieces inline in big private methods, so each test runs the TRL method on a tiny
GRPOTrainer (a tiny Qwen2 built on the spot, generation stubbed with fixed completions and sampler
log-probs) and compares its output with the mirror's on the same tensors. A TRL release that changes
one of them fails here; ``test_the_mirrored_trl_is_the_installed_one`` fails on any other TRL release.
"""

import contextlib

import pytest
import torch
import transformers
import trl
import trl.trainer.grpo_trainer as trl_grpo_trainer
import trl.trainer.utils as trl_utils
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from milegpo.job.policy import make_model, make_tokenizer
from milegpo import trl_seam
from milegpo.trainer import trl_mirror

torch.set_num_threads(1)

ROWS = 8  # completions per generation batch: 4 prompts x num_generations 2


def completion_length(completions, **kwargs):
    """Reward of the tiny trainer (any number does: the tests compare log-probs, ratios and losses)."""
    return [float(len(c)) for c in completions]


@pytest.fixture(scope="module")
def grpo(tmp_path_factory):
    """A GRPOTrainer on a tiny Qwen2 (beta != 0: with a reference model, perturbed so that it differs from
    the policy) whose generation returns fixed completions and sampler log-probs (``trainer.stub``)."""
    path = str(tmp_path_factory.mktemp("grpo") / "model")
    tok = make_tokenizer(n_tasks=2)
    make_model(tok).save_pretrained(path)
    tok.save_pretrained(path)
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("grpo-out")), report_to="none", use_cpu=True,
                      bf16=False, per_device_train_batch_size=ROWS, num_generations=2, max_completion_length=6,
                      beta=0.04, save_strategy="no", logging_steps=1, seed=0)
    prompts = ["look around", "go to sofa 1", "open the drawer", "take the key"]
    trainer = GRPOTrainer(model=path, reward_funcs=completion_length, args=args, processing_class=tok,
                          train_dataset=Dataset.from_dict({"prompt": prompts}))
    with torch.no_grad():
        for p in trainer.ref_model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    gen = torch.Generator().manual_seed(0)
    vocab, eos = len(tok), tok.eos_token_id
    completions, logprobs = [], []
    for i in range(ROWS):
        ids = torch.randint(10, vocab, (2 + i % 4,), generator=gen).tolist()
        if i % 2:
            ids[-1] = eos
        completions.append(ids)
        lp = (-5.7 + 2.0 * (torch.rand(len(ids), generator=gen) - 0.5)).tolist()
        logprobs.append([None if (i == 3 and j == 0) else x for j, x in enumerate(lp)])  # one token unscored
    trainer.stub = {"inputs": [{"prompt": p} for p in prompts for _ in range(2)], "completions": completions,
                    "logprobs": logprobs}
    trainer._generate_single_turn = lambda prompt_ids, *a, **kw: (completions, logprobs)
    trainer.model.train()
    return trainer


def generate(trainer):
    """TRL's ``_generate_and_score_completions`` on the stubbed generation batch, with fresh metrics."""
    trainer._metrics["train"].clear()
    return trainer._generate_and_score_completions(trainer.stub["inputs"])


def model_inputs(out):
    return (torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1),
            torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1), out["completion_ids"].size(1))


def policy_logps(trainer, out):
    """The policy's per-token log-probs of the rows of ``out`` (TRL's ``_get_per_token_logps_and_entropies``)."""
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, *model_inputs(out), batch_size=trainer.args.per_device_train_batch_size)
    return logps


def mirrored_reference_logps(trainer, out):
    with torch.no_grad():
        return trl_seam.reference_logps(trainer, *model_inputs(out), trainer.args.per_device_train_batch_size)


def test_the_mirrored_trl_is_the_installed_one():
    """The TRL installed is the release the seam and the mirror were checked against (pyproject pins it); any
    other release is named at start, with what to do."""
    assert trl_seam.trl_version_mismatch(trl.__version__) is None, trl_seam.trl_version_mismatch(trl.__version__)
    assert trl_seam.TESTED_TRL == (1, 16)
    for version in ("1.16.0", "1.16.4", "1.16.0.dev0"):
        assert trl_seam.trl_version_mismatch(version) is None, version
    for version in ("1.17.0", "1.17.0.dev0", "2.0.0", "1.15.2", "0.29.1"):
        message = trl_seam.trl_version_mismatch(version)
        assert message and f"TRL {version} is not TRL 1.16" in message and "TESTED_TRL" in message


@pytest.mark.parametrize("mode, clip_min, clip_max", [
    ("token_truncate", 0.5, 2.0), ("token_mask", 0.5, 2.0), ("sequence_truncate", 0.2, 3.0),
    ("sequence_mask", 0.2, 3.0), ("token_mask", None, 2.0), ("sequence_truncate", 0.5, None)])
def test_vllm_importance_sampling_ratio_and_logp_gap_equal_trls(grpo, monkeypatch, mode, clip_min, clip_max):
    monkeypatch.setattr(grpo, "use_vllm", True)
    monkeypatch.setattr(grpo, "vllm_importance_sampling_correction", True)
    monkeypatch.setattr(grpo, "vllm_importance_sampling_mode", mode)
    monkeypatch.setattr(grpo, "vllm_importance_sampling_clip_min", clip_min)
    monkeypatch.setattr(grpo, "vllm_importance_sampling_clip_max", clip_max)
    monkeypatch.setattr(grpo, "beta", 0.0)
    out = generate(grpo)
    old, sampling, mask = out["old_per_token_logps"], out["sampling_per_token_logps"], out["completion_mask"]
    assert torch.isnan(sampling).any()  # the unscored token: ratio 1 there, left out of the gap
    ratio = trl_mirror.vllm_importance_sampling_ratio(old, sampling, mask, mode, clip_min, clip_max)
    assert torch.equal(ratio, out["importance_sampling_ratio"])
    # the data reach both sides of the clipping (inside and outside [clip_min, clip_max])
    raw = trl_mirror.vllm_importance_sampling_ratio(old, sampling, mask, mode.split("_")[0] + "_mask", None, None)
    raw = raw[mask.bool()] if mode.startswith("token") else raw.flatten()
    outside = (raw < (clip_min or 0.0)) | (raw > (clip_max or float("inf")))
    assert outside.any() and not outside.all()
    gap = trl_mirror.sampling_logp_difference(old, sampling, mask)
    assert grpo._metrics["train"][trl_mirror.SAMPLING_LOGP_DIFFERENCE] == [gap.item()]


def test_an_unknown_importance_sampling_mode_is_refused():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="Unknown vLLM importance sampling level: tok"):
        trl_mirror.vllm_importance_sampling_ratio(x, x, x, "tok", None, None)


@pytest.mark.parametrize("use_vllm, accumulation, steps_per_generation, iterations", [
    (False, 1, 1, 1), (False, 2, 2, 1), (False, 2, 1, 1), (False, 4, 2, 2), (False, 1, 1, 2), (True, 1, 1, 1)])
def test_old_logps_are_computed_where_trl_computes_them(grpo, monkeypatch, use_vllm, accumulation,
                                                        steps_per_generation, iterations):
    monkeypatch.setattr(grpo, "use_vllm", use_vllm)
    monkeypatch.setattr(grpo, "vllm_importance_sampling_correction", True)
    monkeypatch.setattr(grpo.args, "gradient_accumulation_steps", accumulation)
    monkeypatch.setattr(grpo.args, "steps_per_generation", steps_per_generation)
    monkeypatch.setattr(grpo, "num_iterations", iterations)
    monkeypatch.setattr(grpo, "beta", 0.0)
    out = generate(grpo)
    assert ("old_per_token_logps" in out) is trl_mirror.needs_old_logps(grpo)
    if "old_per_token_logps" in out:
        assert torch.equal(policy_logps(grpo, out), out["old_per_token_logps"])


def test_reference_logps_equal_trls_with_a_reference_model(grpo, monkeypatch):
    monkeypatch.setattr(grpo, "use_vllm", False)
    out = generate(grpo)
    ref = mirrored_reference_logps(grpo, out)
    assert torch.equal(ref, out["ref_per_token_logps"])
    assert not torch.allclose(ref, policy_logps(grpo, out))  # the reference model is not the policy


@pytest.mark.parametrize("adapters, expected_name", [(["default"], None), (["default", "ref"], "ref")])
def test_reference_logps_equal_trls_with_a_peft_adapter(grpo, monkeypatch, adapters, expected_name):
    """No reference model (PEFT): the policy under TRL's ``use_adapter`` (adapter disabled, or the ``ref``
    adapter). A stand-in ``use_adapter`` records the adapter asked for and changes the policy in its block."""
    entered = []
    model = grpo.accelerator.unwrap_model(grpo.model)

    @contextlib.contextmanager
    def use_adapter(peft_model, adapter_name):
        assert peft_model is model
        entered.append(adapter_name)
        norm = peft_model.model.norm.weight
        with torch.no_grad():
            norm.mul_(0.5)
        try:
            yield
        finally:
            with torch.no_grad():
                norm.mul_(2.0)

    monkeypatch.setattr(grpo, "use_vllm", False)
    monkeypatch.setattr(grpo, "ref_model", None)
    monkeypatch.setattr(model, "peft_config", {name: None for name in adapters}, raising=False)
    monkeypatch.setattr(trl_grpo_trainer, "use_adapter", use_adapter)
    monkeypatch.setattr(trl_utils, "use_adapter", use_adapter)
    out = generate(grpo)
    ref = mirrored_reference_logps(grpo, out)
    assert entered == [expected_name, expected_name]  # TRL's call, then the mirror's
    assert torch.equal(ref, out["ref_per_token_logps"]) and not torch.allclose(ref, policy_logps(grpo, out))


class ClaimedProcesses:
    """The trainer's accelerator, claiming ``n`` processes (the loss divides by it; gathers stay local)."""

    def __init__(self, accelerator, n):
        self._accelerator, self.num_processes = accelerator, n

    def __getattr__(self, name):
        return getattr(self._accelerator, name)


def trl_loss(trainer, monkeypatch, out, loss_type, num_items=None, accumulation=1, training=True):
    monkeypatch.setattr(trainer, "loss_type", loss_type)
    monkeypatch.setattr(trainer, "current_gradient_accumulation_steps", accumulation, raising=False)
    inputs = {**out, "advantages": torch.linspace(-1.0, 2.0, ROWS)}
    if num_items is not None:
        inputs["num_items_in_batch"] = torch.tensor(float(num_items))
    trainer.model.train(training)
    try:
        with torch.no_grad():
            return trainer._compute_loss(trainer.model, inputs)
    finally:
        trainer.model.train()


@pytest.fixture
def loss_inputs(grpo, monkeypatch):
    monkeypatch.setattr(grpo, "use_vllm", False)
    monkeypatch.setattr(grpo, "beta", 0.0)
    return generate(grpo)


@pytest.mark.parametrize("processes, accumulation, steps_per_generation, training, num_items", [
    (1, 1, 1, True, 37), (4, 3, 2, True, 37), (2, 2, 4, True, 0), (4, 3, 2, False, 37), (1, 1, 1, True, 0.25)])
def test_token_loss_normalizer_equals_trls(grpo, monkeypatch, loss_inputs, processes, accumulation,
                                           steps_per_generation, training, num_items):
    """TRL's dapo loss is S / normalizer and its bnpo loss (in training, without accumulation) S / (completion
    tokens): their ratio gives TRL's normalizer."""
    monkeypatch.setattr(grpo, "accelerator", ClaimedProcesses(grpo.accelerator, processes))
    monkeypatch.setattr(grpo.args, "steps_per_generation", steps_per_generation)
    dapo = trl_loss(grpo, monkeypatch, loss_inputs, "dapo", num_items, accumulation, training)
    bnpo = trl_loss(grpo, monkeypatch, loss_inputs, "bnpo")  # S / tokens (one micro-step, no accumulation)
    trl_normalizer = bnpo * loss_inputs["completion_mask"].sum().clamp(min=1.0) / dapo
    normalizer = trl_mirror.token_loss_normalizer(torch.tensor(float(num_items)), processes, accumulation,
                                                  steps_per_generation, training)
    torch.testing.assert_close(normalizer, trl_normalizer, rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "sapo", "luspo"])
@pytest.mark.parametrize("accumulation, training", [(3, True), (3, False), (2, True)])
def test_accumulation_divisor_equals_trls(grpo, monkeypatch, loss_inputs, loss_type, accumulation, training):
    unscaled = trl_loss(grpo, monkeypatch, loss_inputs, loss_type, accumulation=1, training=True)
    scaled = trl_loss(grpo, monkeypatch, loss_inputs, loss_type, accumulation=accumulation, training=training)
    assert unscaled.abs() > 0
    torch.testing.assert_close(scaled * trl_mirror.accumulation_divisor(accumulation, training), unscaled)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "vespo", "sapo", "luspo"])
def test_token_normalised_losses_are_trls(grpo, monkeypatch, loss_inputs, loss_type):
    """TRL's loss depends on the generation batch's token count exactly for TOKEN_NORMALISED_LOSSES."""
    few, many = (trl_loss(grpo, monkeypatch, loss_inputs, loss_type, num_items=n) for n in (10, 40))
    assert few.abs() > 0
    assert (not torch.equal(few, many)) is (loss_type in trl_mirror.TOKEN_NORMALISED_LOSSES)


@pytest.mark.parametrize("steps_per_generation, iterations", [(1, 1), (2, 1), (2, 3), (3, 2)])
def test_buffering_equals_trls_prepare_inputs(grpo, monkeypatch, steps_per_generation, iterations):
    """GRPOTrainer._prepare_inputs plays (and returns the micro-step's slice of the buffer) where the mirror says."""
    played = []

    def play(batch):
        played.append(grpo._step)
        return {"prompt_ids": torch.arange(2 * steps_per_generation * 3).reshape(-1, 3)}

    monkeypatch.setattr(grpo.args, "steps_per_generation", steps_per_generation)
    monkeypatch.setattr(grpo, "num_iterations", iterations)
    monkeypatch.setattr(grpo, "_generate_and_score_completions", play)
    monkeypatch.setattr(grpo, "_buffered_inputs", None)
    monkeypatch.setattr(grpo, "_step", 0)
    expected = []
    for step in range(3 * steps_per_generation * iterations + 2):
        if step == steps_per_generation * iterations + 1:
            grpo._buffered_inputs = None  # as after a resume from a checkpoint
        grpo._step = step
        if trl_seam.generation_due(grpo):
            expected.append(step)
        batch = GRPOTrainer._prepare_inputs(grpo, None)
        assert batch is trl_seam.buffered_micro_step(grpo)
    assert played == expected and len(played) >= 3


def test_micro_step_bookkeeping_equals_grpo_training_step(grpo, monkeypatch):
    """The counters GRPOTrainer.training_step keeps around transformers' Trainer.training_step (stubbed here)."""
    monkeypatch.setattr(transformers.Trainer, "training_step", lambda self, model, inputs, n=None: torch.zeros(()))
    monkeypatch.setattr(grpo, "current_gradient_accumulation_steps", 3, raising=False)
    states = {}
    for who in ("trl", "mirror"):
        grpo._step, grpo._current_train_step_time = 0, 0.0
        grpo._metrics["train"].clear()
        states[who] = []
        for _ in range(7):
            if who == "trl":
                GRPOTrainer.training_step(grpo, grpo.model, None, None)
            else:
                with trl_seam.micro_step_bookkeeping(grpo):
                    pass
            states[who].append((grpo._step, len(grpo._metrics["train"][trl_mirror.STEP_TIME]),
                                grpo._current_train_step_time == 0.0))
    assert states["mirror"] == states["trl"]
    assert states["trl"][-1][:2] == (7, 2)


def test_metric_names_are_trls(grpo, monkeypatch):
    """The names MileGPOTrainer logs with TRL's meaning are the ones TRL 1.16 logs."""
    monkeypatch.setattr(grpo, "use_vllm", True)
    monkeypatch.setattr(grpo, "vllm_importance_sampling_correction", True)
    out = generate(grpo)
    logged = set(grpo._metrics["train"])
    assert {trl_mirror.NUM_TOKENS, trl_mirror.MEAN_LENGTH, trl_mirror.CLIPPED_RATIO,
            trl_mirror.SAMPLING_LOGP_DIFFERENCE} <= logged
    monkeypatch.setattr(grpo, "use_vllm", False)
    grpo._metrics["train"].clear()
    trl_loss(grpo, monkeypatch, out, "dapo")
    assert {trl_mirror.KL, trl_mirror.ENTROPY, trl_mirror.CLIP_LOW, trl_mirror.CLIP_HIGH,
            trl_mirror.CLIP_REGION} <= set(grpo._metrics["train"])
