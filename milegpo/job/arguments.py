"""The flags of ``milegpo train`` / ``milegpo eval``: :class:`JobArguments` and every MileGPOConfig field.

:func:`parse` reads them with TRL's ``TrlParser`` (``--config recipe.yaml`` works too). The defaults depend on
the environment kind (``--env``), all in one table, :data:`ENV_DEFAULTS` (WebShop: its credit preset, prompt,
horizon and ``test`` split); without ``--model_name_or_path`` they change to the embedded tiny run's,
:data:`TINY_RUN` plus the kind's ``"tiny"`` row (a CPU-sized run of a few minutes; :data:`TINY_DEFAULTS` is the
household one). A policy saved by ``milegpo train`` carries :data:`TASK_SETTINGS` (its environment, games and
prompt), which become the defaults when it is given, for its own environment kind only. Flags given on the
command line always win.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Collection, Sequence

from ..envs.scienceworld.tasks import DEFAULT_SCIENCEWORLD_HORIZON
from ..envs.webshop.env import DEFAULT_WEBSHOP_HORIZON
from ..trainer.saved_policy import EVAL_FIELDS, TASK_FIELDS, TASK_SETTINGS, saved_task_settings  # re-exported
from ..usage import UsageError

#: defaults of every embedded run (no --model_name_or_path), whatever the environment: a tiny Qwen2 (hidden 128)
#: warm-started at lr 3e-3, 4 groups x 4 episodes per iteration, 50 iterations at lr 3e-4 (the household row's: 1e-3),
#: no checkpoints; sized to finish in a few minutes on 2 CPU cores (notes/main_job.md: why each)
TINY_RUN: dict[str, Any] = dict(
    tiny_hidden=128, sft_learning_rate=3e-3, output_dir="milegpo_run", groups_per_iteration=4, group_size=4,
    max_steps=50, learning_rate=3e-4, per_device_train_batch_size=64, eval_group_size=1, temperature=1.0, beta=0.01,
    logging_steps=1, save_strategy="no", report_to="none", bf16=False, seed=0, dataloader_num_workers=0,
    activation_checkpointing=False,
)

#: the defaults of each environment kind that differ from MileGPOConfig's / JobArguments': ``"run"`` for every
#: run on that kind, ``"tiny"`` on top of those and of :data:`TINY_RUN` for the embedded tiny policy. A kind
#: missing here has no defaults of its own. Precedence, lowest first: the dataclasses, this table, a saved
#: policy's :data:`TASK_SETTINGS` (when it was trained on the same kind), ``--config`` YAML, command-line flags.
ENV_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    # the household world's shortest task type in rooms of 4 receptacles, the compact prompt, 24 warm-start epochs;
    # groups of 8 episodes (groups of 4 won nothing in about half the groups: no signal for any method), a k3 KL term to
    # the warm start at beta 0.04 (GRPO's published value; without it, seeds 0-9 gained +8.8 [+3.9, +13.8] ID points, 9
    # of 10, with it +12.5 [+8.8, +16.1], all 10; notes/main_job.md, 20th round), 300 evaluation games per split (a
    # success rate's standard error under 3 points) and actions constrained to the admissible ones (the warm starts that
    # won under 10% wrote 63-71% invalid actions; constrained, every seed's wins 32-52% of the ID games), each drawn by
    # its whole probability (`sequence`: a take needs the goal object's name copied, not a comparison the tiny model
    # does not learn; with --use_vllm `token`: vLLM draws token by token), RL on 4,096 games it cannot memorise (on 64
    # it learned those games, not the task) at lr 1e-3 decaying to 0 (at 3e-4 RL moved ID by +1.4 [-2.4, +5.2] over 5
    # seeds; held constant at 1e-3 one seed of 10 collapsed; notes/main_job.md, 17th round)
    "household": {
        "run": {},
        "tiny": dict(env_options={"max_receptacles": 4}, prompt_style="compact", sft_epochs=24.0,
                     task_type="look_at_obj_in_light", horizon=8, num_train_tasks=4096, max_completion_length=16,
                     group_size=8, beta=0.04, num_eval_tasks=300, constrain_actions=True,
                     constrained_sampling="sequence", learning_rate=1e-3),
    },
    # the game's own planner is their only expert (it reads the full state): the warm start imitates it
    "alfworld": {"run": dict(sft_expert="oracle"), "tiny": {}},
    "textworld": {"run": dict(sft_expert="oracle"), "tiny": {}},
    # ScienceWorld: its gold expert (made by the engine's solver, it reads the task), the engine's 100-step episodes,
    # the credit preset `scienceworld` (the ALFWorld values; BEACON's ScienceWorld script's gamma and w).
    # The tiny run: find-non-living-thing (go to the answer box's room, focus on any non-living thing, put it in the
    # box; 3-11 gold steps) with the engine's easy simplifications (doors open, teleport), 10 steps, the compact
    # prompt (templates and objects in view) with one step of history, 12 warm-start epochs on 32 gold
    # walkthroughs, 10 iterations, 24 dev variations (notes/scienceworld.md: the time, what it learns)
    "scienceworld": {
        "run": dict(sft_expert="oracle", horizon=DEFAULT_SCIENCEWORLD_HORIZON, credit_preset="scienceworld"),
        "tiny": dict(env_options={"simplifications": "easy"}, task_type="find-non-living-thing", horizon=10,
                     num_train_tasks=64, prompt_style="compact", history_length=1, sft_tasks=32, sft_epochs=12.0,
                     sft_explore=0.1, max_completion_length=24, max_steps=10, eval_splits=["dev"],
                     num_eval_tasks=24),
    },
    # WebShop as verl-agent trains it: its credit preset (paper table 5), its prompt, its test split. The tiny run:
    # an embedded catalog of 1,500 products, only its goals that ask for no option (max_goal_options 0: the right
    # product at the right price wins; test = those among its first 300 goals, 54, train = the other 142), 8 steps,
    # the compact prompt with one step of history (~240 tokens; verl-agent's with two is ~560), actions constrained
    # to the page's admissible ones and the search query to the instruction's words, 12 warm-start epochs on 48
    # walkthroughs, 10 iterations (notes/webshop.md: the time, what it learns, what it does not show)
    "webshop": {
        "run": dict(credit_preset="webshop", prompt_style="webshop", horizon=DEFAULT_WEBSHOP_HORIZON,
                    eval_splits=["test"]),
        "tiny": dict(env_options={"catalog_size": 1500, "test_goals": 300, "max_goal_options": 0}, horizon=8,
                     num_train_tasks=64, prompt_style="compact", history_length=1, sft_tasks=48, sft_epochs=12.0,
                     sft_explore=0.1, max_completion_length=32, max_steps=10, constrain_actions=True,
                     constrain_query=True),
    },
}

#: the household tiny run's defaults (:data:`TINY_RUN` + ``ENV_DEFAULTS["household"]["tiny"]``), the default job's
TINY_DEFAULTS: dict[str, Any] = {**TINY_RUN, **ENV_DEFAULTS["household"]["tiny"]}

#: the ``"tiny"`` row of a kind without one of its own (or an empty one: a user's environment, a gymnasium id,
#: TextWorld, ALFWorld):
#: short episodes, the compact prompt, completions of a few action words (the tiny tokenizer makes an admissible
#: action one token: ``milegpo.job.policy.played_texts``), 64 training tasks
ANY_KIND_TINY: dict[str, Any] = dict(horizon=10, prompt_style="compact", num_train_tasks=64, max_completion_length=32)


def _has_expert(env: str) -> bool:
    """Whether kind ``env``'s world has an expert to warm-start from (True where the kind cannot be looked up here:
    the config's own check names an unknown kind)."""
    from ..envs import env_class

    try:
        return bool(env_class(env).experts)
    except Exception:  # noqa: BLE001 - an unknown or broken kind: MileGPOConfig / check_tasks say why, in one line
        return True


def env_defaults(env: str, tiny: bool) -> dict[str, Any]:
    """The defaults of a run on environment kind ``env`` (:data:`ENV_DEFAULTS`): its ``"run"`` row and, for the
    embedded tiny policy (``tiny``), :data:`TINY_RUN` and its ``"tiny"`` row on top (:data:`ANY_KIND_TINY` for a
    kind without one, or with an empty one). A world without an expert (:attr:`milegpo.envs.TextEnv.experts` empty) has no warm start by
    default (``sft_epochs=0``)."""
    row = ENV_DEFAULTS.get(env, {})
    out = dict(row.get("run", {}))
    if tiny:
        out.update(TINY_RUN)
        out.update(row.get("tiny") or ANY_KIND_TINY)
    if not _has_expert(env):
        out["sft_epochs"] = 0.0
    return out


@dataclass
class JobArguments:
    """Arguments of the job around the trainer (the trainer's own are MileGPOConfig's)."""

    model_name_or_path: str | None = field(default=None, metadata={
        "help": "Policy model (hub id or path). Not given: a tiny Qwen2 and tokenizer built on the spot."})
    sft_epochs: float = field(default=3.0, metadata={"help": "Epochs of the SFT warm start (0: none)."})
    sft_tasks: int = field(default=64, metadata={"help": "Training tasks whose expert walkthroughs the warm "
                                                         "start learns (seeds after the RL training tasks)."})
    sft_learning_rate: float = field(default=1e-5, metadata={"help": "Learning rate of the warm start "
                                                                     "(the embedded tiny model: 3e-3; a real "
                                                                     "model: 1e-5)."})
    sft_batch_size: int = field(default=16, metadata={"help": "Examples per SFT step."})
    sft_explore: float = field(default=0.2, metadata={"help": "Share of random actions while recording the "
                                                              "walkthroughs (labels stay the expert's)."})
    sft_expert: str = field(default="search", metadata={
        "help": "Whose walkthroughs: 'search' (acts on what it has seen) or 'oracle' (knows every object's place)."})
    tiny_hidden: int = field(default=64, metadata={"help": "Hidden size of the tiny model."})
    tiny_layers: int = field(default=2, metadata={"help": "Layers of the tiny model."})
    eval_before: bool = field(default=True, metadata={"help": "Evaluate the warm-started policy before RL."})
    save_batches: bool = field(default=True, metadata={"help": "Save every iteration's StepBatch (.npz)."})
    plots: bool = field(default=True, metadata={"help": "Write the PNG plots."})
    threads: int = field(default=0, metadata={"help": "torch CPU threads (0: leave torch's default)."})
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Replace an earlier run in --output_dir (its log, batches, checkpoints, policies and plots are "
                "removed first); without it, or --resume_from_checkpoint, such a folder is refused."})

    #: the least value of each numeric field (``sft_explore`` also at most 1), checked at construction
    AT_LEAST: ClassVar[dict[str, float]] = dict(sft_epochs=0, sft_tasks=1, sft_learning_rate=0, sft_batch_size=1,
                                                sft_explore=0, tiny_hidden=1, tiny_layers=1, threads=0)

    def __post_init__(self):
        """Refuse a value the job cannot run with: a ValueError of one line naming the field, the value and what
        is allowed (``milegpo train`` prints it and exits 2), as MileGPOConfig does."""
        import math

        for name, low in self.AT_LEAST.items():
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value) or value < low:
                raise ValueError(f"JobArguments.{name}={value!r}: must be >= {low:g}"
                                 + {"sft_epochs": " (0: no warm start)", "threads": " (0: torch's default)"}.get(name, ""))
        if self.sft_explore > 1:
            raise ValueError(f"JobArguments.sft_explore={self.sft_explore!r}: must be <= 1 (a share of actions)")
        if self.tiny_hidden % 8:
            raise ValueError(f"JobArguments.tiny_hidden={self.tiny_hidden!r}: must be a multiple of 8 (the tiny "
                             "Qwen2's 4 attention heads, each of an even size for its rotary embedding)")


def canonical_flags(argv: Sequence[str], known: Collection[str]) -> list[str]:
    """``argv`` with every flag in its one spelling: ``--x-y`` (and ``--x-y=v``) becomes ``--x_y`` where ``x_y`` is a
    flag of ``known`` (flag names with underscores). ``--help`` lists both spellings and argparse takes both, so
    every later question "did the user give ``--x_y``" (a saved policy's folder, ``--env_options`` to merge, a
    flag given that a ``--config`` value yields to) is asked of this one spelling. Values are left as they are."""
    out = []
    for token in argv:
        if token.startswith("--") and token != "--":
            name, eq, value = token[2:].partition("=")
            if "-" in name and name.replace("-", "_") in known:
                token = f"--{name.replace('-', '_')}{eq}{value}"
        out.append(token)
    return out


def refuse_repeated_flags(argv: Sequence[str], prog: str) -> None:
    """A flag given twice on the command line is a one-line UsageError (argparse would keep the last silently).
    ``milegpo train`` / ``eval`` call it on what the user typed; :func:`parse` itself keeps argparse's last-wins
    for callers that put their own flags after a user's (``play_checkpoint``, ``compare_methods``)."""
    seen: dict[str, str] = {}
    for token in argv:
        if not token.startswith("--") or token == "--":
            continue
        name = token[2:].split("=", 1)[0].replace("-", "_")
        if name in seen:
            raise UsageError(f"{prog}: error: --{name} given twice: give it once")
        seen[name] = token


def merged_env_options(defaults: dict[str, Any], given: Any) -> Any:
    """The ``--env_options`` of a run: those ``given`` (a JSON object string or a dict) merged into the defaults'
    (:data:`ENV_DEFAULTS`' tiny row, a saved policy's), a key given wins and a key given as null drops the
    default's. ``given`` that is not a JSON object is returned as it is, for MileGPOConfig to refuse."""
    base = defaults.get("env_options")
    if not isinstance(base, dict):
        return given
    options = given
    if isinstance(given, str):
        def unique(pairs):
            if len({key for key, _ in pairs}) < len(pairs):
                raise ValueError("a key given twice")  # MileGPOConfig refuses it, naming the key
            return dict(pairs)

        try:
            options = json.loads(given, object_pairs_hook=unique) if given.strip() else {}
        except ValueError:  # not JSON, or a key given twice: MileGPOConfig's one-line refusal says which
            return given
    if not isinstance(options, dict):
        return given
    merged = {**base, **options}
    return {k: v for k, v in merged.items() if v is not None}


#: the layout of ``milegpo train --help``: milegpo's own flags in these groups, in this order, then a pointer to
#: the other GRPOConfig / TrainingArguments flags (``--help-all`` lists them too). The job group is every
#: :class:`JobArguments` field; each MileGPOConfig field of its own is in one group (tests/job/test_arguments.py)
HELP_GROUPS: dict[str, tuple[str, ...]] = {
    "environment and tasks": ("env", "task_type", "horizon", "env_options", "train_split", "num_train_tasks",
                              "num_env_workers", "env_errors", "env_step_timeout", "rollout_parts", "success_threshold",
                              "tool_timeout"),
    "rollout": ("groups_per_iteration", "group_size", "history_length", "prompt_style", "require_think",
                "constrain_actions", "constrain_query", "constrained_sampling", "temperature", "max_completion_length",
                "state_anchor", "show_state_context"),
    "credit": ("credit_method", "credit_variant", "credit_preset", "credit_overrides", "credit_backend",
               "credit_device", "invalid_action_penalty", "state_similarity", "state_similarity_verify",
               "state_similarity_shingle"),
    "evaluation": ("eval_splits", "num_eval_tasks", "eval_group_size", "eval_temperature"),
    "training (GRPOConfig / TrainingArguments flags that milegpo sets or a run often changes)": (
        "max_steps", "learning_rate", "beta", "per_device_train_batch_size", "use_fused_loss",
        "output_dir", "seed", "logging_steps", "report_to", "save_strategy", "resume_from_checkpoint", "use_vllm",
        "bf16", "use_cpu", "activation_checkpointing", "disable_tqdm"),
}
HELP_ALL = "--help-all"


def arrange_help(parser, prog: str, full: bool = False) -> None:
    """Lay out ``parser``'s help as :data:`HELP_GROUPS` says: the job's flags, then milegpo's groups, then the other
    TRL / transformers flags, listed only when ``full`` (``--help-all``), else named by a pointer (their help
    hidden: call it on a parser that prints its help, not on one that suggests flags for a typo)."""
    import argparse
    import dataclasses

    by_dest: dict[str, list] = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            by_dest.setdefault(action.dest, []).append((group, action))

    def move(names, title, description=None):
        target = parser.add_argument_group(title, description)
        for name in names:
            for group, action in by_dest.pop(name, ()):
                group._group_actions.remove(action)
                target._group_actions.append(action)
        return target

    move([f.name for f in dataclasses.fields(JobArguments)], f"job ({prog}: the policy and its warm start)")
    for title, names in HELP_GROUPS.items():
        move(names, title)
    rest = [name for name in by_dest if name != "help"]
    pointer = (f"{len(rest)} more flags: every other field of TRL's GRPOConfig and transformers' TrainingArguments "
               "(e.g. --gradient_accumulation_steps, --lr_scheduler_type, --save_steps, --vllm_mode)")
    others = move(rest, "TRL / transformers flags", pointer + ("." if full else f"; {prog} {HELP_ALL} lists them."))
    if not full:
        for action in others._group_actions:
            action.help = argparse.SUPPRESS
    parser.usage = f"{prog} [--flag value ...] [--config recipe.yaml]"
    parser.description = (f"milegpo's own flags first, then a pointer to TRL's and transformers' ({prog} {HELP_ALL} "
                          "lists every flag). A flag given wins over --config YAML, which wins over the defaults "
                          "shown; without --model_name_or_path they are the embedded tiny run's.")


__all__ = ["JobArguments", "HELP_GROUPS", "HELP_ALL", "arrange_help", "TINY_DEFAULTS", "TINY_RUN", "ENV_DEFAULTS", "ANY_KIND_TINY",
           "env_defaults", "saved_task_settings", "merged_env_options", "refuse_repeated_flags", "canonical_flags",
           "TASK_SETTINGS", "TASK_FIELDS", "EVAL_FIELDS"]
