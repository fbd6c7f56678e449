"""Episodes played in-process, one row per step, with the world's ground-truth step labels on request.

:func:`play_episode` plays one episode of a :class:`~milegpo.envs.TextEnv` with any action chooser (an expert
with random actions, a tabular policy, a recorded action list) and records the spec's row fields; with
``label=True`` it also records :meth:`TextEnv.steps_to_win` before and after every action (privileged
knowledge, asked only here, so training pays nothing for it). :func:`labelled_batch` turns played
episodes into a :class:`LabelledBatch` (:func:`step_batch`: their rows alone).

Batches of known mixed skill: :func:`play_mixed_expert` (the world's expert, a random action at a rate
epsilon drawn per trajectory). Batches of a trained policy: :func:`play_checkpoint` plays a saved policy
(``milegpo train`` saves ``milegpo_run/final``) through the trainer's own episode loop, then
:func:`replay_labels` replays every trajectory's actions in a fresh environment to label its steps
(the worlds are deterministic; a replay that reaches another observation is an error naming the step).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..credit import SINK, StepBatch
from ..envs import NOTHING_HAPPENS, Task, TextEnv, env_class, make_env
from ..envs.anchors import AnchorSpec, check_state_anchor
from ..envs.base import UNWINNABLE
from ..rollout import Rollout, StepRow

#: chooser(observation, admissible actions, step index) -> the action to play
Chooser = Callable[[str, list, int], str]


@dataclass
class PlayedEpisode:
    """One trajectory: the task, the per-step fields (spec section 1), the score, and, when labelled, steps-to-win."""

    task: Task
    state: list = field(default_factory=list)
    next_state: list = field(default_factory=list)
    reward: list = field(default_factory=list)
    invalid: list = field(default_factory=list)
    action: list = field(default_factory=list)
    #: the step completed one of the world's verifiable subgoals (``info["milestone"]``)
    milestone: list = field(default_factory=list)
    steps_before: list = field(default_factory=list)
    steps_after: list = field(default_factory=list)
    won: bool = False
    #: the world's episode score in [0, 1] where it keeps one (``TextEnv.has_score``: WebShop's raw reward), else None
    score: float | None = None
    #: key -> the text the key was made from (the state anchor's, ``info["state_text"]``), every key of
    #: ``state`` / ``next_state`` but the sink: what near-duplicate merging sketches
    texts: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.state)


@dataclass
class LabelledBatch:
    """A rollout batch with ground-truth step labels.

    batch: the :class:`StepBatch` (N rows); good: (N,) bool, the step is on an optimal path
    (:func:`step_labels`); steps_before / steps_after: (N,) int64, the world's steps-to-win before and
    after the row's action; source: which policy played it (``expert-epsilon``, ``checkpoint``...);
    seed: the seed it was played with; texts: key -> the text the key was made from (the observation), every
    key of the batch but :data:`~milegpo.credit.SINK`, for :func:`with_similar_states` (None: not recorded);
    labelled: False for a world that gives no steps-to-win (:func:`gives_steps_to_win`): its steps are all
    "bad" with :data:`~milegpo.envs.base.UNWINNABLE` before and after, so the step-label figures have no pairs,
    and only what needs no planner (the milestone field, the credit diagnostics) is measured."""

    batch: StepBatch
    good: np.ndarray
    steps_before: np.ndarray
    steps_after: np.ndarray
    source: str = ""
    seed: int = 0
    texts: dict | None = None
    labelled: bool = True

    def __post_init__(self) -> None:
        n = len(self.batch)
        for name in ("good", "steps_before", "steps_after"):
            value = np.asarray(getattr(self, name))
            if value.shape != (n,):
                raise ValueError(f"LabelledBatch.{name} must have shape ({n},) like the batch, got {value.shape}")
            setattr(self, name, value)
        if self.good.dtype != np.bool_:
            raise ValueError(f"LabelledBatch.good must be bool, got {self.good.dtype}")


def step_labels(steps_before: np.ndarray, steps_after: np.ndarray, invalid: np.ndarray) -> np.ndarray:
    """good = valid and ``steps_after == steps_before - 1`` (the action is on an optimal path).

    steps_before, steps_after: (N,) int64 (``UNWINNABLE`` where no sequence wins: never good);
    invalid: (N,) bool. Returns (N,) bool."""
    steps_before, steps_after = np.asarray(steps_before, dtype=np.int64), np.asarray(steps_after, dtype=np.int64)
    invalid = np.asarray(invalid, dtype=bool)
    if not steps_before.shape == steps_after.shape == invalid.shape:
        raise ValueError(f"step_labels: steps_before {steps_before.shape}, steps_after {steps_after.shape} and "
                         f"invalid {invalid.shape} must have one shape")
    return ~invalid & (steps_before < UNWINNABLE) & (steps_after == steps_before - 1)


def _steps_to_win(env: TextEnv) -> int:
    value = env.steps_to_win()
    if value is None:
        raise ValueError(f"environment kind {env.kind!r} ({type(env).__name__}) gives no steps_to_win: its steps "
                         "cannot be labelled (TextEnv.steps_to_win returns None)")
    return int(value)


def play_episode(env: TextEnv, task: Task, choose: Chooser, label: bool = False,
                 state_anchor: AnchorSpec | None = None) -> PlayedEpisode:
    """Play ``task`` in ``env`` to its end, ``choose(observation, admissible, t)`` picking each action.

    label: also record ``env.steps_to_win()`` before and after each action (0 after a winning one).
    state_anchor: what the rows' state keys are made of (:meth:`TextEnv.set_state_anchor`, set before the
    reset); None: the environment's as it is. Keys and texts are the world's ``info["state_key"]`` /
    ``info["state_text"]``, as the trainer's rows.

    ``choose`` may read the tracker's context line of the state it chooses in from ``env.tracker.context()``."""
    if state_anchor is not None:
        env.set_state_anchor(state_anchor)
    obs, admissible, info = env.reset(task)
    ep = PlayedEpisode(task=task)
    key = int(info["state_key"])
    ep.texts[key] = info["state_text"]
    while not env.done:
        if label:
            ep.steps_before.append(_steps_to_win(env))
        action = choose(obs, admissible, len(ep))
        obs, reward, _, _, info = env.step(action)
        won = bool(info["won"])
        ep.state.append(key)
        key = int(info["state_key"])
        ep.next_state.append(SINK if won else key)
        if not won:
            ep.texts[key] = info["state_text"]
        ep.reward.append(float(reward))
        ep.invalid.append(bool(info["invalid"]))
        ep.milestone.append(bool(info["milestone"]))
        ep.action.append(action)
        if label:
            ep.steps_after.append(0 if won else _steps_to_win(env))
        admissible = info["admissible_actions"]
        ep.won = bool(won)
        if env.has_score:
            ep.score = float(info.get("score", 0.0))
    return ep


def step_batch(groups: Sequence[Sequence[PlayedEpisode]], invalid=None) -> StepBatch:
    """The rows of played episodes as a validated :class:`StepBatch`: group ``g`` is ``groups[g]``,
    trajectories numbered in order, rows in (group, trajectory, step) order; made as the trainer's are
    (:meth:`milegpo.rollout.Rollout.step_batch`, one row a :class:`~milegpo.rollout.StepRow`).

    invalid: per-trajectory lists of invalid flags that replace the environment's (a policy's unparseable
    completion is invalid even where the world accepted the text)."""
    rows: list[StepRow] = []
    traj = 0
    for g, episodes in enumerate(groups):
        for ep in episodes:
            flags = list(ep.invalid if invalid is None else invalid[traj])
            if len(flags) != len(ep):
                raise ValueError(f"step_batch: trajectory {traj} has {len(ep)} steps and {len(flags)} invalid flags")
            rows += [StepRow(group=g, traj=traj, t=t, state=ep.state[t], next_state=ep.next_state[t],
                             reward=ep.reward[t], invalid=bool(flags[t]), prompt_ids=[], completion_ids=[],
                             logprobs=None, completion="", action="", success=ep.won, milestone=ep.milestone[t])
                     for t in range(len(ep))]
            traj += 1
    return Rollout(rows=rows).step_batch()


def gives_steps_to_win(env: TextEnv) -> bool:
    """Whether ``env``'s world has a planner: its class overrides :meth:`TextEnv.steps_to_win` (household,
    ALFWorld, TextWorld, WebShop; not ScienceWorld, whose engine reports subgoals but no plan length)."""
    return type(env).steps_to_win is not TextEnv.steps_to_win


def labelled_batch(groups: Sequence[Sequence[PlayedEpisode]], source: str, seed: int, invalid=None,
                   labelled: bool = True):
    """A :class:`LabelledBatch` of episodes played with ``label=True`` (:func:`step_batch` for the rows and
    ``invalid``); ``labelled=False``: of episodes played without labels (a world without a planner), every step
    bad with :data:`~milegpo.envs.base.UNWINNABLE` before and after (``LabelledBatch.labelled`` False)."""

    episodes = [ep for eps in groups for ep in eps]
    for n, ep in enumerate(episodes if labelled else ()):
        if len(ep.steps_before) != len(ep):
            raise ValueError(f"labelled_batch: trajectory {n} ({ep.task.task_id}) was played without labels "
                             "(play_episode(..., label=True))")
    batch = step_batch(groups, invalid)
    if labelled:
        before = np.array([v for ep in episodes for v in ep.steps_before], dtype=np.int64)
        after = np.array([v for ep in episodes for v in ep.steps_after], dtype=np.int64)
        good = step_labels(before, after, batch.invalid.numpy())
    else:
        before = np.full(len(batch), UNWINNABLE, dtype=np.int64)
        after, good = before.copy(), np.zeros(len(batch), dtype=bool)
    texts = {k: v for ep in episodes for k, v in ep.texts.items()}
    return LabelledBatch(batch=batch, good=good, steps_before=before, steps_after=after, source=source, seed=seed,
                         texts=texts, labelled=labelled)


# ---------------------------------------------------------------------------------------------- policies
def mixed_expert(env: TextEnv, rng: random.Random, epsilon: float, expert: str = "oracle",
                 invalid_share: float = 0.1) -> Chooser:
    """The world's expert with a random action at rate ``epsilon``.

    expert: one of the world's :attr:`~milegpo.envs.TextEnv.experts` (household: ``oracle``, knows where
    everything is, as ALFWorld's expert, or ``search``, acts on what it has seen; WebShop: ``search``, the
    shopping expert that reads only the pages it was shown), or ``planner`` (an admissible action that lowers
    ``env.steps_to_win()`` the most: always on an optimal path). A random action is one of the admissible ones
    drawn uniformly (as :meth:`~milegpo.envs.TextEnv.playable_actions` gives them: WebShop's search box is the
    expert's query), or, with probability ``invalid_share``, an inadmissible one (an action that was admissible
    one step earlier and no longer is, as a policy that repeats itself; else "look around")."""
    act = None if expert == "planner" else env.expert(expert)  # any other name: a ValueError naming the experts
    previous: list[str] = []

    def choose(obs: str, admissible: list, t: int) -> str:
        nonlocal previous
        if t == 0:
            previous = []
        playable = env.playable_actions(admissible)
        stale = [a for a in previous if a not in playable]
        previous = playable
        if rng.random() < epsilon:
            if rng.random() < invalid_share:
                return rng.choice(stale) if stale else "look around"
            return rng.choice(playable)
        if act is None:
            return planner_action(env, playable)
        action = act()
        return action if action is not None else rng.choice(playable)

    return choose


def default_expert(env_kind: str) -> str:
    """The expert the mixed expert follows by default: the world's ``oracle`` where it has one (household,
    as ALFWorld's expert), else its ``search`` expert (WebShop's shopping expert)."""
    experts = env_class(env_kind).experts
    return "oracle" if "oracle" in experts else "search"


def planner_action(env: TextEnv, admissible: Sequence[str]) -> str:
    """The first admissible action after which ``env.steps_to_win()`` is lowest (each tried on a copy)."""
    import copy

    best, best_value = admissible[0], None
    for action in admissible:
        trial = copy.deepcopy(env)
        trial.step(action)
        value = 0 if trial.won else _steps_to_win(trial)
        if best_value is None or value < best_value:
            best, best_value = action, value
    return best


def play_mixed_expert(tasks: Sequence[Task], group_size: int, seed: int, epsilon: tuple[float, float] = (0.1, 0.9),
                      expert: str = "oracle", invalid_share: float = 0.1, source: str = "expert-epsilon",
                      state_anchor: AnchorSpec | None = None):
    """``group_size`` labelled episodes of every task by :func:`mixed_expert`, epsilon ~ U(``epsilon``) per
    trajectory (drawn from ``seed``); ``state_anchor``: what the rows' keys are made of
    (:mod:`milegpo.envs.anchors`; None: the default). Returns a :class:`LabelledBatch`, without step labels
    (``labelled`` False) where the world gives no steps-to-win (:func:`gives_steps_to_win`)."""
    lo, hi = epsilon
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"play_mixed_expert: epsilon range must satisfy 0 <= lo <= hi <= 1, got {epsilon}")
    rng = random.Random(seed)
    envs: dict[str, TextEnv] = {}
    groups = []
    labelled = True
    for task in tasks:
        env = envs.setdefault(task.env, make_env(task.env))
        labelled = labelled and gives_steps_to_win(env)
        groups.append([play_episode(env, task, mixed_expert(env, rng, rng.uniform(lo, hi), expert, invalid_share),
                                    label=labelled, state_anchor=check_state_anchor(state_anchor))
                       for _ in range(group_size)])
    for env in envs.values():
        env.close()
    return labelled_batch(groups, source, seed, labelled=labelled)


def replay_labels(episodes: Sequence, actions: Sequence[Sequence[str]], states: Sequence[Sequence[int]],
                  state_anchor: AnchorSpec | None = None):
    """Replay recorded trajectories in fresh environments and label every step.

    episodes: per trajectory its Task (``.task``); actions: the actions sent to the world, per trajectory;
    states: the recorded state keys (``state`` of every row), checked against the replay, whose keys are made
    by ``state_anchor`` (the one the trajectories were played with; None: the default). Returns the
    labelled :class:`PlayedEpisode` per trajectory."""
    envs: dict[str, TextEnv] = {}
    out = []
    for n, (episode, acts, keys) in enumerate(zip(episodes, actions, states)):
        env = envs.setdefault(episode.task.env, make_env(episode.task.env))
        played = play_episode(env, episode.task, lambda obs, adm, t, acts=acts: acts[t] if t < len(acts) else
                              NOTHING_HAPPENS, label=True, state_anchor=check_state_anchor(state_anchor))
        if played.state != list(keys):
            t = next((i for i, (a, b) in enumerate(zip(played.state, keys)) if a != b), min(len(played), len(keys)))
            raise ValueError(f"replay_labels: trajectory {n} ({episode.task.task_id}) reached another state at step "
                             f"{t} on replay ({len(played)} steps replayed, {len(keys)} recorded): the world is not "
                             "deterministic, or the recorded actions are not the ones played")
        out.append(played)
    for env in envs.values():
        env.close()
    return out


def play_checkpoint(checkpoint: str, tasks: Sequence[Task], group_size: int, seed: int,
                    temperature: float = 1.0, source: str = "checkpoint", flags: Sequence[str] = ()):
    """``group_size`` episodes of every task by a saved policy (``milegpo train``'s ``<output_dir>/final``),
    played by the trainer's own episode loop and generation, then labelled by :func:`replay_labels`.

    The policy keeps its prompt settings (``milegpo_task.json``); the tasks are the ones given. flags: more
    ``milegpo train`` flags (e.g. ``--max_completion_length 32``). Returns a ``LabelledBatch``."""
    import json
    import tempfile

    from ..job import make_trainer, parse, reload_tokenizer

    tasks = list(tasks)
    if not tasks:
        raise ValueError("play_checkpoint: no tasks")
    with tempfile.TemporaryDirectory(prefix="milegpo_quality_") as tmp:
        _, cfg = parse(["--model_name_or_path", checkpoint, "--output_dir", tmp, "--env", tasks[0].env,
                        "--horizon", str(max(t.horizon for t in tasks)), "--num_eval_tasks", "0",
                        "--num_train_tasks", str(len(tasks)), "--groups_per_iteration", str(len(tasks)),
                        "--group_size", str(group_size), "--env_options", json.dumps({}), "--beta", "0",
                        "--report_to", "none", "--seed", str(seed), "--disable_tqdm", "true", *flags])
        import torch

        torch.manual_seed(seed)
        trainer = make_trainer(checkpoint, reload_tokenizer(checkpoint), cfg)
        try:
            rollout = trainer.play(tasks, group_size, temperature=temperature)
        finally:
            trainer.close()
    by_traj: dict[int, list] = {}
    for row in rollout.rows:
        by_traj.setdefault(row.traj, []).append(row)
    episodes = sorted(rollout.episodes, key=lambda e: e.traj)
    rows = [sorted(by_traj.get(e.traj, []), key=lambda r: r.t) for e in episodes]
    played = replay_labels(episodes, [[r.action for r in rs] for rs in rows], [[r.state for r in rs] for rs in rows],
                           cfg.state_anchor)
    groups: dict[int, list] = {}
    for e, p in zip(episodes, played):
        groups.setdefault(e.group, []).append(p)
    ordered = [groups[g] for g in sorted(groups)]
    invalid = [[r.invalid for r in rs] for rs in rows]
    return labelled_batch(ordered, source, seed, invalid=invalid)


__all__ = ["PlayedEpisode", "Chooser", "play_episode", "step_batch", "gives_steps_to_win",
           "LabelledBatch", "step_labels", "labelled_batch", "mixed_expert", "default_expert", "planner_action",
           "play_mixed_expert", "replay_labels", "play_checkpoint"]
