"""The README's "Your own environment" code, run as written (issue 48, "Show"): every ``python`` block of that
section, with a local tiny model in place of the Hub name and, for the TRL block, a config cut to one short
iteration (the block's own settings kept: a config class whose defaults are small, the text unchanged)."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HUB_MODEL = "Qwen/Qwen3-0.6B"


def section_blocks() -> list[str]:
    """The ``python`` code blocks of the README's "## Your own environment" section, in order."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## Your own environment\n")
    end = readme.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", readme[start:end], flags=re.S)


def test_the_section_holds_the_two_blocks_these_tests_run():
    blocks = section_blocks()
    assert len(blocks) == 2, "a block was added or removed: run it here too"
    assert "environment_factory=LockEnv" in blocks[0] and HUB_MODEL in blocks[0]
    assert "envs.register(" in blocks[1]


#: the user's package the register block names (mypkg.envs: Maze and maze_tasks), written where the test imports it
MYPKG = '''
from milegpo.envs import Task, TextEnv


class Maze(TextEnv):
    """A corridor of 3 rooms: go east twice to win."""

    def _reset(self, task):
        self.room = 0
        return "Room 0 of 3.", ["go east", "wait"], {"goal": "reach room 2"}

    def _step(self, action):
        self.room += action == "go east"
        won = self.room == 2
        return f"Room {self.room} of 3.", float(won), won, [] if won else ["go east", "wait"], {}


def maze_tasks(split, n, *, start=0, task_type="", horizon=10):
    return [Task(f"maze/{split}/{i}", env="maze", seed=i, split=split, horizon=horizon) for i in range(start, start + n)]
'''


def test_the_register_block_runs_as_written(tmp_path, monkeypatch):
    from milegpo.envs import EnvPool, get_kind, unregister
    from milegpo.rollout import EpisodeRunner, make_tasks

    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "envs.py").write_text(MYPKG)
    monkeypatch.syspath_prepend(str(tmp_path))  # pool workers get this process's sys.path (multiprocessing)
    exec(compile(section_blocks()[1], "README.md: Your own environment (register)", "exec"), {})
    try:
        assert get_kind("maze").origin == "register()"
        tasks = make_tasks("maze", "test", 2)
        runner = EpisodeRunner(EnvPool(4, 2), history_length=1, prompt_style="compact")  # workers find it too
        try:
            out = runner.run(tasks, 2, lambda prompts: ([[1]] * len(prompts), [[2]] * len(prompts), None,
                                                        ["<action>go east</action>"] * len(prompts)))
        finally:
            runner.close()
        assert all(e.won and e.length == 2 for e in out.episodes)
    finally:
        unregister("maze")


@pytest.mark.slow
def test_the_trl_block_trains_as_written_with_a_local_tiny_model(tmp_path, monkeypatch):
    """The LockEnv block: TRL's environment_factory protocol, MileGPOConfig and MileGPOTrainer as the README
    writes them; the Hub model replaced by a tiny tool-calling Qwen2 saved here, the config's defaults cut to one
    iteration of 2 groups (its own settings, group_size 8 and horizon 6 among them, kept)."""
    import milegpo.trainer
    from milegpo.job.policy import make_model

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from train_maze import maze_tokenizer

    model_dir = tmp_path / "tiny-tool-model"
    tokenizer = maze_tokenizer()
    make_model(tokenizer, hidden=32, layers=1, seed=0).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)

    real = milegpo.trainer.MileGPOConfig
    short = dict(max_steps=1, groups_per_iteration=2, num_eval_tasks=0, max_completion_length=8,
                 per_device_train_batch_size=64, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
                 disable_tqdm=True, activation_checkpointing=False)
    made = []

    def config(**written):  # the README's settings win over the short run's
        made.append(real(**{**short, **written}))
        return made[-1]

    monkeypatch.setattr(milegpo.trainer, "MileGPOConfig", config)
    monkeypatch.chdir(tmp_path)  # output_dir="runs/lock" is relative
    code = section_blocks()[0].replace(f'"{HUB_MODEL}"', repr(str(model_dir)))
    assert code.count(str(model_dir)) == 1
    namespace: dict = {}
    exec(compile(code, "README.md: Your own environment (TRL)", "exec"), namespace)
    args = made[0]
    assert (args.credit_method, args.group_size, args.horizon, args.success_threshold) == ("milegpo", 8, 6, 0.5)
    assert (tmp_path / "runs" / "lock").is_dir()
    assert "LockEnv" in namespace and sys.modules["milegpo.trainer"].MileGPOConfig is config
