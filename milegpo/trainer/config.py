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

Every value the run cannot train with is refused at construction with a :class:`ConfigError`, one line that
names the field, the value and what is allowed. Where ``bf16`` is not given, it is on only where the machine
runs bf16 (GRPOConfig would turn it on anywhere, and fail on a CPU), and ``use_cpu`` is set where there is no
accelerator; a ``bf16=True`` given on a CPU still gets TRL's error.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import torch
from trl import GRPOConfig

from ..credit import BACKENDS, METHODS, VARIANTS, CreditConfig, check_fields, check_method, presets
from .constrained import MIN_CONSTRAINED_TOKENS, SAMPLING
from ..envs import EnvError, task_space
from ..envs.registry import UnknownKind
from ..envs.anchors import DEFAULT_STATE_ANCHOR, STATE_ANCHORS, check_state_anchor
from ..envs.pool import env_workers_setting
from ..rollout.loop import ENV_ERRORS
from ..rollout.prompt import PROMPT_STYLES
from ..rollout.tasks import check_env_options
from ..state_sketches import StateSimilarity


class ConfigError(ValueError):
    """A :class:`MileGPOConfig` value the run cannot train with; the message is one line naming the field, the
    value and what is allowed (``milegpo train`` prints it and exits 2)."""


def _refused(name: str, value: Any, allowed: str) -> ConfigError:
    shown = repr(value)
    if len(shown) > 160:  # one line: a 400-digit number in --credit_overrides is not shown whole
        shown = f"{shown[:100]}...({len(shown)} characters)"
    return ConfigError(f"MileGPOConfig.{name}={shown}: {allowed}")


class _KeyGivenTwice(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice (``json.loads`` keeps the last silently) is refused."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _KeyGivenTwice(f"key {key!r} given twice ({seen[key]!r}, then {value!r}): give it once")
        seen[key] = value
    return seen


#: the CreditConfig fields that a MileGPOConfig field of its own sets, which ``credit_overrides`` may not name
#: (the field's value would replace it silently): field -> the flag that sets it
SUPERSEDED_CREDIT_FIELDS = {"invalid_penalty": "invalid_action_penalty"}


def _json_object(name: str, value: Any) -> dict[str, Any] | None:
    """A dict field given as a dict, a JSON object string, or None / "" (none)."""
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value, object_pairs_hook=_unique_keys)
        except _KeyGivenTwice as e:
            raise _refused(name, value, str(e)) from None
        except json.JSONDecodeError as e:
            raise _refused(name, value, f"not valid JSON ({e}); expected a JSON object such as "
                                        "'{\"key\": 1}'") from None
    if value is not None and not isinstance(value, dict):
        raise _refused(name, value, "expected a dict or a JSON object string")
    return value


def _device_present(device: torch.device) -> bool:
    """Whether this machine has ``device`` (``cpu`` always; ``cuda:1`` only with two CUDA devices)."""
    if device.type == "cpu":
        return True
    backend = getattr(torch, device.type, None)
    if backend is None or not callable(getattr(backend, "is_available", None)) or not backend.is_available():
        return False
    count = backend.device_count() if callable(getattr(backend, "device_count", None)) else 1
    return device.index is None or device.index < count


def _has_accelerator() -> bool:
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    return accelerator.is_available() if accelerator is not None else torch.cuda.is_available()


@dataclass
class MileGPOConfig(GRPOConfig):
    r"""Configuration of :class:`~milegpo.trainer.MileGPOTrainer` (paper section 5 / spec section 10 defaults).

    Environment and tasks:
        env (`str`, defaults to `"household"`): environment kind (`Task.env`): `household`, `textworld`,
            `alfworld`, `webshop`, or any kind of the registry (`milegpo.envs.register`, an installed package's
            `milegpo.envs` entry point, a dotted path `package.module:Class`, `gym:<gymnasium id>`); tasks come from
            the kind's task function (`milegpo train` then defaults the kind's own settings,
            `milegpo.job.ENV_DEFAULTS`).
        train_split (`str`, defaults to `"train"`): split of the training tasks (one of the env's splits:
            `milegpo.envs.task_space(env).splits`).
        num_train_tasks (`int`, defaults to `1000`): size of the training task set (seeds 0..n-1).
        task_type (`str`, defaults to `""`): restrict tasks to one task type ("" = all).
        horizon (`int`, defaults to `50`): step budget of an episode (ALFWorld 50, WebShop 30).
        num_env_workers (`int` or `str`, defaults to `"auto"`): worker processes of the environment pool
            (`milegpo.envs.make_pool`). `"auto"`: the CPUs this process may use (`os.sched_getaffinity`) shared
            among the node's processes of the launch (`$LOCAL_WORLD_SIZE`), at most one per episode slot, and none
            (in-process) for worlds whose steps cost less than a round trip to a worker (household); an int:
            that many (0 steps the environments in-process, `SequentialPool`).
        env_errors (`str`, defaults to `"raise"`): an episode whose environment failed (its step raised, returned
            what the protocol does not take, e.g. a 4-tuple or a NaN reward, timed out, or lost its worker or
            server): `"raise"` stops the run when the iteration's rollout ends, with one line naming the
            environment, the method, the task and the error (`milegpo` exits 1); `"skip"` keeps the episode as it
            ended (truncated, not won) and counts it per iteration (`episode/env_errors` in the metrics, "env
            errors" on the console). A reset that fails always stops the run.
        env_step_timeout (`float`, defaults to `60.0`): seconds one environment step may take in a pool worker;
            past it the worker is killed and restarted and the step is a failure (`env_errors`). An in-process
            pool (`num_env_workers 0`, or `"auto"` for the household world) cannot time a step out.
        rollout_parts (`int`, defaults to `2`): the live episodes are split into this many fixed parts, one
            generation call each, so that the pool plays one part while the policy generates the next (the
            shorter of generation and environment time is hidden); 1: one call for all live episodes, no
            overlap. It sets the generation batches, hence a sampled rollout; the number of workers does not.
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
            template, the paper's), `webshop` (verl-agent's WebShop template) or `compact` (the same facts without
            instructions, for tiny policies).
        require_think (`bool`, defaults to `False`): a completion without `<think>...</think>` is invalid.
        state_anchor (`str`, defaults to `"tracked+actions"`): what a row's state key is made of
            (`milegpo.envs.anchors`): `observation` (the observation text alone, the key of runs before anchors;
            verl-agent's GiGPO anchor), `observation+actions` (with the sorted admissible actions), `tracked`
            (with the environment tracker's context line: household / ALFWorld the object in hand, its
            processing and the objects moved; WebShop the query, results page, product and selected options;
            TextWorld the inventory), `tracked+actions` (both: the public GraphGPO recipe's key), or a dotted
            path to a callable `(observation, context, admissible) -> text`. A world without a tracker has an
            empty context.
        show_state_context (`bool`, defaults to `True`): show the tracker's context line after the observation in
            the prompt (independent of `state_anchor`, so key and prompt ablate apart).
        constrain_actions (`bool`, defaults to `False`): the text inside `<action>...</action>` is constrained to
            the row's admissible actions while generating (`milegpo.trainer.constrained`: transformers'
            `prefix_allowed_tokens_fn` over a token trie; with `use_vllm`, vLLM's structured outputs, one regex per
            row, colocate mode with `vllm_tensor_parallel_size=1`); a template such as WebShop's
            `search[<your query>]` is its fixed prefix `search[` then free text up to `]`. Logged as
            `constrain_actions` when on.
        constrain_query (`bool`, defaults to `False`): with `constrain_actions`, a template's query (WebShop's
            search text) is a sequence of the goal's words (`milegpo.envs.base.goal_words`: WebShop's instruction,
            lower-cased, each word once), separated by single spaces: the policy picks the words, their order and
            the query's length, and writes no other word (vLLM: the same rule in the row's regex). Logged as
            `constrain_query` when on. Needs `constrain_actions`.
        constrained_sampling (`str`, defaults to `"token"`): with `constrain_actions`, how an action is drawn from
            the row's admissible ones: `token` (token by token, each renormalised over the admissible continuations:
            a first token's mass goes to the actions that begin with it, so where `take` is likely some `take X` is
            taken whatever the model thinks of X) or `sequence` (each admissible action by its whole probability at
            the sampling temperature over their sum: the model's distribution conditioned on an admissible action;
            two extra forward passes per row when its action block opens, of its text and of its actions;
            transformers generation only, no template actions). `milegpo.trainer.constrained`. Logged as
            `constrained_sampling_sequence` when `sequence`.
    Credit:
        credit_method (`str`, defaults to `"milegpo"`): a name of `milegpo.credit.METHODS`: `grpo`, `gigpo`,
            `graphgpo`, `milegpo`, `hgpo`, `g2po`, `beacon` (reads the rows' milestones: the environment's
            `info["milestone"]`), or one added by `milegpo.credit.register`.
        credit_variant (`str`, defaults to `"full"`): the method's variant: MileGPO's ablation `md`, `rcs` or
            `full`; `full`, the only one, for the others.
        credit_preset (`str`, defaults to `"alfworld"`): a name of `milegpo.credit.presets.PRESETS`: `alfworld` /
            `webshop` (= `alfworld_paper` / `webshop_paper`: paper table 5 under the paper's reading),
            `scienceworld` (`alfworld`'s values; BEACON reads its ScienceWorld script's gamma and w; `milegpo
            train --env scienceworld`'s default), `alfworld_spec` / `webshop_spec` (the spec's reading),
            `gigpo_reference`, `graphgpo_reference` and
            their `_webshop` variants (what verl-agent's code computes with its ALFWorld / WebShop scripts),
            `graphgpo_reproduction` (the recipe as issue 33 described it), `beacon_alfworld` / `beacon_webshop` /
            `beacon_scienceworld` (BEACON's official scripts; p is `invalid_action_penalty` here: 1 for WebShop's).
        credit_overrides (`dict` or `str`, *optional*): CreditConfig fields to change, e.g.
            `'{"eta": 0.5}'` on the command line. Only fields the run's method reads (its declaration,
            `milegpo.credit.field_readers`): another is refused, naming the methods that read it. The preset's
            own values are never refused (a preset holds every method's fields; each reads its own).
        credit_backend (`str`, defaults to `"auto"`): `auto`, `torch`, `triton` or `reference`.
        credit_device (`str`, defaults to `"auto"`): where credit is computed: `auto` (the process's
            accelerator when it is a CUDA device and the backend is not `reference`, so that `auto` runs the
            Triton kernels there; else the CPU), `cpu`, or a device such as `cuda:0`.
        invalid_action_penalty (`float`, defaults to `0.1`): subtracted from the episode score of an invalid
            row (replaces the preset's `invalid_penalty`).
        state_similarity (`float`, *optional*): merge near-duplicate observations of a task group into one
            state before credit (every method): observations whose token-shingle Jaccard similarity is at
            least this threshold, in (0, 1], transitively (`milegpo.credit.merge_similar_states`; MinHash
            sketches made as observations arrive, the merge on the credit device). Default: off (exact keys).
        state_similarity_verify (`bool`, defaults to `True`): check every LSH candidate pair against the exact
            similarity (no false merges); off: every candidate pair merges.
        state_similarity_shingle (`int`, defaults to `2`): tokens per shingle (1: bags of words).
    Loss:
        use_fused_loss (`bool`, *optional*): compute the policy loss with
            `milegpo_kernels.fused_policy_loss` (per-token log-probs gathered inside the loss from the last
            hidden states and the LM head, no (B, T, V) logits). Default: on with CUDA, off on CPU. The loss
            types `grpo`, `bnpo`, `dr_grpo`, `dapo` with token-level importance sampling are fused; other
            settings (sequence-level IS, off-policy or entropy masks, an entropy bonus, vLLM IS correction,
            DeepSpeed ZeRO-3 or FSDP, whose LM head weight is a shard outside the forward) use TRL's path.
    Evaluation:
        eval_splits (`list[str]`, *optional*): evaluation splits; the first two give the reported gap
            `eval_<a>_minus_<b>`. Default: the env's own (`milegpo.envs.task_space(env).eval_splits`): `["id", "ood"]`
            (ALFWorld valid_seen / valid_unseen; household, textworld), `["test"]` (webshop).
        num_eval_tasks (`int`, defaults to `48`): tasks per evaluation split.
        eval_group_size (`int`, defaults to `1`): episodes per evaluation task.
        eval_temperature (`float`, defaults to `0.4`): sampling temperature of evaluation episodes.
    Environment_factory environments (`MileGPOTrainer(..., environment_factory=MyEnv)`, TRL's tool-calling
    protocol; `milegpo.rollout.tools`; `horizon` is the most assistant turns of an episode there):
        success_threshold (`float`, defaults to `0.5`): an episode whose reward (`get_reward()`, plus the
            reward functions' weighted sum where given) is at least this is a success.
        tool_timeout (`float`, *optional*, defaults to `60.0`): seconds a tool call may take; a call past it
            truncates its episode (the step's observation says so). None: no limit (and the calls run one after
            another in the main thread; with a timeout the calls of different episodes run at the same time).
        GRPOConfig's `max_tool_calling_iterations` is not read (`horizon` is the turn budget): a value other than
            `horizon - 1` is refused.
    Also taken: `overwrite_output_dir` (transformers 4's argument, not a field of transformers 5's
        TrainingArguments; `milegpo train --overwrite_output_dir` is the job's flag): the trainer writes into
        `output_dir` either way, so it changes nothing here; it is kept as an attribute.
    """

    # ---- environment and tasks
    env: str = field(default="household", metadata={"help": "Environment kind (Task.env): household, textworld, "
                                                              "alfworld, webshop, a kind registered with "
                                                              "milegpo.envs.register or an installed package's "
                                                              "entry point, a dotted path package.module:Class, "
                                                              "or gym:<gymnasium id>."})
    train_split: str = field(default="train", metadata={"help": "Split of the training tasks."})
    num_train_tasks: int = field(default=1000, metadata={"help": "Number of training tasks (seeds 0..n-1)."})
    task_type: str = field(default="", metadata={"help": "Restrict tasks to one task type ('' = all types)."})
    horizon: int = field(default=50, metadata={"help": "Step budget of an episode (ALFWorld 50, WebShop 30)."})
    num_env_workers: int | str | None = field(
        default="auto", metadata={"help": "Worker processes of the environment pool: 'auto' (the CPUs this process "
                                          "may use shared among the node's processes, at most one per slot; "
                                          "in-process for worlds with cheap steps, e.g. household) or an int (0: "
                                          "in-process)."})
    env_errors: str = field(default="raise", metadata={
        "help": "An episode whose environment failed (raised, bad return, timeout): 'raise' stops the run in one "
                "line naming it; 'skip' keeps it (truncated) and counts it per iteration (episode/env_errors)."})
    env_step_timeout: float = field(default=60.0, metadata={
        "help": "Seconds one environment step may take in a pool worker (then it is a failure, see env_errors); "
                "an in-process pool (num_env_workers 0) cannot time a step out."})
    rollout_parts: int = field(default=2, metadata={"help": "Generation calls per environment step of the live "
                                                             "episodes: the pool plays one part while the policy "
                                                             "generates the next (1: no overlap)."})
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
                                                                     "the paper's), 'webshop' (verl-agent's WebShop "
                                                                     "template) or 'compact' (no instructions; for "
                                                                     "tiny policies trained from scratch)."})
    require_think: bool = field(default=False, metadata={"help": "Count a completion without <think>...</think> "
                                                                  "as an invalid action."})
    state_anchor: str = field(default=DEFAULT_STATE_ANCHOR, metadata={
        "help": "What a state key is made of: observation (the text alone, as before anchors), observation+actions, "
                "tracked (with the env tracker's context line), tracked+actions (both: GraphGPO's recipe), or a "
                "dotted path to a callable (observation, context, admissible) -> text."})
    show_state_context: bool = field(default=True, metadata={
        "help": "Show the state tracker's context line after the observation in the prompt (what the agent holds, "
                "the WebShop options selected...); independent of --state_anchor."})
    constrain_actions: bool = field(default=False, metadata={
        "help": "Constrain the text inside <action>...</action> to the row's admissible actions while generating "
                "(transformers: a token trie; vLLM colocate: structured outputs); a template such as "
                "search[<your query>] keeps its prefix and takes free text up to ']'."})
    constrain_query: bool = field(default=False, metadata={
        "help": "With --constrain_actions: a template's query (WebShop's search text) is made of the goal's words "
                "only (any of them, any order, separated by single spaces)."})
    constrained_sampling: str = field(default="token", metadata={
        "help": "With --constrain_actions, how an action is drawn: token (each token renormalised over the admissible "
                "continuations) or sequence (each admissible action by its whole probability; transformers only)."})
    # ---- credit
    credit_method: str = field(default="milegpo", metadata={"help": f"Advantage estimator: {', '.join(METHODS)} "
                                                                     "(milegpo.credit.METHODS)."})
    credit_variant: str = field(default="full", metadata={"help": "The method's variant: md, rcs, full (MileGPO's "
                                                                  "ablations); full for the others."})
    credit_preset: str = field(default="alfworld", metadata={"help": "Credit preset (milegpo.credit.presets): "
                                                                      "alfworld, webshop (the paper's reading of "
                                                                      "table 5; = alfworld_paper, webshop_paper), "
                                                                      "scienceworld (alfworld's values, BEACON's "
                                                                      "ScienceWorld gamma and w), "
                                                                      "alfworld_spec, webshop_spec, gigpo_reference"
                                                                      "[_webshop], graphgpo_reference[_webshop] "
                                                                      "(verl-agent's code), graphgpo_reproduction, "
                                                                      "beacon_alfworld, beacon_webshop, "
                                                                      "beacon_scienceworld (BEACON's scripts)."})
    credit_overrides: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "CreditConfig fields to change, as a dict or JSON string, e.g. "
                                        "'{\"eta\": 0.5}': fields the method reads only."})
    credit_backend: str = field(default="auto", metadata={"help": "Credit backend: auto, torch, triton, reference."})
    credit_device: str = field(default="auto", metadata={"help": "Where credit is computed: auto (the CUDA "
                                                                 "accelerator if any, else cpu), cpu, cuda:0, ..."})
    invalid_action_penalty: float = field(default=0.1, metadata={"help": "Episode-score penalty of an invalid row."})
    state_similarity: float | None = field(
        default=None, metadata={"help": "Merge observations of a task group whose token-shingle Jaccard similarity "
                                        "is at least this threshold in (0, 1] into one state before credit "
                                        "(transitively); default: off, exact state keys."})
    state_similarity_verify: bool = field(default=True, metadata={"help": "Check LSH candidate pairs against the "
                                                                          "exact similarity (no false merges)."})
    state_similarity_shingle: int = field(default=2, metadata={"help": "Tokens per shingle of state_similarity."})
    use_fused_loss: bool | None = field(
        default=None, metadata={"help": "Compute the policy loss with milegpo_kernels.fused_policy_loss (log-prob "
                                        "gather fused with the clipped loss, no full logits); default: on with "
                                        "CUDA, off on CPU."})
    # ---- evaluation
    eval_splits: list[str] | None = field(default=None, metadata={
        "help": "Evaluation splits; the first two give the reported gap. Default: the env's (id ood; webshop: test)."})
    num_eval_tasks: int = field(default=48, metadata={"help": "Tasks per evaluation split (0: no evaluation)."})
    eval_group_size: int = field(default=1, metadata={"help": "Episodes per evaluation task."})
    eval_temperature: float = field(default=0.4, metadata={"help": "Sampling temperature of evaluation episodes."})

    # ---- environment_factory environments (TRL's tool-calling protocol; milegpo.rollout.tools)
    success_threshold: float = field(default=0.5, metadata={
        "help": "With environment_factory: an episode whose reward (get_reward(), plus the reward functions' "
                "weighted sum where given) is at least this is a success."})
    tool_timeout: float | None = field(default=60.0, metadata={
        "help": "With environment_factory: seconds a tool call may take; a call past it truncates its episode "
                "(None: no limit)."})

    # ---- GRPOConfig defaults changed to the paper's recipe (spec section 10)
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate (paper: 1e-6)."})
    beta: float = field(default=0.01, metadata={"help": "k3 KL coefficient to the reference policy (paper: 0.01; "
                                                     "the embedded tiny model: 0.04, to its warm start)."})
    max_steps: int = field(default=300, metadata={"help": "Training iterations (paper: 300)."})
    max_completion_length: int | None = field(default=512, metadata={"help": "Tokens per step completion."})
    per_device_train_batch_size: int = field(default=8, metadata={"help": "Rows per forward/backward chunk."})
    logging_steps: float = field(default=1, metadata={"help": "Log every n iterations."})
    # TRL's configs default the deprecated alias `gradient_checkpointing` to True, which makes transformers warn
    # (FutureWarning) on every config; the same default under the current name, the alias left unset
    activation_checkpointing: bool | None = field(default=True, metadata={
        "help": "Recompute activations in the backward pass (less memory, ~20%% slower): TRL's default, on."})
    gradient_checkpointing: bool | None = field(default=None, metadata={
        "help": "Deprecated alias of --activation_checkpointing (transformers removes it in v6).", "nargs": "?",
        "const": True})

    _VALID_DICT_FIELDS = GRPOConfig._VALID_DICT_FIELDS + ["credit_overrides", "env_options"]
    #: True once a saved policy's task settings have been decided for this config (:meth:`with_task_settings`,
    #: or ``milegpo train`` / ``eval``, whose flags win over them): MileGPOTrainer then takes the config as it is
    task_settings_applied: ClassVar[bool] = False
    #: transformers 4's TrainingArguments field, taken (not a flag: ``milegpo train`` has its own of that name)
    overwrite_output_dir: dataclasses.InitVar[bool] = False

    def __post_init__(self, overwrite_output_dir: bool = False):
        self.overwrite_output_dir = bool(overwrite_output_dir)
        self.credit_overrides = _json_object("credit_overrides", self.credit_overrides)
        for key, flag in SUPERSEDED_CREDIT_FIELDS.items():
            if self.credit_overrides and key in self.credit_overrides:
                raise _refused("credit_overrides", self.credit_overrides, f"key {key!r} is set by {flag} (which "
                               f"would replace it): give {flag} {self.credit_overrides[key]!r} instead")
        self.env_options = _json_object("env_options", self.env_options)
        self._check_values()
        if self.bf16 is None and not self.fp16:
            # GRPOConfig turns bf16 on wherever fp16 is off, and transformers then refuses a machine without it
            self.bf16 = not self.use_cpu and _bf16_on_accelerator()
            self.use_cpu = self.use_cpu or not _has_accelerator()
        if self.gradient_checkpointing is not None:  # the deprecated alias given: it decides (transformers warns)
            if self.activation_checkpointing is True:  # MileGPOConfig's default
                self.activation_checkpointing = None
            elif self.activation_checkpointing != self.gradient_checkpointing:
                raise _refused("gradient_checkpointing", self.gradient_checkpointing, f"contradicts "
                               f"activation_checkpointing={self.activation_checkpointing}, of which it is the "
                               "deprecated alias: set activation_checkpointing only")
        self.num_generations = self.group_size
        # TRL checks that its generation batch (rows of `per_device_train_batch_size` prompts repeated
        # `num_generations` times) holds whole prompt groups. Here a generation is a whole iteration of episodes,
        # grouped by task by construction, and per_device_train_batch_size only bounds memory; so the check is
        # satisfied with placeholders and the real values restored afterwards.
        spg = self.steps_per_generation or self.gradient_accumulation_steps
        if self.generation_batch_size is not None:
            raise _refused("generation_batch_size", self.generation_batch_size, "leave it unset and set "
                           "steps_per_generation (an iteration is groups_per_iteration x group_size episodes, a "
                           "variable number of rows)")
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
            raise _refused("groups_per_iteration", self.groups_per_iteration, f"must be divisible by the number of "
                           f"processes ({self.world_size}): every process plays whole task groups")
        self._check_reporting()

    def _check_reporting(self) -> None:
        """Refuse a ``report_to`` backend that is not installed here (transformers would fail when the trainer
        is built, after the warm start)."""
        from transformers.integrations import get_available_reporting_integrations

        available = get_available_reporting_integrations()
        missing = [name for name in (self.report_to or []) if name not in available]
        if missing:
            raise _refused("report_to", self.report_to if len(self.report_to) > 1 else self.report_to[0],
                           f"{', '.join(missing)} is not installed here; installed: {', '.join(available) or 'none'} "
                           "(or 'none')")

    def _check_types(self) -> None:
        """Refuse a value of another type than MileGPOConfig's own field declares: a switch (``bool``) that is not a
        bool (the string ``"false"`` is truthy: it acted as True), a count (``int``) that is a float or a bool
        (``horizon=2.5`` played 3-step episodes). Fields that also take None take it; GRPOConfig's fields are
        TrainingArguments' to check."""
        for name, declared in MileGPOConfig.__dict__.get("__annotations__", {}).items():
            kinds = {part.strip() for part in str(declared).split("|")}
            value = getattr(self, name, None)
            if value is None and "None" in kinds:
                continue
            if kinds <= {"bool", "None"} and not isinstance(value, bool):
                raise _refused(name, value, f"expected a bool (True or False), got a {type(value).__name__}")
            if kinds <= {"int", "None"} and (isinstance(value, bool) or not isinstance(value, int)):
                raise _refused(name, value, f"expected an int, got a {type(value).__name__}")
            if kinds <= {"float", "None"} and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise _refused(name, value, f"expected a number, got a {type(value).__name__}")

    def _check_values(self) -> None:
        """Refuse, with a :class:`ConfigError` naming the field, the value and what is allowed, every value the
        run cannot train with; fills ``eval_splits`` with the env's own when it is not given."""
        self._check_types()
        try:
            space = task_space(self.env)  # the registry: registered, an entry point, a dotted path, gym:<id>
        except UnknownKind as e:
            raise _refused("env", self.env, f"not an environment kind; known: {', '.join(e.known)}") from None
        except EnvError as e:
            raise _refused("env", self.env, str(e)) from None
        if self.train_split not in space.splits:
            raise _refused("train_split", self.train_split, f"not a split of env {self.env!r}; its splits: "
                                                            f"{', '.join(space.splits)}")
        if self.eval_splits is None:
            self.eval_splits = list(space.eval_splits)
            self._env_eval_splits = True  # the env's own: they follow the env (with_task_settings)
        if isinstance(self.eval_splits, str) or not self.eval_splits:
            raise _refused("eval_splits", self.eval_splits, f"expected a non-empty list of splits of env {self.env!r} "
                                                            f"({', '.join(space.splits)}); num_eval_tasks=0 turns "
                                                            "evaluation off")
        unknown = [split for split in self.eval_splits if split not in space.splits]
        if unknown or len(set(self.eval_splits)) != len(self.eval_splits):
            problem = f"unknown split(s) {unknown}" if unknown else "a split given twice"
            raise _refused("eval_splits", self.eval_splits, f"{problem}; the splits of env {self.env!r}: "
                                                            f"{', '.join(space.splits)}")
        if self.task_type and space.task_types is not None and self.task_type not in space.task_types:
            raise _refused("task_type", self.task_type, f"not a task type of env {self.env!r}; '' (all) or one of "
                                                        f"{', '.join(space.task_types)}")
        try:
            check_env_options(self.env, self.env_options)
        except ValueError as e:
            raise _refused("env_options", self.env_options, str(e)) from None
        self.credit_method = self.credit_method.lower()
        if self.credit_method not in METHODS:
            raise _refused("credit_method", self.credit_method, f"unknown credit method; one of {', '.join(METHODS)}")
        if self.credit_variant not in VARIANTS:
            raise _refused("credit_variant", self.credit_variant, f"unknown MileGPO variant; one of "
                                                                  f"{', '.join(VARIANTS)}")
        try:  # the method's own variants (was: ignored, a run of hgpo 'md' was hgpo): the rule estimate applies
            check_method(self.credit_method, self.credit_variant)
        except ValueError as e:
            raise _refused("credit_variant", self.credit_variant, str(e).split(", got")[0]) from None
        if not isinstance(self.credit_preset, str) or self.credit_preset.lower() not in presets.PRESETS:
            raise _refused("credit_preset", self.credit_preset, f"unknown credit preset; one of "
                                                                f"{', '.join(sorted(presets.PRESETS))}")
        try:
            overridden = self._preset_with_overrides()
        except (TypeError, ValueError) as e:
            raise _refused("credit_overrides", self.credit_overrides, str(e)) from None
        try:  # fields the method does not read: given to it, they were ignored (the rule estimate applies)
            check_fields(self.credit_method, overridden.changed)
        except ValueError as e:
            raise _refused("credit_overrides", self.credit_overrides, str(e)) from None
        try:
            overridden.replace(invalid_penalty=float(self.invalid_action_penalty))
        except (TypeError, ValueError) as e:
            raise _refused("invalid_action_penalty", self.invalid_action_penalty, str(e)) from None
        if self.credit_backend not in BACKENDS:
            raise _refused("credit_backend", self.credit_backend, f"unknown credit backend; one of "
                                                                  f"{', '.join(BACKENDS)}")
        if self.credit_device != "auto":
            try:
                device = torch.device(self.credit_device)
            except (RuntimeError, TypeError) as e:
                raise _refused("credit_device", self.credit_device, f"expected 'auto' or a torch device such as 'cpu' "
                                                                    f"or 'cuda:0' ({e})") from None
            if not _device_present(device):
                raise _refused("credit_device", self.credit_device, "no such device on this machine; 'auto', 'cpu' or "
                                                                    "a device it has")
        try:
            self.state_similarity_params()
        except (TypeError, ValueError) as e:
            name = "state_similarity_shingle" if "shingle" in str(e) else "state_similarity"
            raise _refused(name, getattr(self, name), str(e)) from None
        if not isinstance(self.state_anchor, str):
            raise _refused("state_anchor", self.state_anchor, f"a name ({', '.join(STATE_ANCHORS)}) or a dotted path "
                                                              "to a callable")
        try:
            check_state_anchor(self.state_anchor)
        except ValueError as e:
            raise _refused("state_anchor", self.state_anchor, str(e)) from None
        if isinstance(self.success_threshold, bool) or not isinstance(self.success_threshold, (int, float)) \
                or not math.isfinite(self.success_threshold):
            raise _refused("success_threshold", self.success_threshold, "a finite number")
        if self.tool_timeout is not None and (isinstance(self.tool_timeout, bool) or not isinstance(
                self.tool_timeout, (int, float)) or not math.isfinite(self.tool_timeout) or self.tool_timeout <= 0):
            raise _refused("tool_timeout", self.tool_timeout, "a number of seconds > 0, or None (no limit)")
        if self.env_errors not in ENV_ERRORS:
            raise _refused("env_errors", self.env_errors, f"one of {', '.join(ENV_ERRORS)}")
        if isinstance(self.env_step_timeout, bool) or not isinstance(self.env_step_timeout, (int, float)) or \
                not math.isfinite(self.env_step_timeout) or self.env_step_timeout <= 0:
            raise _refused("env_step_timeout", self.env_step_timeout, "a number of seconds > 0")
        iterations = self.max_tool_calling_iterations
        if iterations is not None and (isinstance(iterations, bool) or not isinstance(iterations, int)
                                       or iterations + 1 != self.horizon):
            raise _refused("max_tool_calling_iterations", iterations, "GRPOTrainer's tool-calling budget is not read: "
                           f"MileGPOTrainer's is horizon (assistant turns, one more than the tool-calling iterations; "
                           f"now {self.horizon}): set horizon instead and leave this unset")
        if self.prompt_style not in PROMPT_STYLES:
            raise _refused("prompt_style", self.prompt_style, f"one of {', '.join(PROMPT_STYLES)}")
        at_least = {"groups_per_iteration": 1, "horizon": 1, "num_train_tasks": 1, "eval_group_size": 1,
                    "max_steps": 1, "per_device_train_batch_size": 1, "history_length": 0, "num_eval_tasks": 0,
                    "rollout_parts": 1}
        try:
            self.num_env_workers = env_workers_setting(self.num_env_workers)
        except ValueError:
            raise _refused("num_env_workers", self.num_env_workers, "must be 'auto' or an int >= 0 (0: in-process)") from None
        for name, low in at_least.items():
            if getattr(self, name) < low:
                raise _refused(name, getattr(self, name), f"must be >= {low}")
        if self.group_size < 2:
            raise _refused("group_size", self.group_size, "must be >= 2: credit compares the episodes of a group "
                                                          "(it sets TRL's num_generations, which needs 2)")
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise _refused("max_completion_length", self.max_completion_length, "must be >= 1 (tokens per step)")
        for name in ("beta", "learning_rate"):
            if not getattr(self, name) >= 0:
                raise _refused(name, getattr(self, name), "must be >= 0")
        self._check_training_values()
        for name in ("temperature", "eval_temperature"):
            if not getattr(self, name) > 0:
                raise _refused(name, getattr(self, name), "must be > 0 (a sampling temperature)")
        for name in ("top_p",):
            if not 0 < getattr(self, name) <= 1:
                raise _refused(name, getattr(self, name), "must be in (0, 1]")
        if self.constrain_actions and self.max_completion_length is not None and \
                self.max_completion_length < MIN_CONSTRAINED_TOKENS:
            raise _refused("max_completion_length", self.max_completion_length, f"must be >= "
                           f"{MIN_CONSTRAINED_TOKENS} with constrain_actions (<action>, an action of one token or "
                           "more, </action> and EOS; the longest admissible action needs more)")
        if self.constrain_query and not self.constrain_actions:
            raise _refused("constrain_query", True, "needs constrain_actions=True (it constrains the query inside a "
                                                    "constrained action block; with --constrain_actions false pass "
                                                    "--constrain_query false too)")
        if self.constrained_sampling not in SAMPLING:
            raise _refused("constrained_sampling", self.constrained_sampling, f"must be one of {', '.join(SAMPLING)}")
        if self.constrained_sampling == "sequence" and not self.constrain_actions:
            raise _refused("constrained_sampling", "sequence", "needs constrain_actions=True (it draws among the "
                                                               "admissible actions)")
        if self.constrained_sampling == "sequence" and self.use_vllm:
            raise _refused("constrained_sampling", "sequence", "is not available with use_vllm (vLLM's structured "
                                                               "outputs draw token by token); use 'token' there")
        if self.constrain_actions and self.use_vllm and self.vllm_mode != "colocate":
            raise _refused("constrain_actions", True, f"with use_vllm needs vllm_mode='colocate' (got "
                                                      f"{self.vllm_mode!r}: TRL's vLLM client sends one structured-"
                                                      "outputs regex per request batch, the rows need one each)")
        if self.constrain_actions and self.use_vllm and self.vllm_tensor_parallel_size != 1:
            raise _refused("constrain_actions", True, "with use_vllm needs vllm_tensor_parallel_size=1 (got "
                                                      f"{self.vllm_tensor_parallel_size})")

    def _check_training_values(self) -> None:
        """The TrainingArguments / GRPOConfig values transformers and TRL accept and a run then fails on or
        ignores: an empty output_dir, a seed numpy refuses, save_steps 0 with save_strategy steps, no
        gradient-accumulation step, no pass over an iteration's rows, a negative clip range or weight decay."""
        if self.output_dir is not None and not str(self.output_dir).strip():  # None: transformers' default
            raise _refused("output_dir", self.output_dir, "a folder is needed (where the run writes)")
        for name in ("seed", "data_seed"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 2 ** 32:
                raise _refused(name, value, "must be in [0, 2**32 - 1] (numpy's seeds)")
        if getattr(self.save_strategy, "value", self.save_strategy) == "steps" and not self.save_steps > 0:
            raise _refused("save_steps", self.save_steps, "must be > 0 with save_strategy='steps' (a checkpoint "
                                                          "every save_steps iterations)")
        for name in ("gradient_accumulation_steps", "num_iterations"):
            if getattr(self, name) < 1:
                raise _refused(name, getattr(self, name), "must be >= 1")
        for name in ("epsilon", "weight_decay"):
            if not getattr(self, name) >= 0:
                raise _refused(name, getattr(self, name), "must be >= 0")
        if self.epsilon_high is not None and not self.epsilon_high >= 0:
            raise _refused("epsilon_high", self.epsilon_high, "must be >= 0")

    def with_task_settings(self, settings: Mapping[str, Any]) -> "MileGPOConfig":
        """A copy of this config that plays the games a saved policy was trained on, as ``milegpo eval`` and
        ``milegpo train --model_name_or_path`` of it do.

        settings: the task settings saved beside the policy (``milegpo_task.json``,
        :func:`milegpo.trainer.saved_policy.saved_task_settings`: its env, task type, horizon, env options, prompt...).
        They fill the fields this config leaves at MileGPOConfig's defaults (a value set to something else
        wins, as a command-line flag does; one set to the default itself cannot be told from it), and only
        when the policy was trained on this config's env or ``env`` is left at its default: saved settings
        apply to the env they were saved for. Evaluation splits that were the env's own follow the env. The
        copy is checked again (:class:`ConfigError`) and marked :attr:`task_settings_applied` (a config so
        marked is returned as it is, and so is one the settings change nothing in); ``self`` is unchanged."""
        unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ConfigError(f"saved task settings name no MileGPOConfig field: {unknown}")
        saved_env = settings.get("env", "household")
        if self.task_settings_applied or (saved_env != self.env and not self._at_default("env")):
            return self
        updates = {k: v for k, v in settings.items() if self._at_default(k) and getattr(self, k) != v}
        if not updates:
            return self
        updated = copy.copy(self)
        updated.task_settings_applied = True
        for name, value in updates.items():
            setattr(updated, name, value)
        if "env" in updates and getattr(self, "_env_eval_splits", False):
            updated.eval_splits = None
        updated.env_options = _json_object("env_options", updated.env_options)
        updated._check_values()
        return updated

    def _at_default(self, name: str) -> bool:
        """Whether field ``name`` holds MileGPOConfig's default."""
        spec = self.__dataclass_fields__[name]
        default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
        return getattr(self, name) == default

    def _world_size_guess(self) -> int:
        import os

        return int(os.environ.get("WORLD_SIZE", "1"))

    @property
    def groups_per_process(self) -> int:
        return self.groups_per_iteration // self.world_size

    def _preset_with_overrides(self) -> CreditConfig:
        cfg = presets.get_preset(self.credit_preset)
        return cfg.replace(**self.credit_overrides) if self.credit_overrides else cfg

    def state_similarity_params(self) -> StateSimilarity | None:
        """The near-duplicate rule of this run (``state_similarity``), or None when it is off."""
        if self.state_similarity is None:
            return None
        return StateSimilarity(float(self.state_similarity), shingle_width=int(self.state_similarity_shingle),
                               verify=bool(self.state_similarity_verify))

    def credit_config(self) -> CreditConfig:
        """The CreditConfig of this run: preset, overrides, and the invalid-action penalty."""
        return self._preset_with_overrides().replace(invalid_penalty=float(self.invalid_action_penalty))


def _bf16_on_accelerator() -> bool:
    from transformers.utils import is_torch_bf16_gpu_available

    return is_torch_bf16_gpu_available()


__all__ = ["MileGPOConfig", "ConfigError", "METHODS", "VARIANTS"]
