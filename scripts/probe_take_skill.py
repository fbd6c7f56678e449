"""What RL has to teach the default job's policy on new games, and whether the credit says so (issue 50).

    python scripts/probe_take_skill.py credit --policy milegpo_run/sft [--tasks 64 --episodes 8]
    python scripts/probe_take_skill.py headroom --policy milegpo_run/sft [--games 150 --horizons 8 10]
    python scripts/probe_take_skill.py decide --policy milegpo_run/sft [--games 160 --split id]
    python scripts/probe_take_skill.py fit --policy milegpo_run/sft [--seed 0 --sft_tasks 64 --games 64]

``credit`` plays ``--episodes`` episodes of each of the job's first ``--tasks`` RL training games with the policy
(the rollout's temperature 1.0, actions constrained as the job constrains them), scores the rows with the job's
credit (MileGPO) and with GRPO, GiGPO and GraphGPO on the same batch, and reports, per kind of step (:func:`step_kind`:
a ``take`` where the goal's object type is absent from the admissible takes, or present and taken right or wrong; any
other verb, with the wrong object in hand or not), the rows, the mean advantage, and the shares above and at 0.

``headroom`` plays the first ``--games`` ID games at the evaluation's temperature (0.4), the actions constrained, once
as the policy plays and once with each kind of mistake replaced by the searching expert's action
(:func:`corrected`): ``take`` (a take of anything but the goal's object type), ``recover`` (any action while the
wrong object is in hand: the expert puts it back and searches on), ``both``; at each ``--horizons``. What a
correction adds is the most that learning that skill alone could add.

``decide`` says how the policy makes the take decision: the constrained policy's exact distribution over the
admissible actions (:func:`action_distribution`: each action's probability teacher-forced, renormalised over the
admissible continuations at every token of the action block, as ``--constrain_actions`` samples at temperature 1),
on the first ``--games`` games of ``--split`` played by sampling from it (at ``--temperature``: the rollout's 1.0, the
evaluation's 0.4; ``--normalise sequence``: each admissible completion's whole probability over their sum). At every
state with a take admissible and nothing in hand: the probability of taking anything, where the goal's object type
is absent from the takes (the right move is to go on) and where it is present (and of taking it): whether the take
depends on the goal's object being there, and how sure the policy is; and the success and the present-goal
probabilities split by whether the goal's object type is one no training game names (``UNSEEN_TYPES``: on the OOD
split, most games); and where the lost games stop: each one's task type and the furthest of its subgoals it reached
(:mod:`milegpo.envs.household.subgoals`; ``none``: the goal's object never seen). One JSON line per result on stdout.

``fit`` asks whether a warm start learned that dependence or memorised its examples: the same probabilities (any take
where the goal's object type is absent, where it is present) on the warm start's own examples (the searching
expert's walkthroughs of the job's ``--sft_tasks`` warm-start games with the job's random moves of ``--seed``, as
:func:`milegpo.job.policy.expert_steps` records them for the SFT: the very prompts) and on the same recording of the
first ``--games`` ID games (held out), each also split by whether the desklamp is in view (a word of every goal).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from milegpo.envs import HouseholdEnv  # noqa: E402
from milegpo.envs.household import UNSEEN_TYPES  # noqa: E402
from milegpo.job.arguments import TINY_DEFAULTS, saved_task_settings  # noqa: E402
from milegpo.job.policy import completion_text, easy_tasks, expert_steps, reload_tokenizer  # noqa: E402
from milegpo.rollout import parse_action, render_prompt  # noqa: E402
from probe_group_signal import probe_trainer  # noqa: E402
from probe_warm_start import actor, goal_takes, take_facts  # noqa: E402

#: the corrections of ``headroom``: none, and the mistakes :func:`corrected` replaces
FIXES = ("none", "take", "recover", "both")
#: the step kinds ``decide`` reports: the mass on any take where the goal's object type is absent from the takes,
#: and where it is present, and the mass on the right take where it is present
DECISIONS = ("absent_p_take", "present_p_take", "present_p_right")
#: the state sets ``fit`` reads the take probability on
FIT_SETS = ("sft", "held_out")
#: the methods ``credit`` scores the same batch with, beside the job's own
CREDIT_METHODS = ("grpo", "gigpo", "graphgpo")
#: how :func:`action_distribution` makes the model's probabilities a distribution over the admissible actions
NORMALISE = ("token", "sequence")


def holding_wrong(env: HouseholdEnv) -> bool:
    """Whether the agent holds an object of another type than the goal's."""
    held = env.s.holding
    return bool(held) and held.split()[0] != env.game.target_type


def step_kind(env: HouseholdEnv, action: str, admissible: list[str]) -> str:
    """The kind of the step ``action`` from ``env``'s current state: ``take:absent`` (the goal's object type is not
    among the admissible takes), ``take:right`` / ``take:wrong`` (it is, and this take is / is not of it), else the
    verb, with ``:holding_wrong`` when the wrong object is in hand."""
    verb = action.split()[0] if action.split() else ""
    if verb == "take":
        facts = take_facts(env, action, admissible)
        return "take:absent" if facts["absent"] else ("take:right" if facts["right"] else "take:wrong")
    return verb + (":holding_wrong" if holding_wrong(env) else "")


def corrected(env: HouseholdEnv, action: str, fix: str) -> str:
    """``action``, or the searching expert's action where ``fix`` corrects this kind of mistake (:data:`FIXES`)."""
    if fix not in FIXES:
        raise ValueError(f"fix must be one of {FIXES}, got {fix!r}")
    bad_take = action.startswith("take ") and action.split()[1] != env.game.target_type
    if (fix in ("take", "both") and bad_take) or (fix in ("recover", "both") and holding_wrong(env)):
        return env.search_action()
    return action


def play(task, choose, started=None) -> bool:
    """Play ``task`` to its end in the household world, each action ``choose(env, prompt, admissible)`` of the
    job's prompt (its style, two steps of history, the tracker's context line); whether it was won. ``started(env)``:
    called once the game is dealt."""
    env = HouseholdEnv()
    obs, admissible, info = env.reset(task)
    if started is not None:
        started(env)
    history, goal = [], info["goal"]
    while not env.done:
        prompt = render_prompt(goal, obs, admissible, history, len(history), 2, TINY_DEFAULTS["prompt_style"],
                               info.get("state_context", ""))
        action = choose(env, prompt, admissible)
        history.append((obs, action))
        obs, _, _, _, info = env.step(action)
        admissible = info["admissible_actions"]
    return env.won


def credit(a) -> dict:
    from milegpo.credit import estimate

    tasks = easy_tasks("train", a.tasks, horizon=a.horizon, max_receptacles=TINY_DEFAULTS["env_options"]["max_receptacles"])
    trainer = probe_trainer(a.policy, a.tasks, a.horizon, a.seed, ["--constrain_actions", "true"])
    try:
        rollout = trainer.play(tasks, a.episodes, temperature=1.0)
        batch, result = trainer._local_credit(rollout)
        advantages = {"milegpo (the job's)": result.advantages.double()}
        for method in CREDIT_METHODS:
            advantages[method] = estimate(batch, method, trainer.credit_cfg).advantages.double()
    finally:
        trainer.close()
    episodes = {(e.group, e.traj): e for e in rollout.episodes}
    steps = collections.defaultdict(list)
    for i, row in enumerate(rollout.rows):
        steps[(row.group, row.traj)].append((row.t, i, row.action))
    kinds = {}
    for key, rows in steps.items():  # each episode replayed to know its state at every step
        env = HouseholdEnv()
        _, admissible, _ = env.reset(episodes[key].task)
        for _, i, action in sorted(rows):
            kinds[i] = step_kind(env, action, admissible)
            admissible = env.step(action)[4]["admissible_actions"]
    res = {"policy": a.policy, "tasks": a.tasks, "episodes": a.episodes, "rows": len(rollout.rows),
           "success": round(100 * sum(e.won for e in rollout.episodes) / len(rollout.episodes), 1), "kinds": {}}
    for kind in sorted(set(kinds.values())):
        idx = [i for i, k in kinds.items() if k == kind]
        res["kinds"][kind] = {"rows": len(idx), **{m: {"mean": round(float(adv[idx].mean()), 3),
                                                        "above_0": round(float((adv[idx] > 0).double().mean()), 2),
                                                        "at_0": round(float((adv[idx] == 0).double().mean()), 2)}
                                                    for m, adv in advantages.items()}}
    print(json.dumps(res), flush=True)
    return res


def headroom(a) -> list[dict]:
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    tok = reload_tokenizer(a.policy)
    model = AutoModelForCausalLM.from_pretrained(a.policy).eval()
    sampled = actor(tok, model, constrain=True, max_new_tokens=TINY_DEFAULTS["max_completion_length"])

    def act(prompt: str, admissible: list[str]) -> str:
        return parse_action(sampled(prompt, True, admissible), admissible).action

    out = []
    for horizon in a.horizons:
        tasks = easy_tasks("id", a.games, horizon=horizon, max_receptacles=TINY_DEFAULTS["env_options"]["max_receptacles"])
        for fix in a.fixes:
            torch.manual_seed(a.seed)
            won = sum(play(task, lambda env, prompt, admissible: corrected(env, act(prompt, admissible), fix))
                      for task in tasks)
            res = {"policy": a.policy, "horizon": horizon, "fix": fix, "games": a.games,
                   "id_success": round(100 * won / a.games, 1)}
            print(json.dumps(res), flush=True)
            out.append(res)
    return out


def action_distribution(tok, model, prompt: str, admissible: list[str], normalise: str = "token",
                        temperature: float = 1.0) -> list[float]:
    """The probability of each of ``admissible`` under ``model`` constrained to them at ``temperature``, given the
    warm start's thought (:func:`milegpo.job.policy.completion_text`): every completion teacher-forced in one batch.
    ``normalise="token"`` (``--constrain_actions``' sampling): each of its tokens' log-probabilities renormalised over
    the tokens the admissible completions that share its prefix go on with (the constraint's trie: a forced token
    costs nothing). ``"sequence"``: the model's distribution conditioned on the completion being admissible, each
    completion's whole probability over their sum (an action's later tokens count: a take of an object the model
    would not write after ``take`` is unlikely, however likely ``take``). Sums to 1 up to rounding."""
    if normalise not in NORMALISE:
        raise ValueError(f"normalise must be one of {NORMALISE}, got {normalise!r}")
    prompt_ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                         return_dict=True)["input_ids"]
    seqs = [tok(completion_text(a), add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for a in admissible]
    n, longest = len(prompt_ids), max(map(len, seqs))
    batch = torch.zeros((len(seqs), n + longest), dtype=torch.long)
    mask = torch.zeros_like(batch)
    for i, seq in enumerate(seqs):
        batch[i, :n + len(seq)] = torch.tensor(prompt_ids + seq)
        mask[i, :n + len(seq)] = 1
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=batch, attention_mask=mask).logits.double() / temperature, -1)
    if normalise == "sequence":
        total = torch.stack([sum(logp[i, n + j - 1, t] for j, t in enumerate(seq)) for i, seq in enumerate(seqs)])
        return torch.softmax(total, 0).tolist()
    total = [0.0] * len(seqs)
    for j in range(longest):
        sharing = collections.defaultdict(list)  # the completions that share their first j tokens
        for i, seq in enumerate(seqs):
            if j < len(seq):
                sharing[tuple(seq[:j])].append(i)
        for rows in sharing.values():
            options = sorted({seqs[i][j] for i in rows})
            if len(options) > 1:
                norm = torch.logsumexp(logp[rows[0], n + j - 1, options], 0)
                for i in rows:
                    total[i] += float(logp[i, n + j - 1, seqs[i][j]] - norm)
    return [math.exp(x) for x in total]


def decide(a) -> dict:
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    tok = reload_tokenizer(a.policy)
    model = AutoModelForCausalLM.from_pretrained(a.policy).eval()
    rng = random.Random(a.seed)
    tasks = easy_tasks(a.split, a.games, horizon=a.horizon,
                       max_receptacles=TINY_DEFAULTS["env_options"]["max_receptacles"])
    seen = collections.defaultdict(list)

    games = []  # (the goal's object type is one no training game names, won)
    stops = collections.Counter()  # (task type, the furthest subgoal a lost game reached) -> games

    def choose(env: HouseholdEnv, prompt: str, admissible: list[str]) -> str:
        p = action_distribution(tok, model, prompt, admissible, a.normalise, a.temperature)
        takes, right = goal_takes(env, admissible)
        unseen = "_unseen_type" if env.game.target_type in UNSEEN_TYPES else "_seen_type"
        if takes and not env.s.holding:
            p_take = sum(p[i] for i in takes)
            if right:
                for suffix in ("", unseen):
                    seen["present_p_take" + suffix].append(p_take)
                    seen["present_p_right" + suffix].append(sum(p[i] for i in right))
            else:
                seen["absent_p_take"].append(p_take)
        return admissible[rng.choices(range(len(admissible)), p)[0]]

    for task in tasks:
        dealt = []
        won = play(task, choose, dealt.append)
        games.append((dealt[0].game.target_type in UNSEEN_TYPES, won))
        if not won:
            goals = dealt[0]._subgoals
            stops[f"{goals.goal.task_type}: {(('none',) + goals.chain)[goals.reached]}"] += 1
    res = {"policy": a.policy, "split": a.split, "normalise": a.normalise, "temperature": a.temperature,
           "games": a.games, "success": round(100 * sum(w for _, w in games) / a.games, 1)}
    for name, unseen in (("seen_type", False), ("unseen_type", True)):  # the OOD split's goal types (UNSEEN_TYPES)
        won = [w for u, w in games if u == unseen]
        res[f"success_{name}"] = {"games": len(won), "success": round(100 * sum(won) / len(won), 1) if won else None}
    res["lost_games_furthest_subgoal"] = dict(sorted(stops.items()))
    for kind in DECISIONS + tuple(f"present_p_{x}_{t}" for t in ("seen_type", "unseen_type") for x in ("take", "right")):
        values = torch.tensor(seen[kind], dtype=torch.double)
        res[kind] = {"states": len(values)} if not len(values) else {
            "states": len(values), "mean": round(float(values.mean()), 3),
            "q10_50_90": [round(float(q), 3) for q in torch.quantile(values, torch.tensor([.1, .5, .9], dtype=torch.double))],
            "above_0.9": round(float((values > .9).double().mean()), 2),
            "below_0.1": round(float((values < .1).double().mean()), 2)}
    print(json.dumps(res), flush=True)
    return res


def fit(a) -> dict:
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    tok = reload_tokenizer(a.policy)
    model = AutoModelForCausalLM.from_pretrained(a.policy).eval()
    k = TINY_DEFAULTS["env_options"]["max_receptacles"]
    # the warm start's games follow the RL's training games (the policy's own count where it saved one)
    start = saved_task_settings(a.policy).get("num_train_tasks", TINY_DEFAULTS["num_train_tasks"])
    sets = {"sft": (easy_tasks("train", a.sft_tasks, horizon=a.horizon, start=start,
                                max_receptacles=k), a.seed),
            "held_out": (easy_tasks("id", a.games, horizon=a.horizon, max_receptacles=k), a.seed + 1)}
    res = {"policy": a.policy, "normalise": a.normalise, "seed": a.seed, "sft_tasks": a.sft_tasks, "games": a.games}
    for name, (tasks, seed) in sets.items():
        seen = collections.defaultdict(list)
        for env, prompt, _, adm in expert_steps(tasks, 2, a.explore, seed, "search", TINY_DEFAULTS["prompt_style"]):
            takes, right = goal_takes(env, adm)
            if takes and not env.s.holding:
                p = action_distribution(tok, model, prompt, adm, a.normalise)
                where = "present" if right else "absent"
                lamp = "lamp" if any(x.startswith("use ") for x in adm) else "no_lamp"
                p_take = sum(p[i] for i in takes)
                seen[where].append(p_take)
                seen[f"{where}:{lamp}"].append(p_take)
        cell = {kind: {"states": len(v), "p_take": round(sum(v) / len(v), 3)} for kind, v in sorted(seen.items())}
        if "absent" in cell and "present" in cell:
            cell["gap"] = round(cell["present"]["p_take"] - cell["absent"]["p_take"], 3)
        res[name] = cell
    print(json.dumps(res), flush=True)
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probe", choices=("credit", "headroom", "decide", "fit"))
    p.add_argument("--policy", required=True, help="a policy folder (a run's sft/ or final/)")
    p.add_argument("--seed", type=int, default=0,
                   help="the sampling seed; fit: the job's --seed (the warm start's random moves)")
    p.add_argument("--tasks", type=int, default=64, help="credit: training games")
    p.add_argument("--split", default="id", choices=("train", "id", "ood"), help="decide: whose games")
    p.add_argument("--episodes", type=int, default=TINY_DEFAULTS["group_size"], help="credit: episodes per game")
    p.add_argument("--horizon", type=int, default=TINY_DEFAULTS["horizon"],
                   help="credit, decide, fit: the episodes' horizon")
    p.add_argument("--games", type=int, default=150, help="headroom, decide, fit (held-out games): games")
    p.add_argument("--horizons", type=int, nargs="+", default=[TINY_DEFAULTS["horizon"]], help="headroom")
    p.add_argument("--fixes", nargs="+", choices=FIXES, default=list(FIXES), help="headroom")
    p.add_argument("--sft_tasks", type=int, default=64, help="fit: the job's --sft_tasks (its warm-start games)")
    p.add_argument("--explore", type=float, default=0.2, help="fit: the job's --sft_explore")
    p.add_argument("--normalise", default="token", choices=NORMALISE,
                   help="decide, fit: the distribution over the admissible actions (action_distribution)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="decide: the sampling temperature (the rollout's 1.0; the evaluation's 0.4)")
    a = p.parse_args(argv)
    return {"credit": credit, "headroom": headroom, "decide": decide, "fit": fit}[a.probe](a)


if __name__ == "__main__":
    main()
