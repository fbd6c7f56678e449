"""``state_similarity`` through MileGPOConfig and the trainer: flags, validation, the batch credit sees."""

from types import SimpleNamespace

import pytest
import torch

from milegpo.credit import SketchTable, StateSimilarity, estimate, merge_similar_states
from milegpo.envs import SequentialPool, household_tasks
from milegpo.rollout import EpisodeRunner
from milegpo.trainer import MileGPOTrainer
from tests.rollout.test_loop import expert_generator
from tests.trainer.test_config import parse


def test_state_similarity_flags():
    a = parse()
    assert a.state_similarity is None and a.state_similarity_params() is None  # off by default
    a = parse("--state_similarity", "0.8", "--state_similarity_verify", "false", "--state_similarity_shingle", "1")
    assert a.state_similarity_params() == StateSimilarity(0.8, shingle_width=1, verify=False)
    assert parse("--state_similarity", "0.9").state_similarity_params() == StateSimilarity(0.9)


@pytest.mark.parametrize("flags, match", [
    (["--state_similarity", "0"], r"MileGPOConfig.state_similarity=0.0: .*threshold must be in \(0, 1\]"),
    (["--state_similarity", "1.2"], "threshold must be in"),
    (["--state_similarity", "0.8", "--state_similarity_shingle", "0"], "shingle_width must be >= 1"),
])
def test_bad_state_similarity_is_refused(flags, match):
    with pytest.raises(ValueError, match=match):
        parse(*flags)


def _local(args, rollout):
    """MileGPOTrainer._local_credit on one CPU process, without a model."""
    trainer = SimpleNamespace(accelerator=SimpleNamespace(process_index=0, num_processes=1, device=torch.device("cpu")),
                              args=args, credit_cfg=args.credit_config(),
                              source=SimpleNamespace(state_similarity=args.state_similarity_params()))
    return MileGPOTrainer._local_credit(trainer, rollout)


@pytest.mark.parametrize("method", ["gigpo", "milegpo"])
def test_the_trainer_merges_the_batch_only_when_on(method):
    """On: credit is computed on the merge of the process's batch (the batch it returns, and saves, is the
    merged one); off: on that batch as before, bit for bit."""
    tasks = household_tasks("train", 2, horizon=8)
    similarity = StateSimilarity(0.6)
    runner = EpisodeRunner(SequentialPool(8), horizon=8, state_similarity=similarity)
    rollout = runner.run(tasks, 4, expert_generator(runner, tasks, 4, seed=2))
    flags = ["--credit_method", method, "--groups_per_iteration", "2", "--group_size", "4", "--num_train_tasks", "2"]
    batch, result = _local(parse(*flags), rollout)
    exact = rollout.step_batch()
    assert torch.equal(batch.state, exact.state)
    assert torch.equal(result.advantages, estimate(exact, method, parse(*flags).credit_config()).advantages)
    args = parse(*flags, "--state_similarity", "0.6")
    batch, result = _local(args, rollout)
    merged = merge_similar_states(exact, SketchTable.from_sketches(rollout.sketches), similarity)
    assert torch.equal(batch.state, merged.state) and torch.equal(batch.next_state, merged.next_state)
    assert len(set(merged.state.tolist())) < len(set(exact.state.tolist()))  # the household world has near-duplicates
    assert torch.equal(result.advantages, estimate(merged, method, args.credit_config()).advantages)


@pytest.mark.slow
def test_two_iterations_train_on_the_merged_states(tmp_path, warm_checkpoint):
    """A real run with ``state_similarity``: every iteration trains each row once on the advantage of the
    batch credit saw, and that batch is the merge of the rollout's rows with its own sketches."""
    from milegpo.job.policy import reload_tokenizer
    from tests.trainer.test_trainer import RecordingTrainer, assert_trained_on_estimate, make_args, tasks

    tok = reload_tokenizer(warm_checkpoint)
    train, evals = tasks()
    args = make_args(tmp_path, credit_method="milegpo", state_similarity=0.6)
    trainer = RecordingTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    assert trainer.runner.state_similarity == StateSimilarity(0.6)
    trainer.train()
    assert len(trainer.records) == 2
    assert_trained_on_estimate(trainer, args, "milegpo")
    for rec in trainer.records:
        rollout = rec["rollout"]
        merged = merge_similar_states(rollout.step_batch(), SketchTable.from_sketches(rollout.sketches),
                                      StateSimilarity(0.6))
        assert torch.equal(rec["batch"].state, merged.state) and torch.equal(rec["batch"].next_state, merged.next_state)
