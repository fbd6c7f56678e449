"""MileGPOConfig: defaults of the paper's recipe, command-line flags through TrlParser, validation."""

import dataclasses

import pytest
from trl import TrlParser

from milegpo.config import MileGPOConfig

BASE = ["--output_dir", "/tmp/milegpo-config-test", "--report_to", "none", "--bf16", "false", "--use_cpu", "true"]


def parse(*flags):
    (args,) = TrlParser(MileGPOConfig).parse_args_and_config(list(BASE) + list(flags))
    return args


def test_paper_defaults():
    a = parse()
    assert (a.groups_per_iteration, a.group_size, a.horizon, a.history_length) == (16, 8, 50, 2)
    assert a.num_generations == 8 and a.steps_per_generation == a.gradient_accumulation_steps
    assert (a.learning_rate, a.beta, a.max_steps, a.eval_temperature) == (1e-6, 0.01, 300, 0.4)
    assert a.credit_method == "milegpo" and a.credit_variant == "full" and a.eval_splits == ["id", "ood"]
    assert a.credit_config().invalid_penalty == 0.1 and a.loss_type == "dapo"


def test_every_field_is_a_documented_flag():
    own = [f for f in dataclasses.fields(MileGPOConfig) if f.name in MileGPOConfig.__dataclass_fields__
           and f.name not in {g.name for g in dataclasses.fields(MileGPOConfig.__mro__[1])}]
    assert len(own) >= 18
    assert all(f.metadata.get("help") for f in own)
    a = parse("--credit_method", "graphgpo", "--credit_preset", "webshop", "--credit_overrides", '{"eta": 0.5}',
              "--group_size", "4", "--groups_per_iteration", "2", "--invalid_action_penalty", "0.2",
              "--eval_splits", "id", "--num_env_workers", "2", "--require_think", "true", "--horizon", "30")
    cfg = a.credit_config()
    assert a.credit_method == "graphgpo" and cfg.eta == 0.5 and cfg.norm == "mean" and cfg.invalid_penalty == 0.2
    assert a.num_generations == 4 and a.eval_splits == ["id"] and a.require_think and a.horizon == 30


@pytest.mark.parametrize("flags, match", [
    (["--credit_method", "ppo"], "unknown credit method"),
    (["--credit_variant", "xyz"], "variant"),
    (["--credit_overrides", '{"nope": 1}'], "unknown CreditConfig field"),
    (["--num_train_tasks", "3"], "num_train_tasks"),
    (["--group_size", "0"], "group_size"),
    (["--env_options", "[4]"], "env_options must be a dict"),
    (["--prompt_style", "fancy"], "prompt_style must be one of"),
    (["--credit_device", "gpu0"], "credit_device must be 'auto' or a torch device"),
])
def test_bad_values_are_refused(flags, match):
    with pytest.raises(ValueError, match=match):
        parse(*flags)


def test_env_options_reach_the_task_generator():
    from milegpo.rollout import make_tasks

    a = parse("--env_options", '{"max_receptacles": 4}', "--task_type", "look_at_obj_in_light")
    assert a.env_options == {"max_receptacles": 4}
    tasks = make_tasks(a.env, a.train_split, 3, a.task_type, a.horizon, options=a.env_options)
    assert [t.option("max_receptacles") for t in tasks] == [4, 4, 4]
    assert parse().env_options is None and parse("--env_options", "").env_options is None
    with pytest.raises(ValueError, match=r"env option 'level' is not a setting of milegpo.envs.household_tasks; "
                                         r"its settings: \['max_receptacles'\]"):
        make_tasks("household", "train", 2, options={"level": 3})
    with pytest.raises(ValueError, match="env option 'horizon'"):
        make_tasks("household", "train", 2, options={"horizon": 3})


def test_credit_device():
    import torch

    from milegpo.trainer import credit_device

    assert parse().credit_device == "auto" and parse("--credit_device", "cuda:1").credit_device == "cuda:1"
    # auto: the CUDA accelerator (the Triton kernels run there), unless the backend is the Python reference
    assert credit_device("auto", torch.device("cuda", 0), "auto") == torch.device("cuda", 0)
    assert credit_device("auto", "cuda:1", "triton") == torch.device("cuda", 1)
    assert credit_device("auto", torch.device("cuda", 0), "reference") == torch.device("cpu")
    assert credit_device("auto", torch.device("cpu"), "auto") == torch.device("cpu")
    assert credit_device("cpu", torch.device("cuda", 0), "auto") == torch.device("cpu")
    assert credit_device("cuda:2", torch.device("cpu"), "auto") == torch.device("cuda", 2)
