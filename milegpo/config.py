"""MileGPOConfig: GRPOConfig plus the agent, environment and credit settings of a MileGPO run.

Every field is a command-line flag through ``trl.TrlParser``::

    parser = TrlParser(MileGPOConfig); (args,) = parser.parse_args_and_config()
    python train.py --groups_per_iteration 16 --group_size 8 --credit_method gigpo ...

Meaning of TRL's batch fields here: an *iteration* plays ``groups_per_iteration x
group_size`` episodes and yields one training row per environment step (a variable
number of rows). ``per_device_train_batch_size`` is the number of rows per forward /
backward chunk (memory); the rows of an iteration are split into
``steps_per_generation`` micro-steps (default ``gradient_accumulation_steps``, so one
optimizer step per iteration) and every micro-step into as many chunks as needed;
every row is trained on once per ``num_iterations``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig

from .credit import METHODS, VARIANTS, CreditConfig, check_method, presets
from .rollout.prompt import PROMPT_STYLES


@dataclass
class MileGPOConfig(GRPOConfig):
    r"""Configuration of :class:`~milegpo.trainer.MileGPOTrainer` (paper section 5 / spec section 10 defaults).

    Environment and tasks:
        env (`str`, defaults to `"household"`): environment kind (`Task.env`): `household`, `textworld`,
            `alfworld`; tasks come from `milegpo.envs.<env>_tasks`.
        train_split (`str`, defaults to `"train"`): split of the training tasks.
        num_train_tasks (`int`, defaults to `1000`): size of the training task set (seeds 0..n-1).
        task_type (`str`, defaults to `""`): restrict tasks to one task type ("" = all).
        horizon (`int`, defaults to `50`): step budget of an episode (ALFWorld 50, WebShop 30).
        num_env_workers (`int`, defaults to `0`): worker processes of the environment pool; 0 steps the
            environments in-process (`SequentialPool`).
        env_options (`dict` or `str`, *optional*): settings of the task generator `milegpo.envs.<env>_tasks`,
            as a dict or JSON string, e.g. `'{"max_receptacles": 4}'` (household: rooms of at most 4
            receptacles) or `'{"level": 10}'` (textworld).
    Rollout:
        groups_per_iteration (`int`, defaults to `16`): task groups per iteration, over all processes; each
            process plays `groups_per_iteration / world_size` whole groups.
        group_size (`int`, defaults to `8`): episodes per group (all play the same task); sets TRL's
            `num_generations`.
        history_length (`int`, defaults to `2`): (observation, action) pairs shown in the prompt.
        prompt_style (`str`, defaults to `"alfworld"`): the step prompt: `alfworld` (verl-agent's ALFWorld
            template, the paper's) or `compact` (the same facts without instructions, for tiny policies).
        require_think (`bool`, defaults to `False`): a completion without `<think>...</think>` is invalid.
    Credit:
        credit_method (`str`, defaults to `"milegpo"`): `grpo`, `gigpo`, `graphgpo` or `milegpo`.
        credit_variant (`str`, defaults to `"full"`): MileGPO ablation `md`, `rcs` or `full`.
        credit_preset (`str`, defaults to `"alfworld"`): `alfworld` or `webshop` (paper table 5).
        credit_overrides (`dict` or `str`, *optional*): CreditConfig fields to change, e.g.
            `'{"eta": 0.5}'` on the command line.
        credit_backend (`str`, defaults to `"auto"`): `auto`, `torch`, `triton` or `reference`.
        credit_device (`str`, defaults to `"auto"`): where credit is computed: `auto` (the process's
            accelerator when it is a CUDA device and the backend is not `reference`, so that `auto` runs the
            Triton kernels there; else the CPU), `cpu`, or a device such as `cuda:0`.
        invalid_action_penalty (`float`, defaults to `0.1`): subtracted from the episode score of an invalid
            row (replaces the preset's `invalid_penalty`).
    Loss:
        use_fused_loss (`bool`, *optional*): compute the policy loss with
            `milegpo_kernels.fused_policy_loss` (per-token log-probs gathered inside the loss from the last
            hidden states and the LM head, no (B, T, V) logits). Default: on with CUDA, off on CPU. The loss
            types `grpo`, `bnpo`, `dr_grpo`, `dapo` with token-level importance sampling are fused; other
            settings (sequence-level IS, off-policy or entropy masks, an entropy bonus, vLLM IS correction,
            DeepSpeed ZeRO-3 or FSDP, whose LM head weight is a shard outside the forward) use TRL's path.
    Evaluation:
        eval_splits (`list[str]`, defaults to `["id", "ood"]`): evaluation splits (ALFWorld valid_seen /
            valid_unseen); the first two give the reported gap `eval_<a>_minus_<b>`.
        num_eval_tasks (`int`, defaults to `64`): tasks per evaluation split.
        eval_group_size (`int`, defaults to `1`): episodes per evaluation task.
        eval_temperature (`float`, defaults to `0.4`): sampling temperature of evaluation episodes.
    """

    # ---- environment and tasks
    env: str = field(default="household", metadata={"help": "Environment kind (Task.env): household, textworld, "
                                                              "alfworld; tasks come from milegpo.envs.<env>_tasks."})
    train_split: str = field(default="train", metadata={"help": "Split of the training tasks."})
    num_train_tasks: int = field(default=1000, metadata={"help": "Number of training tasks (seeds 0..n-1)."})
    task_type: str = field(default="", metadata={"help": "Restrict tasks to one task type ('' = all types)."})
    horizon: int = field(default=50, metadata={"help": "Step budget of an episode (ALFWorld 50, WebShop 30)."})
    num_env_workers: int = field(default=0, metadata={"help": "Worker processes of the environment pool; 0 steps "
                                                               "environments in-process."})
    env_options: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Task generator settings (milegpo.envs.<env>_tasks keywords) as a dict or "
                                        "JSON string, e.g. '{\"max_receptacles\": 4}' (household rooms of at most "
                                        "4 receptacles)."})
    # ---- rollout
    groups_per_iteration: int = field(default=16, metadata={"help": "Task groups per iteration over all processes "
                                                                     "(each process plays whole groups)."})
    group_size: int = field(default=8, metadata={"help": "Episodes per task group (sets num_generations)."})
    history_length: int = field(default=2, metadata={"help": "(observation, action) pairs shown in the prompt."})
    prompt_style: str = field(default="alfworld", metadata={"help": "Step prompt: 'alfworld' (verl-agent's template, "
                                                                     "the paper's) or 'compact' (no instructions; for "
                                                                     "tiny policies trained from scratch)."})
    require_think: bool = field(default=False, metadata={"help": "Count a completion without <think>...</think> "
                                                                  "as an invalid action."})
    # ---- credit
    credit_method: str = field(default="milegpo", metadata={"help": "Advantage estimator: grpo, gigpo, graphgpo, "
                                                                     "milegpo."})
    credit_variant: str = field(default="full", metadata={"help": "MileGPO ablation: md, rcs, full."})
    credit_preset: str = field(default="alfworld", metadata={"help": "Credit preset (paper table 5): alfworld, "
                                                                      "webshop."})
    credit_overrides: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "CreditConfig fields to change, as a dict or JSON string, e.g. "
                                        "'{\"eta\": 0.5}'."})
    credit_backend: str = field(default="auto", metadata={"help": "Credit backend: auto, torch, triton, reference."})
    credit_device: str = field(default="auto", metadata={"help": "Where credit is computed: auto (the CUDA "
                                                                 "accelerator if any, else cpu), cpu, cuda:0, ..."})
    invalid_action_penalty: float = field(default=0.1, metadata={"help": "Episode-score penalty of an invalid row."})
    use_fused_loss: bool | None = field(
        default=None, metadata={"help": "Compute the policy loss with milegpo_kernels.fused_policy_loss (log-prob "
                                        "gather fused with the clipped loss, no full logits); default: on with "
                                        "CUDA, off on CPU."})
    # ---- evaluation
    eval_splits: list[str] = field(default_factory=lambda: ["id", "ood"],
                                   metadata={"help": "Evaluation splits; the first two give the reported gap."})
    num_eval_tasks: int = field(default=64, metadata={"help": "Tasks per evaluation split."})
    eval_group_size: int = field(default=1, metadata={"help": "Episodes per evaluation task."})
    eval_temperature: float = field(default=0.4, metadata={"help": "Sampling temperature of evaluation episodes."})

    # ---- GRPOConfig defaults changed to the paper's recipe (spec section 10)
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate (paper: 1e-6)."})
    beta: float = field(default=0.01, metadata={"help": "k3 KL coefficient (paper: 0.01)."})
    max_steps: int = field(default=300, metadata={"help": "Training iterations (paper: 300)."})
    max_completion_length: int | None = field(default=512, metadata={"help": "Tokens per step completion."})
    per_device_train_batch_size: int = field(default=8, metadata={"help": "Rows per forward/backward chunk."})
    logging_steps: float = field(default=1, metadata={"help": "Log every n iterations."})

    _VALID_DICT_FIELDS = GRPOConfig._VALID_DICT_FIELDS + ["credit_overrides", "env_options"]

    def __post_init__(self):
        if isinstance(self.credit_overrides, str):
            self.credit_overrides = json.loads(self.credit_overrides)
        if isinstance(self.env_options, str):
            self.env_options = json.loads(self.env_options) if self.env_options.strip() else None
        if self.env_options is not None and not isinstance(self.env_options, dict):
            raise ValueError(f"MileGPOConfig.env_options must be a dict or a JSON object string, "
                             f"got {self.env_options!r}")
        self.credit_method = self.credit_method.lower()
        check_method(self.credit_method, self.credit_variant)
        self.credit_config()  # fail early on a bad preset / override
        if self.credit_device != "auto":
            try:
                torch.device(self.credit_device)
            except (RuntimeError, TypeError) as e:
                raise ValueError(f"MileGPOConfig.credit_device must be 'auto' or a torch device, got "
                                 f"{self.credit_device!r} ({e})") from None
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"MileGPOConfig.prompt_style must be one of {PROMPT_STYLES}, got {self.prompt_style!r}")
        for name in ("groups_per_iteration", "group_size", "horizon", "num_train_tasks", "eval_group_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"MileGPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.history_length < 0 or self.num_eval_tasks < 0 or self.num_env_workers < 0:
            raise ValueError("MileGPOConfig: history_length, num_eval_tasks and num_env_workers must be >= 0")
        if self.num_train_tasks < self.groups_per_iteration:
            raise ValueError(f"num_train_tasks ({self.num_train_tasks}) must be >= groups_per_iteration "
                             f"({self.groups_per_iteration})")
        self.num_generations = self.group_size
        # TRL checks that its generation batch (rows of `per_device_train_batch_size` prompts repeated
        # `num_generations` times) holds whole prompt groups. Here a generation is a whole iteration of episodes,
        # grouped by task by construction, and per_device_train_batch_size only bounds memory; so the check is
        # satisfied with placeholders and the real values restored afterwards.
        spg = self.steps_per_generation or self.gradient_accumulation_steps
        if self.generation_batch_size is not None:
            raise ValueError("MileGPOConfig: set steps_per_generation, not generation_batch_size (an iteration is "
                             "groups_per_iteration x group_size episodes, a variable number of rows)")
        num_gen_eval = self.num_generations_eval
        self.num_generations, self.num_generations_eval = 2, 1
        self.steps_per_generation, self.generation_batch_size = None, None
        self.generation_batch_size = 2 * self.per_device_train_batch_size * spg * self._world_size_guess()
        try:
            super().__post_init__()
        finally:
            self.num_generations, self.num_generations_eval = self.group_size, num_gen_eval
        self.steps_per_generation = spg
        self.generation_batch_size = self.per_device_train_batch_size * self.world_size * spg
        if self.groups_per_iteration % self.world_size != 0:
            raise ValueError(f"groups_per_iteration ({self.groups_per_iteration}) must be divisible by the number "
                             f"of processes ({self.world_size}): every process plays whole task groups")

    def _world_size_guess(self) -> int:
        import os

        return int(os.environ.get("WORLD_SIZE", "1"))

    @property
    def groups_per_process(self) -> int:
        return self.groups_per_iteration // self.world_size

    def credit_config(self) -> CreditConfig:
        """The CreditConfig of this run: preset, overrides, and the invalid-action penalty."""
        cfg = presets.get_preset(self.credit_preset)
        if self.credit_overrides:
            cfg = cfg.replace(**self.credit_overrides)
        return cfg.replace(invalid_penalty=float(self.invalid_action_penalty))


__all__ = ["MileGPOConfig", "METHODS", "VARIANTS"]
