"""MileGPOConfig: defaults of the paper's recipe, command-line flags through TrlParser, validation."""

import dataclasses

import pytest
from trl import TrlParser

from milegpo.trainer.config import MileGPOConfig

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
    a = parse("--credit_method", "graphgpo", "--credit_preset", "webshop", "--credit_overrides", '{"gamma_g": 0.5}',
              "--group_size", "4", "--groups_per_iteration", "2", "--invalid_action_penalty", "0.2",
              "--eval_splits", "id", "--num_env_workers", "2", "--require_think", "true", "--horizon", "30")
    cfg = a.credit_config()
    assert a.credit_method == "graphgpo" and cfg.gamma_g == 0.5 and cfg.norm == "mean" and cfg.invalid_penalty == 0.2
    assert a.num_generations == 4 and a.eval_splits == ["id"] and a.require_think and a.horizon == 30
    assert not a.constrain_actions and parse("--constrain_actions", "true").constrain_actions
    assert not a.constrain_query and parse("--constrain_actions", "true", "--constrain_query", "true").constrain_query


@pytest.mark.parametrize("flags, match", [
    (["--credit_method", "ppo"], r"MileGPOConfig.credit_method='ppo': unknown credit method; one of grpo, gigpo, "
                                 r"graphgpo, milegpo, hgpo, g2po, beacon$"),
    (["--credit_variant", "xyz"], r"MileGPOConfig.credit_variant='xyz': unknown MileGPO variant; one of md, rcs, "
                                  r"full$"),
    (["--credit_preset", "atari"], r"MileGPOConfig.credit_preset='atari': unknown credit preset; one of alfworld, "
                                   r"alfworld_paper, alfworld_spec, beacon_alfworld, beacon_scienceworld, "
                                   r"beacon_webshop, gigpo_reference, gigpo_reference_webshop, "
                                   r"graphgpo_reference, graphgpo_reference_webshop, graphgpo_reproduction, "
                                   r"scienceworld, webshop, webshop_paper, webshop_spec$"),
    (["--credit_overrides", '{"nope": 1}'], r"MileGPOConfig.credit_overrides=\{'nope': 1\}: unknown CreditConfig "
                                            r"field\(s\) \['nope'\]"),
    (["--credit_overrides", '{"eta": 0.5'], r"MileGPOConfig.credit_overrides='\{\"eta\": 0.5': not valid JSON "
                                            r"\(Expecting ',' delimiter.*\); expected a JSON object"),
    (["--credit_overrides", '[1, 2]'], r"MileGPOConfig.credit_overrides=\[1, 2\]: expected a dict or a JSON object"),
    (["--credit_overrides", '{"omega": 2}'], r"MileGPOConfig.credit_overrides=\{'omega': 2\}: CreditConfig.omega "
                                             r"must be in \[0, 1\], got 2"),
    (["--invalid_action_penalty", "-1"], r"MileGPOConfig.invalid_action_penalty=-1.0: CreditConfig.invalid_penalty "
                                         r"must be >= 0"),
    (["--credit_backend", "cuda"], r"MileGPOConfig.credit_backend='cuda': unknown credit backend; one of auto, "
                                   r"reference, torch, triton$"),
    (["--credit_device", "gpu0"], r"MileGPOConfig.credit_device='gpu0': expected 'auto' or a torch device such as "
                                  r"'cpu' or 'cuda:0'"),
    (["--credit_device", "cuda:7"], r"MileGPOConfig.credit_device='cuda:7': no such device on this machine"),
    (["--env", "atari"], r"MileGPOConfig.env='atari': not an environment kind; known: alfworld, household, "
                         r"scienceworld, textworld, webshop$"),
    (["--train_split", "test"], r"MileGPOConfig.train_split='test': not a split of env 'household'; its splits: "
                                r"train, id, ood$"),
    (["--env", "webshop", "--train_split", "id"], r"MileGPOConfig.train_split='id': not a split of env 'webshop'; "
                                                  r"its splits: train, test$"),
    (["--eval_splits", "id", "test"], r"MileGPOConfig.eval_splits=\['id', 'test'\]: unknown split\(s\) \['test'\]; "
                                      r"the splits of env 'household': train, id, ood$"),
    (["--env", "webshop", "--eval_splits", "id", "ood"], r"eval_splits=\['id', 'ood'\]: unknown split\(s\) "
                                                         r"\['id', 'ood'\]; the splits of env 'webshop': train, test$"),
    (["--env", "alfworld", "--eval_splits", "id", "id"], r"eval_splits=\['id', 'id'\]: a split given twice"),
    (["--task_type", "cook"], r"MileGPOConfig.task_type='cook': not a task type of env 'household'; '' \(all\) or "
                              r"one of pick_and_place_simple, .*pick_two_obj_and_place$"),
    (["--env", "textworld", "--task_type", "pick_and_place_simple"], r"task_type='pick_and_place_simple': not a task "
                                                                     r"type of env 'textworld'; '' \(all\) or one of "
                                                                     r"tw-cooking"),
    (["--group_size", "1"], r"MileGPOConfig.group_size=1: must be >= 2: credit compares the episodes of a group"),
    (["--group_size", "0"], r"MileGPOConfig.group_size=0: must be >= 2"),
    (["--max_steps", "0"], r"MileGPOConfig.max_steps=0: must be >= 1$"),
    (["--max_steps", "-1"], r"MileGPOConfig.max_steps=-1: must be >= 1$"),
    (["--beta", "-0.1"], r"MileGPOConfig.beta=-0.1: must be >= 0$"),
    (["--learning_rate=-1e-6"], r"MileGPOConfig.learning_rate=-1e-06: must be >= 0$"),
    (["--eval_temperature", "-0.4"], r"MileGPOConfig.eval_temperature=-0.4: must be > 0 \(a sampling temperature\)$"),
    (["--eval_temperature", "0"], r"MileGPOConfig.eval_temperature=0.0: must be > 0"),
    (["--max_completion_length", "0"], r"MileGPOConfig.max_completion_length=0: must be >= 1 \(tokens per step\)$"),
    (["--per_device_train_batch_size", "0"], r"MileGPOConfig.per_device_train_batch_size=0: must be >= 1$"),
    (["--horizon", "0"], r"MileGPOConfig.horizon=0: must be >= 1$"),
    (["--history_length", "-1"], r"MileGPOConfig.history_length=-1: must be >= 0$"),
    (["--env_options", "[4]"], r"MileGPOConfig.env_options=\[4\]: expected a dict or a JSON object string$"),
    (["--env_options", "{max_receptacles: 4}"], r"MileGPOConfig.env_options='\{max_receptacles: 4\}': not valid "
                                                r"JSON"),
    (["--env_options", '{"level": 3}'], r"MileGPOConfig.env_options=\{'level': 3\}: env option 'level' is not a "
                                        r"setting of milegpo.envs.household_tasks; its settings: \['max_receptacles'\]"),
    (["--prompt_style", "fancy"], r"MileGPOConfig.prompt_style='fancy': one of alfworld, compact, webshop$"),
    (["--state_anchor", "tracked+action"], r"MileGPOConfig.state_anchor='tracked\+action': state_anchor must be one "
                                           r"of observation, observation\+actions, tracked, tracked\+actions or a "
                                           r"dotted path to a callable, got 'tracked\+action'$"),
    (["--state_anchor", "no_such_module.anchor"], r"MileGPOConfig.state_anchor='no_such_module.anchor': "
                                                  r"state_anchor 'no_such_module.anchor': cannot import it"),
    (["--constrain_actions", "true", "--use_vllm", "true", "--vllm_mode", "server"],
     r"MileGPOConfig.constrain_actions=True: with use_vllm needs vllm_mode='colocate' \(got 'server'"),
    (["--constrain_actions", "true", "--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_tensor_parallel_size",
      "2"], r"MileGPOConfig.constrain_actions=True: with use_vllm needs vllm_tensor_parallel_size=1 \(got 2\)$"),
    (["--constrain_query", "true"], r"MileGPOConfig.constrain_query=True: needs constrain_actions=True \(it "),
    (["--constrained_sampling", "sentence"], r"MileGPOConfig.constrained_sampling='sentence': must be one of token, "
                                             r"sequence$"),
    (["--constrained_sampling", "sequence"], r"MileGPOConfig.constrained_sampling='sequence': needs "
                                             r"constrain_actions=True"),
    (["--constrain_actions", "true", "--constrained_sampling", "sequence", "--use_vllm", "true", "--vllm_mode",
      "colocate"], r"MileGPOConfig.constrained_sampling='sequence': is not available with use_vllm"),
    (["--max_tool_calling_iterations", "5"],
     r"MileGPOConfig.max_tool_calling_iterations=5: GRPOTrainer's tool-calling budget is not read: MileGPOTrainer's is "
     r"horizon \(.*now 50\)"),
])
def test_bad_values_are_refused(flags, match):
    from milegpo.trainer.config import ConfigError

    if "cuda:7" in flags and __import__("torch").cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(ConfigError, match=match) as info:
        parse(*flags)
    assert "\n" not in str(info.value)  # one line: the field, the value and what is allowed


@pytest.mark.parametrize("kwargs, match", [
    (dict(group_size=1), r"group_size=1: must be >= 2"),
    (dict(eval_splits=[]), r"MileGPOConfig.eval_splits=\[\]: expected a non-empty list of splits of env "
                           r"'household' \(train, id, ood\); num_eval_tasks=0 turns evaluation off"),
    (dict(eval_splits="id"), r"MileGPOConfig.eval_splits='id': expected a non-empty list"),
    (dict(credit_overrides="{eta: 1}"), r"MileGPOConfig.credit_overrides='\{eta: 1\}': not valid JSON"),
    (dict(generation_batch_size=64), r"MileGPOConfig.generation_batch_size=64: leave it unset"),
])
def test_bad_values_are_refused_at_construction(kwargs, match):
    from milegpo.trainer.config import ConfigError

    with pytest.raises(ConfigError, match=match):
        MileGPOConfig(output_dir="/tmp/milegpo-config-test", report_to="none", **kwargs)


def test_what_a_trl_user_passes_is_taken():
    """transformers 4's overwrite_output_dir (a flag of milegpo train) is taken, not a TypeError; GRPOConfig's
    max_tool_calling_iterations is taken where it agrees with horizon (turns = tool-calling iterations + 1)."""
    cfg = MileGPOConfig(output_dir="/tmp/milegpo-config-test", report_to="none", overwrite_output_dir=True)
    assert cfg.overwrite_output_dir is True
    assert MileGPOConfig(output_dir="/tmp/milegpo-config-test", report_to="none").overwrite_output_dir is False
    cfg = MileGPOConfig(output_dir="/tmp/milegpo-config-test", report_to="none", horizon=6,
                        max_tool_calling_iterations=5)
    assert cfg.horizon == 6 and cfg.max_tool_calling_iterations == 5


def test_evaluation_splits_default_to_the_envs_own():
    from milegpo.envs import task_space

    assert parse().eval_splits == ["id", "ood"] and parse("--env", "webshop").eval_splits == ["test"]
    assert parse("--env", "webshop", "--eval_splits", "train", "test").eval_splits == ["train", "test"]
    # the table the envs own, beside their task functions
    assert task_space("webshop").splits == ("train", "test") and task_space("webshop").task_types is None
    assert task_space("alfworld").splits[:3] == ("train", "id", "ood") and "tw-simple" in task_space("textworld").task_types
    a = parse("--env", "webshop", "--task_type", "any-category-the-catalog-has")  # the catalog decides, later
    assert a.task_type == "any-category-the-catalog-has"


def test_precision_defaults_to_what_the_machine_runs(tmp_path):
    import torch
    from transformers.utils import is_torch_bf16_gpu_available

    # the README's "Train with TRL" config, as written: GRPOConfig would turn bf16 on and fail on a CPU
    args = MileGPOConfig(output_dir=str(tmp_path), env="alfworld", groups_per_iteration=16, group_size=8,
                         credit_method="milegpo", credit_variant="full", credit_preset="alfworld",
                         use_vllm=True, vllm_mode="colocate", report_to="none")
    assert args.bf16 == is_torch_bf16_gpu_available()
    has_accelerator = torch.accelerator.is_available() if hasattr(torch, "accelerator") else torch.cuda.is_available()
    assert args.use_cpu == (not has_accelerator)
    assert not MileGPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True).bf16  # fp32 on the CPU
    if not is_torch_bf16_gpu_available() and not has_accelerator:
        # bf16 asked for on a CPU without use_cpu: TRL's own error, as before
        with pytest.raises(ValueError, match="Your setup doesn't support bf16/gpu"):
            MileGPOConfig(output_dir=str(tmp_path), report_to="none", bf16=True)


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

    assert parse().credit_device == "auto" and parse("--credit_device", "cpu").credit_device == "cpu"
    if torch.cuda.device_count() > 1:
        assert parse("--credit_device", "cuda:1").credit_device == "cuda:1"
    # auto: the CUDA accelerator (the Triton kernels run there), unless the backend is the Python reference
    assert credit_device("auto", torch.device("cuda", 0), "auto") == torch.device("cuda", 0)
    assert credit_device("auto", "cuda:1", "triton") == torch.device("cuda", 1)
    assert credit_device("auto", torch.device("cuda", 0), "reference") == torch.device("cpu")
    assert credit_device("auto", torch.device("cpu"), "auto") == torch.device("cpu")
    assert credit_device("cpu", torch.device("cuda", 0), "auto") == torch.device("cpu")
    assert credit_device("cuda:2", torch.device("cpu"), "auto") == torch.device("cuda", 2)



@pytest.mark.parametrize("name", ["graphgpo_reference", "gigpo_reference"])
def test_reference_presets(name):
    # verl-agent's GraphGPO / GiGPO credit (issue 40) by name; invalid_action_penalty stays the recipe's 0.1
    from milegpo.credit import presets

    assert parse("--credit_preset", name).credit_config() == presets.get_preset(name)
    cfg = parse("--credit_preset", name, "--credit_overrides", '{"gamma_g": 0.2}').credit_config()
    assert cfg == presets.get_preset(name).replace(gamma_g=0.2)


@pytest.mark.parametrize("name", ["alfworld_paper", "webshop_paper", "alfworld_spec", "webshop_spec",
                                  "gigpo_reference_webshop", "graphgpo_reference_webshop", "graphgpo_reproduction"])
def test_every_preset_by_name(name):
    from milegpo.credit import presets

    assert parse("--credit_preset", name).credit_config() == presets.PRESETS[name]
    assert parse("--credit_preset", name.upper()).credit_config() == presets.PRESETS[name]
