"""The paper's recipes (examples/recipes/): in sync with their generator, each builds the MileGPOConfig of the
paper's settings through the example script's parser, and each trains one iteration on CPU with a tiny Qwen2
standing in for Qwen2.5-1.5B-Instruct (its TensorBoard scalars read back)."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "examples" / "recipes"
BENCHMARK_HORIZON = {"alfworld": 50, "webshop": 30}


def load_module(path: Path):
    """The module of a script that is not in a package (examples/, examples/recipes/)."""
    sys.path.insert(0, str(path.parent))  # train_webshop.py imports train_alfworld.py beside it
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


make_recipes = load_module(RECIPES / "make_recipes.py")
RECIPE_FILES = sorted(make_recipes.recipes())
IDS = [f"{p.parent.name}/{p.stem}" for p in RECIPE_FILES]


def parse_recipe(path: Path, *flags: str):
    """(ScriptArguments, MileGPOConfig) of ``path`` read by its benchmark's example script, with ``flags``."""
    script = load_module(ROOT / "examples" / f"train_{path.parent.name}.py")
    return script.parse_args(["--config", str(path), *flags])


def test_the_recipes_are_the_generator_s_output():
    assert make_recipes.main(["--check"]) == 0
    on_disk = sorted(RECIPES.glob("*/*.yaml"))
    assert on_disk == RECIPE_FILES, "a recipe the generator does not write (or one missing)"
    assert len(RECIPE_FILES) == 2 * (len(make_recipes.METHODS) + 1)


def test_a_stale_recipe_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(make_recipes, "HERE", tmp_path)
    (tmp_path / "alfworld").mkdir()
    (tmp_path / "alfworld" / "grpo.yaml").write_text("stale: true\n")
    assert make_recipes.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: alfworld/grpo.yaml" in out and "stale: webshop/milegpo_full.yaml" in out


@pytest.mark.parametrize("path", RECIPE_FILES, ids=IDS)
def test_every_recipe_builds_the_paper_s_config(path, tmp_path):
    benchmark, name = path.parent.name, path.stem
    script_args, cfg = parse_recipe(path, "--output_dir", str(tmp_path))
    method, variant = make_recipes.METHODS[name.removesuffix("_server")]
    assert script_args.model_name_or_path == "Qwen/Qwen2.5-1.5B-Instruct"
    # every recipe names its preset (issue 40): a moved default changes no recipe; BEACON its scripts' (issue 47)
    preset = f"beacon_{benchmark}" if method == "beacon" else f"{benchmark}_paper"
    assert (cfg.env, cfg.credit_preset, cfg.credit_method) == (benchmark, preset, method)
    assert cfg.invalid_action_penalty == (1.0 if (method, benchmark) == ("beacon", "webshop") else 0.1)
    if variant:
        assert cfg.credit_variant == variant
    assert (cfg.groups_per_iteration, cfg.group_size, cfg.num_generations) == (16, 8, 8)
    assert cfg.history_length == 2 and cfg.require_think and cfg.prompt_style == benchmark
    assert cfg.horizon == BENCHMARK_HORIZON[benchmark] and cfg.max_steps == 300
    assert cfg.learning_rate == 1e-6 and isinstance(cfg.learning_rate, float)  # YAML's 1e-6 would be a string
    assert cfg.beta == 0.01 and cfg.loss_type == "dapo" and cfg.epsilon == 0.2
    assert (cfg.eval_strategy, cfg.eval_steps, cfg.eval_temperature) == ("steps", 5, 0.4)
    assert cfg.report_to == ["tensorboard"] and cfg.use_vllm and not cfg.constrain_actions
    assert cfg.env_options == ({"reward": "win"} if benchmark == "webshop" else None)
    assert cfg.state_anchor == "tracked+actions" and cfg.show_state_context  # GraphGPO's key; the context line is ours
    assert cfg.vllm_mode == ("server" if name.endswith("_server") else "colocate")


def test_a_flag_wins_over_the_recipe(tmp_path):
    _, cfg = parse_recipe(RECIPES / "alfworld" / "gigpo.yaml", "--output_dir", str(tmp_path), "--max_steps", "7",
                          "--env", "household", "--credit_preset", "webshop")
    assert (cfg.max_steps, cfg.env, cfg.credit_preset, cfg.credit_method) == (7, "household", "webshop", "gigpo")
    assert cfg.horizon == 50 and cfg.eval_splits == ["id", "ood"]  # the rest stays the recipe's


def test_milegpo_train_reads_a_recipe(tmp_path, monkeypatch):
    from milegpo.job import parse
    from milegpo.usage import UsageError

    flags = ["--output_dir", str(tmp_path), "--sft_epochs", "0"]
    job, cfg = parse(["--config", str(RECIPES / "webshop" / "milegpo_full.yaml"), *flags])
    assert (job.model_name_or_path, job.sft_epochs) == ("Qwen/Qwen2.5-1.5B-Instruct", 0)
    assert (cfg.env, cfg.credit_preset, cfg.horizon, cfg.groups_per_iteration) == ("webshop", "webshop_paper", 30, 16)
    # ALFWorld's games are not here: milegpo train says so in one line, naming where it looked
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "no_games"))
    with pytest.raises(UsageError, match="ALFWORLD_DATA"):
        parse(["--config", str(RECIPES / "alfworld" / "milegpo_full.yaml"), *flags])


def test_env_as_a_mapping_still_sets_environment_variables(tmp_path, monkeypatch):
    """TRL's own use of the key: ``env: {VAR: value}`` sets environment variables (MileGPOConfig.env stays)."""
    monkeypatch.delenv("MILEGPO_RECIPE_PROBE", raising=False)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("env:\n  MILEGPO_RECIPE_PROBE: '1'\nmax_steps: 3\n")
    script = load_module(ROOT / "examples" / "train_alfworld.py")
    _, cfg = script.parse_args(["--config", str(recipe), "--output_dir", str(tmp_path)])
    assert os.environ["MILEGPO_RECIPE_PROBE"] == "1" and cfg.env == "household" and cfg.max_steps == 3


def test_an_unknown_recipe_key_is_refused(tmp_path):
    recipe = tmp_path / "webshop" / "typo.yaml"
    recipe.parent.mkdir()
    recipe.write_text("env: webshop\ngroups_per_iteraton: 3\n")
    with pytest.raises(ValueError, match="groups_per_iteraton"):
        parse_recipe(recipe, "--output_dir", str(tmp_path))
    with pytest.raises(ValueError, match="--nope"):
        parse_recipe(RECIPES / "webshop" / "grpo.yaml", "--output_dir", str(tmp_path), "--nope", "1")


@pytest.mark.parametrize("gpus", [2, 8])
def test_the_accelerate_configs(gpus):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(ROOT / "examples" / "accelerate" / f"{gpus}gpu.yaml"))
    assert config.num_processes == gpus and config.num_machines == 1
    assert config.distributed_type.value == "MULTI_GPU" and config.mixed_precision == "bf16"
    assert 16 % gpus == 0  # the recipes' 16 groups split into whole groups per process


# ---- one iteration of every recipe on CPU, a tiny Qwen2 for Qwen2.5-1.5B-Instruct

#: what the CPU run changes in a recipe: the model (a flag), vLLM off, a CPU-sized iteration, one evaluation
#: episode per split after it; the ALFWorld recipes play the embedded household world (ALFWorld's games are
#: not here), the WebShop ones a 500-product embedded catalog
CPU_FLAGS = ["--use_vllm", "false", "--use_cpu", "true", "--bf16", "false", "--groups_per_iteration", "2",
             "--group_size", "2", "--horizon", "2", "--num_train_tasks", "2", "--max_steps", "1",
             "--max_completion_length", "8", "--eval_steps", "1", "--num_eval_tasks", "1",
             "--per_device_eval_batch_size", "8", "--save_strategy", "no", "--num_env_workers", "0",
             "--activation_checkpointing", "false", "--dataloader_num_workers", "0"]
STAND_IN = {"alfworld": ["--env", "household"],
            "webshop": ["--env_options", json.dumps({"catalog_size": 500, "test_goals": 100})]}


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    """An untrained tiny Qwen2 and the job's tiny tokenizer, saved (the recipes' model flag points here)."""
    from milegpo.job.policy import make_model, make_tokenizer

    path = tmp_path_factory.mktemp("tiny_policy")
    tokenizer = make_tokenizer()
    make_model(tokenizer, hidden=32, layers=1).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def tensorboard_scalars(output_dir: Path) -> dict[str, list[float]]:
    """Every scalar tag the run wrote under ``output_dir`` (transformers' TensorBoardCallback: <output_dir>/runs/*)
    and its values, read by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = sorted((output_dir / "runs").iterdir())
    assert len(runs) == 1, runs
    events = EventAccumulator(str(runs[0]))
    events.Reload()
    return {tag: [s.value for s in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.slow
@pytest.mark.parametrize("path", RECIPE_FILES, ids=IDS)
def test_every_recipe_trains_one_iteration_on_cpu(path, tmp_path, tiny_policy, caplog):
    from milegpo.job.policy import reload_tokenizer
    from milegpo.trainer import MileGPOTrainer

    torch.set_num_threads(1)
    benchmark = path.parent.name
    out = tmp_path / "out"
    script_args, cfg = parse_recipe(path, "--model_name_or_path", tiny_policy, "--output_dir", str(out),
                                    *CPU_FLAGS, *STAND_IN[benchmark])
    assert script_args.model_name_or_path == tiny_policy and cfg.report_to == ["tensorboard"]
    # the job's tiny tokenizer as saved (AutoTokenizer's Qwen2 class would decode it without spaces)
    trainer = MileGPOTrainer(script_args.model_name_or_path, args=cfg, processing_class=reload_tokenizer(tiny_policy))
    try:
        before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
        trainer.train()
    finally:
        trainer.close()
    assert trainer.state.global_step == 1
    assert trainer.last_iteration["batch"] is not None and len(trainer.last_iteration["rollout"].rows) >= 4
    moved = any(not torch.equal(v.detach(), before[k]) for k, v in trainer.model.named_parameters())
    # the first step's KL gradient is 0 (policy = reference): the weights move when some advantage is not 0
    assert moved == bool(trainer.last_iteration["result"].advantages.abs().max() > 0)

    # the logs a user reads: TensorBoard scalars of the iteration and of the evaluation after it
    scalars = tensorboard_scalars(out)
    train_tags = ["train/episode/success_rate", "train/episode/invalid_action_rate", "train/advantages/std",
                  "train/credit/shared_state_coverage", "train/loss"]
    if benchmark == "webshop":
        train_tags.append("train/episode/score")
        eval_tags = ["eval/test_success_rate", "eval/test_score"]
    else:
        eval_tags = ["eval/id_success_rate", "eval/ood_success_rate", "eval/id_minus_ood"]
    for tag in train_tags + eval_tags:
        assert tag in scalars, f"{tag} not in {sorted(scalars)}"
        assert len(scalars[tag]) == 1
    per_type = [t for t in scalars if t.startswith("train/episode/success/")]
    assert per_type, sorted(scalars)
    credit = [t for t in scalars if t.startswith("train/credit/")]
    logged = next(h for h in trainer.state.log_history if "episode/success_rate" in h)
    for tag in credit + per_type + ["train/episode/success_rate"]:
        assert scalars[tag][0] == pytest.approx(logged[tag.removeprefix("train/")], rel=1e-6, abs=1e-9)
    # a diagnostic with no value in the iteration (None in log_history) has no scalar, and no warning
    not_available = {f"train/{k}" for k, v in logged.items() if v is None}
    assert not not_available & set(scalars)
    assert not [r for r in caplog.records if "as a scalar" in r.getMessage()]


def test_a_recipe_key_given_twice_is_refused(tmp_path):
    """The example scripts' parser reads --config as ``milegpo train`` does: a duplicate key is an error (PyYAML's
    safe_load, TRL's reader, keeps the last one silently), whether ``env`` is a kind, a mapping or absent."""
    for head in ("env: webshop\n", "env:\n  MILEGPO_RECIPE_PROBE: '1'\n", ""):
        recipe = tmp_path / "webshop" / "twice.yaml"
        recipe.parent.mkdir(exist_ok=True)
        recipe.write_text(f"{head}max_steps: 3\nmax_steps: 30\n")
        with pytest.raises(ValueError, match=r"twice\.yaml.*'max_steps' given twice"):
            parse_recipe(recipe, "--output_dir", str(tmp_path))
