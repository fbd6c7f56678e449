"""What RL has to teach the default job's policy on new games, and whether the credit says so (issue 50).

    python scripts/probe_take_skill.py credit --policy milegpo_run/sft [--tasks 64 --episodes 8]
    python scripts/probe_take_skill.py headroom --policy milegpo_run/sft [--games 150 --horizons 8 10]

``credit`` plays ``--episodes`` episodes of each of the job's first ``--tasks`` RL training games with the policy
(the rollout's temperature 1.0, actions constrained as the job constrains them), scores the rows with the job's
credit (MileGPO) and with GRPO, GiGPO and GraphGPO on the same batch, and reports, per kind of step (:func:`step_kind`:
a ``take`` where the goal's object type is absent from the admissible takes, or present and taken right or wrong; any
other verb, with the wrong object in hand or not), the rows, the mean advantage, and the shares above and at 0.

``headroom`` plays the first ``--games`` ID games at the evaluation's temperature (0.4), the actions constrained, once
as the policy plays and once with each kind of mistake replaced by the searching expert's action
(:func:`corrected`): ``take`` (a take of anything but the goal's object type), ``recover`` (any action while the
wrong object is in hand: the expert puts it back and searches on), ``both``; at each ``--horizons``. What a
correction adds is the most that learning that skill alone could add. One JSON line per result on stdout.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from milegpo.envs import HouseholdEnv  # noqa: E402
from milegpo.job.arguments import TINY_DEFAULTS  # noqa: E402
from milegpo.job.policy import easy_tasks, reload_tokenizer  # noqa: E402
from milegpo.rollout import parse_action, render_prompt  # noqa: E402
from probe_group_signal import probe_trainer  # noqa: E402
from probe_warm_start import actor, take_facts  # noqa: E402

#: the corrections of ``headroom``: none, and the mistakes :func:`corrected` replaces
FIXES = ("none", "take", "recover", "both")
#: the methods ``credit`` scores the same batch with, beside the job's own
CREDIT_METHODS = ("grpo", "gigpo", "graphgpo")


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
            won = 0
            for task in tasks:
                env = HouseholdEnv()
                obs, admissible, info = env.reset(task)
                history, goal = [], info["goal"]
                while not env.done:
                    prompt = render_prompt(goal, obs, admissible, history, len(history), 2,
                                           TINY_DEFAULTS["prompt_style"], info.get("state_context", ""))
                    action = corrected(env, act(prompt, admissible), fix)
                    history.append((obs, action))
                    obs, _, _, _, info = env.step(action)
                    admissible = info["admissible_actions"]
                won += env.won
            res = {"policy": a.policy, "horizon": horizon, "fix": fix, "games": a.games,
                   "id_success": round(100 * won / a.games, 1)}
            print(json.dumps(res), flush=True)
            out.append(res)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probe", choices=("credit", "headroom"))
    p.add_argument("--policy", required=True, help="a policy folder (a run's sft/ or final/)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", type=int, default=TINY_DEFAULTS["num_train_tasks"], help="credit: training games")
    p.add_argument("--episodes", type=int, default=TINY_DEFAULTS["group_size"], help="credit: episodes per game")
    p.add_argument("--horizon", type=int, default=TINY_DEFAULTS["horizon"], help="credit: the episodes' horizon")
    p.add_argument("--games", type=int, default=150, help="headroom: ID games")
    p.add_argument("--horizons", type=int, nargs="+", default=[TINY_DEFAULTS["horizon"]], help="headroom")
    p.add_argument("--fixes", nargs="+", choices=FIXES, default=list(FIXES), help="headroom")
    a = p.parse_args(argv)
    return credit(a) if a.probe == "credit" else headroom(a)


if __name__ == "__main__":
    main()
