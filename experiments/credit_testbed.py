"""A learning testbed with statistical power: does better credit turn into faster learning?

    python experiments/credit_testbed.py --out experiments/results/testbed_household --seeds $(seq 0 19) --jobs 2

The policy is a tabular softmax: one logit per (state, action), the state being what an agent's prompt
shows (the goal, the observation and the admissible actions), the actions the admissible ones plus one
invalid action (a command the world does not accept, as a language model's unparseable or inadmissible
completion). It starts from a prior that favours the world's expert action (``--prior``; the analogue of the
warm start) and learns by the policy gradient with exactly the trainer's credit: every iteration draws
``--groups`` distinct training tasks with TRL's ``RepeatSampler`` (the trainer's group sampler), plays
``--group-size`` episodes of each, builds the :class:`~milegpo.credit.StepBatch`, calls
:func:`milegpo.credit.estimate` with the trainer's preset and invalid-action penalty, and takes one step
``logits[s, a] += lr * A * (1[a] - pi(. | s))`` for every row (the gradient of the GRPO loss at ratio 1, one
token per row, summed: a table shares no parameters between states). A run costs seconds, so 20+ seeds per
method fit in the CPU budget. The credit's state key is the trainer's: ``--state-anchor NAME``
(:mod:`milegpo.envs.anchors`; default ``tracked+actions``; ``observation`` keys the observation text alone,
as runs before anchors did). ``--policy-sees context`` makes the table's state what a prompt with the
tracker's context line shows (``MileGPOConfig.show_state_context``, the trainer's default): the goal, the
observation, the context line and the admissible actions; ``observation`` (the default here, as the runs
before anchors) leaves the context out.

WebShop (``--env webshop``, preset ``webshop`` by default; goals of the embedded catalog's train split from
:data:`milegpo.evidence.quality.QUALITY_START` on): the prior favours the shopping expert's action (WebShop's
non-privileged expert), the table's actions are :meth:`TextEnv.playable_actions` (the search box
``search[<your query>]`` is the expert's query: a table writes no text), the step size defaults to 0.05
(the preset does not divide advantages by their spread, so they are in reward units, a win 10), and the
score is WebShop's (x 100).

    python experiments/credit_testbed.py --env webshop --out experiments/results/testbed_webshop --iterations 30 \
        --seeds $(seq 0 19) --jobs 2

ScienceWorld (``--env scienceworld --world-cache DIR``): the engine's own action space is out of reach of a table
(300-3,800 listed actions a state, 0.1-0.5 s an engine step), so the testbed plays the cached world of
``experiments/sw_world.py`` over a RESTRICTED action set: in every state the gold expert's action and
``--distractors`` other listed actions (drawn by a hash of task and state: every method's and seed's), the engine's
transitions cached in DIR (each process adds its part; ``python experiments/sw_world.py merge DIR`` combines them).
``--fixed-tasks`` trains every seed on seed 0's tasks (a world too costly to explore anew per seed).

``--overrides '{"norm": "mean_std"}'`` changes CreditConfig fields of the preset, ``--env-options`` the task
generator's settings (WebShop: ``'{"reward": "score"}'``, 10 x WebShop's score as the reward). Every record keeps
the advantages its credit gave the purchase rows (``click[buy now]``) of winning and of losing episodes
(``purchases``; the table's last section), the paper's mechanism figures of each iteration's credit on the
policy's own rollouts (``credit``: GraphGPO's tie share and the shared-state coverage where the method computes
A^G, MileGPO's tie-correction rate) and the milestone truth of the method's own step scores (``milestone_truth``:
per score of :mod:`milegpo.evidence.milestones`, [pairs won, pairs] summed over the iterations).

Every method of a seed plays the same tasks in the same order from the same prior with the same random
stream, so seeds pair the methods. Writes ``<out>/results.json`` (one record per method and seed: curves and
final evaluation), ``<out>/table.md`` (final success with 95% intervals, paired tests) and
``<out>/curves.png`` (success and score per iteration, mean and 95% interval over seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from milegpo.credit import method_variants, presets
from milegpo.envs.anchors import DEFAULT_STATE_ANCHOR, STATE_ANCHORS, check_state_anchor
from milegpo.evidence.quality import default_preset
from milegpo.evidence.seed_stats import mean_ci, paired_test, seeds_for

#: methods: label -> (credit method, variant), every registered one (milegpo.credit.method_variants)
METHODS = {name: (method, variant) for name, (method, variant, _) in method_variants(settings=False).items()}
#: the paper's ranking, best first: the adjacent pairs are tested
PAPER_RANKING = ("milegpo-full", "graphgpo", "gigpo", "grpo")
#: the invalid action of the tabular policy (no world accepts it)
INVALID_ACTION = "<invalid>"
#: WebShop's purchase, whose rows' advantages the records keep (``purchases``: the shortest-path question)
PURCHASE_ACTION = "click[buy now]"


class TabularPolicy:
    """Softmax over (state, action) logits, created on first visit from the prior.

    state: (goal, observation, admissible actions), with ``sees_context`` (goal, observation, the tracker's context
    line, admissible actions); actions: the admissible ones and :data:`INVALID_ACTION`. Prior logit: ``prior``
    for the expert's action, ``invalid_logit`` for the invalid action, 0 for the others."""

    def __init__(self, prior: float, invalid_logit: float, rng: np.random.Generator, sees_context: bool = False):
        self.prior, self.invalid_logit, self.rng = prior, invalid_logit, rng
        self.sees_context = sees_context
        self.table: dict[tuple, tuple[list[str], np.ndarray]] = {}

    def entry(self, key: tuple, admissible: list, expert: str | None):
        got = self.table.get(key)
        if got is None:
            actions = list(admissible) + [INVALID_ACTION]
            logits = np.zeros(len(actions))
            if expert in admissible:
                logits[admissible.index(expert)] = self.prior
            logits[-1] = self.invalid_logit
            got = self.table[key] = (actions, logits)
        return got

    @staticmethod
    def probs(logits: np.ndarray) -> np.ndarray:
        z = np.exp(logits - logits.max())
        return z / z.sum()

    def chooser(self, env, goal: str, record: list):
        """A :data:`milegpo.evidence.labelled.Chooser` sampling from the table; appends (key, action index)."""
        from milegpo.evidence.labelled import default_expert

        expert_of = env.expert(default_expert(env.kind))

        def choose(obs: str, admissible: list, t: int) -> str:
            key = (goal, obs, env.tracker.context(), tuple(admissible)) if self.sees_context else \
                (goal, obs, tuple(admissible))
            expert = expert_of() if key not in self.table else None
            actions, logits = self.entry(key, env.playable_actions(admissible), expert)
            i = int(self.rng.choice(len(actions), p=self.probs(logits)))
            record.append((key, i))
            return actions[i]

        return choose

    def update(self, record: list, advantages: np.ndarray, lr: float) -> None:
        """One policy-gradient step on the rows' summed loss: logits[s] += lr * sum of A * (1[a] - pi(. | s))
        over the rows in state s (a table has no shared parameters: a row moves its own state only)."""
        grads: dict[tuple, np.ndarray] = {}
        for (key, i), adv in zip(record, advantages):
            _, logits = self.table[key]
            g = grads.setdefault(key, np.zeros_like(logits))
            p = self.probs(logits)
            g -= adv * p
            g[i] += adv
        for key, g in grads.items():
            self.table[key][1][:] += lr * g


def play_groups(tasks, group_size: int, policy: TabularPolicy, envs: dict, state_anchor: str | None = None):
    """``group_size`` episodes of each task by the policy, their rows keyed by ``state_anchor`` (None: the
    default): (groups of PlayedEpisode, (key, action) per row)."""
    from milegpo.envs import make_env
    from milegpo.evidence.labelled import play_episode

    record: list = []
    groups = []
    for task in tasks:
        env = envs.setdefault(task.env, make_env(task.env))
        if state_anchor is not None:
            env.set_state_anchor(state_anchor)
        goal = env.reset(task)[2].get("goal", "")
        groups.append([play_episode(env, task, policy.chooser(env, goal, record)) for _ in range(group_size)])
    return groups, record


def episode_stats(groups) -> dict:
    eps = [ep for g in groups for ep in g]
    steps = sum(len(ep) for ep in eps)
    # the world's score where it keeps one (WebShop's raw reward x 100, as the job's score metric), else the return
    scores = [100 * ep.score if ep.score is not None else sum(ep.reward) for ep in eps]
    return {"success": float(np.mean([ep.won for ep in eps])), "score": float(np.mean(scores)),
            "invalid": sum(sum(ep.invalid) for ep in eps) / max(steps, 1),
            "length": float(np.mean([len(ep) for ep in eps]))}


def run(seed: int, method_label: str, settings: dict) -> dict:
    """One training run of one method; returns its record (curves, final evaluation, time)."""
    import torch
    from trl.trainer.utils import RepeatSampler

    from milegpo.credit import estimate, presets
    from milegpo.evidence.quality import quality_tasks
    from milegpo.evidence.labelled import step_batch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    s = settings
    method, variant = METHODS[method_label]
    config = run_config(s)
    # the seed's own tasks, or with fixed_tasks every seed the first seed's (a world too costly to explore anew
    # for every seed: the cached ScienceWorld's long types)
    tasks = quality_tasks(s["env"], "train", s["tasks"], 0 if s.get("fixed_tasks") else seed, s["horizon"],
                          s["options"])
    policy = TabularPolicy(s["prior"], s["invalid_logit"], np.random.default_rng(seed),
                           sees_context=s.get("policy_sees", "observation") == "context")
    # the trainer's group sampler: distinct tasks per iteration, a new shuffle every epoch over the tasks
    sampler = RepeatSampler(range(len(tasks)), mini_repeat_count=1, batch_size=s["groups"], repeat_count=1,
                            shuffle=True, seed=seed)
    stream = (i for _ in iter(int, 1) for i in sampler)
    envs: dict = world_envs(s)
    engine_work = world_work()
    curve = []
    purchases: dict[str, list[float]] = {"won": [], "lost": []}  # the advantage of every "buy now" row, by outcome
    milestones: dict[str, list[float]] = {}  # per step score of the method: [pairs won, pairs] over the iterations
    credit: list[dict] = []  # per iteration: the mechanism figures of the method's credit on the policy's rollouts
    for _ in range(s["iterations"]):
        chosen = [tasks[next(stream)] for _ in range(s["groups"])]
        groups, record = play_groups(chosen, s["group_size"], policy, envs, s["state_anchor"])
        curve.append(episode_stats(groups))
        batch = step_batch(groups)
        result = estimate(batch, method, config, variant, backend="torch")
        credit.append(credit_figures(result, method_label, milestones))
        advantages = result.advantages.numpy()
        for (key, i), adv, won in zip(record, advantages, batch.success.numpy()):
            if policy.table[key][0][i] == PURCHASE_ACTION:
                purchases["won" if won else "lost"].append(float(adv))
        policy.update(record, advantages, s["lr"])
        if "world_cache" in s and time.perf_counter() - _WORLD_CACHE.get("saved", t0) > WORLD_CACHE_EVERY:
            save_world_cache(s)  # a long run's engine steps are not lost with the run
    final_groups, _ = play_groups(tasks, s["eval_episodes"], policy, envs, s["state_anchor"])
    final = episode_stats(final_groups)
    for env in envs.values():
        env.close()
    out = {"method": method_label, "seed": seed, "env": s["env"], "curve": curve, "final": final,
           "purchases": purchase_stats(purchases), "milestone_truth": milestones, "credit": credit,
           "states": len(policy.table), "seconds": time.perf_counter() - t0}
    if "world_cache" in s:
        save_world_cache(s)
        out["world"] = {k: v - engine_work[k] for k, v in world_work().items()}
    return out


#: the cached ScienceWorld's transitions of this process (``--world-cache``): read once, shared by its runs
_WORLD_CACHE: dict = {}
#: seconds of a run between saves of the world cache (besides the one at its end)
WORLD_CACHE_EVERY = 600.0
#: the name of this process's part of the world cache (main sets it from --out: parts of one cell never collide)
WORLD_CACHE_PART = ["part"]


def world_envs(s: dict) -> dict:
    """The environments of a run by kind: none made yet (``play_groups`` makes them), except ScienceWorld with
    ``--world-cache``: the cached world over the restricted action set (``experiments/sw_world.py``), its cache read
    from the folder's parts once per process and shared by the process's runs."""
    if "world_cache" not in s:
        return {}
    import sw_world

    folder = Path(s["world_cache"])
    if "cache" not in _WORLD_CACHE:
        try:
            _WORLD_CACHE["cache"] = sw_world.TransitionCache.load(sorted(folder.glob("*.json.gz")),
                                                                   s.get("world_key", "visible"))
        except ValueError as e:  # a folder of caches keyed otherwise
            raise SystemExit(f"--world-cache {folder}: {e}") from None
    return {s["env"]: sw_world.CachedScienceWorld(_WORLD_CACHE["cache"], s["distractors"])}


def world_work() -> dict:
    """What the process's cached world has done so far (a run's record holds its own share): edges read from the
    cache (``hits``), engine steps made (``misses``), witness replays (``quiet``: the engine stepped without
    reading its valid list between actions; ``matched``: of them, those whose expert's place was found from the
    state's key; ``stepped``: each action a full step), the engine actions they played (``actions``), replays
    that did not reach their state (``divergences``). Zeros without a cached world."""
    import sw_world

    cache = _WORLD_CACHE.get("cache")
    if cache is None:
        return dict.fromkeys(("hits", "misses", *sw_world.REPLAY_KINDS, "divergences"), 0)
    return {"hits": cache.hits, "misses": cache.misses, **cache.replays, "divergences": len(cache.divergences)}


def save_world_cache(s: dict) -> None:
    """Write this process's world cache (all it read and made) as its part of the folder."""
    _WORLD_CACHE["cache"].save(Path(s["world_cache"]) / f"{WORLD_CACHE_PART[0]}.json.gz")
    _WORLD_CACHE["saved"] = time.perf_counter()


def credit_figures(result, method_label: str, milestones: dict) -> dict:
    """The paper's mechanism figures of one iteration's credit on the policy's own rollouts (spec section 11:
    GraphGPO's tie share and the shared-state coverage where the method computes A^G, MileGPO's tie-correction
    rate), returned for the record's ``credit`` list (one entry per iteration); and the milestone truth of the method's own step scores
    (:mod:`milegpo.evidence.milestones`), added into ``milestones`` ({score: [pairs won, pairs]})."""
    from milegpo.credit import diagnostics
    from milegpo.evidence.milestones import milestone_pair_scores, step_scores

    out = {}
    if "a_graph" in result.rows:
        diag = diagnostics(result)
        out = {k: float(diag[k]) for k in ("tie_share", "shared_state_coverage", "tie_correction_rate") if k in diag}
    for key, values in step_scores({method_label: result}).items():
        won, pairs = milestone_pair_scores(values, result.batch)
        total = milestones.setdefault(key, [0.0, 0.0])
        total[0] += float(won.sum())
        total[1] += float(pairs.sum())
    return out


def purchase_stats(purchases: dict[str, list[float]]) -> dict:
    """The advantages the credit gave the ``buy now`` rows of a run (WebShop's purchase; empty elsewhere): count and
    mean of the winning and the losing ones, and the share of losing purchases credited positively."""
    out: dict = {}
    for outcome, values in purchases.items():
        out[f"{outcome}_n"] = len(values)
        out[f"{outcome}_mean"] = float(np.mean(values)) if values else float("nan")
    lost = purchases.get("lost", [])
    out["lost_positive_share"] = float(np.mean([v > 0 for v in lost])) if lost else float("nan")
    return out


def analyse(records: list[dict]) -> dict:
    """Per method: final success / score and mean training success (all iterations) with 95% intervals;
    paired tests of the paper's adjacent pairs and of every method against GRPO."""
    methods = [m for m in METHODS if any(r["method"] == m for r in records)]
    by = {m: {r["seed"]: r for r in records if r["method"] == m} for m in methods}
    endpoints = {"final_success": lambda r: r["final"]["success"], "final_score": lambda r: r["final"]["score"],
                 "train_success": lambda r: float(np.mean([c["success"] for c in r["curve"]])),
                 "final_invalid": lambda r: r["final"]["invalid"]}
    out: dict = {"methods": {}, "paired": {}}
    for m in methods:
        out["methods"][m] = {k: mean_ci([f(r) for r in by[m].values()]) for k, f in endpoints.items()}
        out["methods"][m]["seeds"] = len(by[m])
    pairs = [(a, b) for a, b in zip(PAPER_RANKING, PAPER_RANKING[1:])]
    pairs += [(m, "grpo") for m in methods if m != "grpo" and (m, "grpo") not in pairs]
    for a, b in pairs:
        if a in by and b in by:
            seeds = sorted(set(by[a]) & set(by[b]))
            tests = {k: paired_test([f(by[a][s]) for s in seeds], [f(by[b][s]) for s in seeds])
                     for k, f in endpoints.items() if k != "final_invalid"}
            for v in tests.values():  # seeds a paired t-test needs for 2 points at this spread (80%, 5%)
                v["seeds_for_2_points"] = seeds_for(0.02, v["sd"])
            out["paired"][f"{a} - {b}"] = tests
    return out


#: per environment kind: its name, what its training tasks are, what its score is (the tables' words)
WORLD_WORDS = {"household": ("Household", "games (every task type, full-size rooms)", "score (mean episode reward)"),
               "webshop": ("WebShop", "goals (the embedded catalog's train split from goal 1,000)",
                           "score (WebShop's score x 100)"),
               "scienceworld": ("ScienceWorld", "variations (train split, the task types of --env-options)",
                                "score (the engine's score, 0-100)")}


def _anchor_of(settings: dict) -> str:
    """The state anchor of a run's settings (runs before anchors: ``state`` obs / obs+actions)."""
    if "state_anchor" in settings:
        return settings["state_anchor"]
    return {"obs": "observation", "obs+actions": "observation+actions (old serialisation)"}.get(
        settings.get("state", "obs"), settings.get("state", "obs"))


def restricted_words(s: dict) -> str:
    """The table's words for the cached ScienceWorld's restricted action set (empty for every other world)."""
    if "world_cache" not in s:
        return ""
    return (f"; RESTRICTED action set: the expert's action and {s['distractors']} other listed actions per state "
            f"(drawn by a hash of task and state, every method's), the engine's transitions cached in "
            f"{s['world_cache']}"
            + ("; states keyed with the engine's whole world (temperatures)" if s.get("world_key") == "thermal" else ""))


def table(records: list[dict], settings: dict) -> str:
    a = analyse(records)
    seeds = sorted({r["seed"] for r in records})

    def cell(v, scale=100.0):
        m, lo, hi = v
        return f"{scale * m:.1f} [{scale * lo:.1f}, {scale * hi:.1f}]"

    s = settings
    world, games, score = WORLD_WORDS.get(s.get("env", "household"), WORLD_WORDS["household"])
    lines = [f"{world} testbed: tabular softmax policy, {s['tasks']} training {games}, horizon {s['horizon']}, "
             f"{s['iterations']} iterations x {s['groups']} groups x {s['group_size']} episodes, prior {s['prior']}, "
             f"lr {s['lr']}, state anchor {_anchor_of(s)}, the policy sees {s.get('policy_sees', 'observation')}, "
             f"preset {s['preset']}"
             f"{''.join(f', {k}={v}' for k, v in s.get('overrides', {}).items())}"
             f"{''.join(f', env option {k}={v}' for k, v in s.get('options', {}).items())}"
             f"{restricted_words(s)}{'; every seed on the same tasks' if s.get('fixed_tasks') else ''}; final evaluation: "
             f"{s['eval_episodes']} episodes of every training game; {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}), mean "
             "and 95% t-interval over seeds.", "",
             f"| method | final success % | mean training success % | final {score} | final invalid % | seeds |",
             "| --- | --- | --- | --- | --- | --- |"]
    for m, v in a["methods"].items():
        lines.append(f"| {m} | {cell(v['final_success'])} | {cell(v['train_success'])} | "
                     f"{cell(v['final_score'], 1.0)} | {cell(v['final_invalid'])} | {v['seeds']} |")
    lines += ["", "Paired differences over seeds (points; 95% t-interval; paired t-test and Wilcoxon p, two-sided; "
              "seeds a paired t-test needs to separate 2 points at the measured spread, 80% power):", "",
              "| pair | final success | p (t / Wilcoxon) | mean training success | p (t / Wilcoxon) | seeds for 2 "
              "points (final) |", "| --- | --- | --- | --- | --- | --- |"]
    for name, v in a["paired"].items():
        f, t = v["final_success"], v["train_success"]
        lines.append(f"| {name} | {100 * f['diff']:+.1f} [{100 * f['ci'][0]:+.1f}, {100 * f['ci'][1]:+.1f}] | "
                     f"{f['t_p']:.3f} / {f['wilcoxon_p']:.3f} | {100 * t['diff']:+.1f} [{100 * t['ci'][0]:+.1f}, "
                     f"{100 * t['ci'][1]:+.1f}] | {t['t_p']:.3f} / {t['wilcoxon_p']:.3f} | "
                     f"{f['seeds_for_2_points']} |")
    with_purchases = [r for r in records if r.get("purchases", {}).get("lost_n")]
    if with_purchases:
        lines += ["", "The credit of the purchase rows (`click[buy now]`, every training iteration; mean and 95% interval "
                  "over seeds of each seed's mean): winning purchases, losing ones, and the share of losing purchases "
                  "credited positively:", "", "| method | won: advantage | lost: advantage | lost: share > 0 % |",
                  "| --- | --- | --- | --- |"]
        for m in a["methods"]:
            rs = [r["purchases"] for r in with_purchases if r["method"] == m]
            won, lost, share = (mean_ci([p[k] for p in rs if p[k] == p[k]])
                                for k in ("won_mean", "lost_mean", "lost_positive_share"))
            lines.append(f"| {m} | {cell(won, 1.0)} | {cell(lost, 1.0)} | {cell(share)} |")
    return "\n".join(lines) + "\n"


def plot(records: list[dict], path: Path) -> Path:
    from milegpo.job.plots import pyplot, save_figure

    fig, axes = pyplot().subplots(1, 3, figsize=(15, 3.8))
    for m in [m for m in METHODS if any(r["method"] == m for r in records)]:
        curves = [r["curve"] for r in records if r["method"] == m]
        n = min(len(c) for c in curves)
        for ax, key, scale in zip(axes, ("success", "score", "invalid"), (100, 1, 100)):
            stats = [mean_ci([scale * c[i][key] for c in curves]) for i in range(n)]
            xs = np.arange(1, n + 1)
            ax.plot(xs, [x[0] for x in stats], label=m, lw=1.2)
            ax.fill_between(xs, [x[1] for x in stats], [x[2] for x in stats], alpha=0.15)
    world = records[0].get("env", "household") if records else "household"
    score = WORLD_WORDS.get(world, WORLD_WORDS["household"])[2]
    for ax, name in zip(axes, ("training success (%)", f"training {score}", "invalid actions (%)")):
        ax.set_xlabel("iteration")
        ax.set_ylabel(name)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"credit testbed: mean and 95% interval over {len({r['seed'] for r in records})} seeds", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def parser(description: str | None = __doc__) -> argparse.ArgumentParser:
    """The testbed's flags (this script's and experiments/convention_testbed.py's)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="experiments/results/testbed_household")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(20)))
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--jobs", type=int, default=1, help="runs at once (processes)")
    p.add_argument("--env", default="household")
    p.add_argument("--env-options", default="{}", help="task generator settings as JSON ({}: full-size rooms)")
    p.add_argument("--tasks", type=int, default=32, help="training games per seed")
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--groups", type=int, default=8, help="task groups per iteration")
    p.add_argument("--group-size", type=int, default=8, help="episodes per group")
    p.add_argument("--horizon", type=int, default=30)
    p.add_argument("--prior", type=float, default=2.0, help="initial logit of the expert's action")
    p.add_argument("--invalid-logit", type=float, default=1.0, help="initial logit of the invalid action")
    p.add_argument("--lr", type=float, default=None,
                   help="step size of the policy gradient (per row); default 0.5, WebShop 0.05: its preset centres "
                        "returns without dividing by their spread (norm 'mean'), so its advantages are in reward "
                        "units (a win is 10), ~10x the household's")
    p.add_argument("--eval-episodes", type=int, default=4, help="final evaluation: episodes per training game")
    p.add_argument("--state-anchor", default=DEFAULT_STATE_ANCHOR, metavar="NAME",
                   help=f"the credit's state key, as the trainer's rows: {', '.join(STATE_ANCHORS)} or a dotted "
                        f"path to a callable (default {DEFAULT_STATE_ANCHOR})")
    p.add_argument("--policy-sees", default="observation", choices=["observation", "context"],
                   help="the table's state: what a prompt without (observation) or with (context) the tracker's "
                        "context line shows")
    p.add_argument("--preset", default=None, choices=list(presets.PRESETS),
                   help="credit preset (default: webshop for webshop, scienceworld for scienceworld, else alfworld, "
                        "the paper's reading; *_spec: the spec's; graphgpo_reference / gigpo_reference[_webshop]: "
                        "verl-agent's code)")
    p.add_argument("--invalid-penalty", type=float, default=0.1, help="the trainer's invalid_action_penalty")
    p.add_argument("--overrides", default="{}",
                   help="CreditConfig fields over the preset, as JSON (e.g. '{\"norm\": \"mean_std\"}')")
    p.add_argument("--world-cache", default=None, metavar="DIR",
                   help="ScienceWorld only: play the cached world over a restricted action set (experiments/sw_world.py: "
                        "the expert's action and --distractors listed ones per state), its transitions read from and "
                        "written to DIR")
    p.add_argument("--distractors", type=int, default=3,
                   help="with --world-cache: listed actions beside the expert's in every state (every method's)")
    p.add_argument("--world-key", default="visible", choices=["visible", "thermal"],
                   help="with --world-cache: how the cache keys a state: what is visible and the expert's progress, or "
                        "that and the engine's whole world, temperatures included (the thermal task types: boil, "
                        "melt, freeze)")
    p.add_argument("--fixed-tasks", action="store_true",
                   help="every seed trains on the same tasks (seed 0's draw) instead of its own; seeds then vary the "
                        "policy's random stream and the group order only")
    p.add_argument("--table-only", action="store_true", help="rewrite table.md / curves.png from results.json")
    p.add_argument("--combine", nargs="+", metavar="DIR", default=None,
                   help="write --out's results.json / table.md from the records of these folders' results.json "
                        "(runs of the same settings, e.g. chunks of seeds or of methods); a (method, seed) found "
                        "twice, or settings that differ, are refused")
    return p


def comparable_settings(settings: dict) -> dict:
    """A run's settings in today's spelling (runs before anchors: ``state`` -> ``state_anchor``, no
    ``policy_sees`` = observation, no ``overrides`` = none), so runs of one configuration compare equal."""
    out = {k: v for k, v in settings.items() if k != "state"}
    out["state_anchor"] = _anchor_of(settings)
    out.setdefault("policy_sees", "observation")
    out.setdefault("overrides", {})
    return out


def run_config(settings: dict):
    """The credit config of a run's settings: its preset, ``invalid_penalty`` and overrides, as a preset of them all
    (every method's run's: each method reads its own fields)."""
    return presets.get_preset(settings["preset"]).replace(invalid_penalty=settings["invalid_penalty"],
                                                          **settings.get("overrides", {})).as_preset()


#: the settings that make the credit config (:func:`credit_read` compares what the runs' methods read of it)
CREDIT_SETTINGS = ("preset", "overrides", "invalid_penalty")


def credit_read(settings: dict, labels) -> dict:
    """field -> value of the credit config of a run's settings (its preset, ``invalid_penalty`` and overrides) that
    the methods of ``labels`` (:data:`METHODS` labels) read: two folders whose presets differ only in fields none
    of their methods reads ran the same credit (a GraphGPO run under ``alfworld`` and one under ``scienceworld``,
    which differ in BEACON's gamma and w only)."""
    from milegpo.credit import get_method

    config = run_config(settings)
    specs = [get_method(METHODS[label][0]) for label in labels]
    return {name: v for name, v in config.values().items() if any(spec.reads(name) for spec in specs)}


def settings_difference(a: dict, b: dict) -> str:
    """The settings in which ``a`` differs from ``b``, each as ``name (a's value vs b's)``; empty when equal."""
    return ", ".join(f"{k} ({a.get(k)!r} vs {b.get(k)!r})" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def combine(folders: list[str]) -> tuple[dict, list[dict], str]:
    """The settings, records and footer of the runs saved in ``folders`` (each a results.json), combined; a
    ValueError names the folder whose settings differ from the first's (the credit config only in a field that
    a method of both folders reads, :func:`credit_read`), or a (method, seed) found twice. The combined settings'
    ``preset`` names every preset of the folders (" / ", in the order met)."""
    settings, records, seen, footers = None, [], {}, []
    read: dict = {}  # credit field -> (value, the folder that read it)
    for folder in folders:
        path = Path(folder) / "results.json"
        if not path.is_file():
            raise ValueError(f"{path}: no results.json there")
        saved = json.loads(path.read_text())
        s = comparable_settings(saved["settings"])
        plain = {k: v for k, v in s.items() if k not in CREDIT_SETTINGS}
        if settings is None:
            settings, first = s, plain
        elif plain != first:
            raise ValueError(f"{path}: settings differ from {Path(folders[0]) / 'results.json'} in "
                             f"{settings_difference(plain, first)}")
        for name, v in credit_read(s, {r["method"] for r in saved["records"]}).items():
            if name in read and read[name][0] != v:
                raise ValueError(f"{path}: settings differ from {read[name][1]} in the credit field {name} "
                                 f"({v!r} vs {read[name][0]!r}: preset {s['preset']!r}, overrides {s['overrides']})")
            read.setdefault(name, (v, path))
        if s["preset"] not in settings["preset"].split(" / "):
            settings = {**settings, "preset": f"{settings['preset']} / {s['preset']}"}
        for r in saved["records"]:
            key = (r["method"], r["seed"])
            if key in seen:
                raise ValueError(f"{path}: {key[0]} seed {key[1]} is also in {seen[key]}")
            seen[key] = path
            records.append(r)
        footers.append(f"- `{folder}`: {saved.get('footer', '').strip() or 'no command recorded'}")
    return settings, records, "\nCombined from:\n" + "\n".join(footers) + "\n"


def settings_of(args: argparse.Namespace, p: argparse.ArgumentParser) -> dict:
    """The settings of every run from the parsed flags; a bad value ends in ``p.error`` (one line, exit 2)."""
    settings = {"env": args.env, "options": json.loads(args.env_options), "tasks": args.tasks,
                "iterations": args.iterations, "groups": args.groups, "group_size": args.group_size,
                "horizon": args.horizon, "prior": args.prior, "invalid_logit": args.invalid_logit,
                "lr": args.lr if args.lr is not None else (0.05 if args.env == "webshop" else 0.5),
                "eval_episodes": args.eval_episodes, "invalid_penalty": args.invalid_penalty,
                "preset": args.preset or default_preset(args.env),
                "state_anchor": args.state_anchor, "policy_sees": args.policy_sees}
    try:
        check_state_anchor(args.state_anchor)
    except ValueError as e:
        p.error(str(e))
    try:
        settings["overrides"] = json.loads(args.overrides)
        presets.get_preset(settings["preset"]).replace(**settings["overrides"])
    except (TypeError, ValueError, AttributeError) as e:
        p.error(f"--overrides {args.overrides!r}: {e}")
    if args.world_cache is not None:
        if args.env != "scienceworld":
            p.error(f"--world-cache is ScienceWorld's (the cached world), not {args.env!r}'s")
        if args.distractors < 1:
            p.error(f"--distractors must be >= 1, got {args.distractors}")
        settings.update(world_cache=args.world_cache, distractors=args.distractors)
        if args.world_key != "visible":
            settings["world_key"] = args.world_key
    elif args.world_key != "visible":
        p.error("--world-key is the cached world's (--world-cache)")
    if args.fixed_tasks:
        settings["fixed_tasks"] = True
    if args.groups > args.tasks:
        p.error(f"--groups ({args.groups}) must not exceed --tasks ({args.tasks}): a group per distinct task")
    return settings


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = "python experiments/credit_testbed.py " + " ".join(argv)
    p = parser()
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = settings_of(args, p)
    WORLD_CACHE_PART[0] = out.name
    if args.combine:
        try:
            combined_settings, records, footer = combine(args.combine)
        except ValueError as e:
            p.error(str(e))
        (out / "results.json").write_text(json.dumps({"settings": combined_settings, "records": records,
                                                      "footer": footer, "analysis": analyse(records)}, indent=1))
        md = table(records, combined_settings)
        (out / "table.md").write_text(md + footer)
        print(md + footer + f"wrote {out / 'table.md'}, {out / 'results.json'}, {plot(records, out / 'curves.png')}")
        return 0
    if args.table_only:
        saved = json.loads((out / "results.json").read_text())
        md = table(saved["records"], saved["settings"])
        (out / "table.md").write_text(md + saved.get("footer", ""))
        print(md + f"wrote {out / 'table.md'}, {plot(saved['records'], out / 'curves.png')}")
        return 0
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    t0 = time.perf_counter()
    jobs = [(seed, m) for seed in args.seeds for m in args.methods]
    records = []
    if args.jobs == 1:
        for seed, m in jobs:
            records.append(run(seed, m, settings))
            print(f"[seed {seed}] {m:<13} final success {records[-1]['final']['success']:.3f} "
                  f"({records[-1]['seconds']:.1f} s)", flush=True)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for rec in pool.map(run, [j[0] for j in jobs], [j[1] for j in jobs], [settings] * len(jobs)):
                records.append(rec)
                print(f"[seed {rec['seed']}] {rec['method']:<13} final success {rec['final']['success']:.3f} "
                      f"({rec['seconds']:.1f} s)", flush=True)
    wall = time.perf_counter() - t0
    footer = f"\nCommand: `{command}`; {len(jobs)} runs, total wall time {wall:.0f} s.\n"
    (out / "results.json").write_text(json.dumps({"settings": settings, "records": records, "footer": footer,
                                                  "analysis": analyse(records)}, indent=1))
    md = table(records, settings)
    (out / "table.md").write_text(md + footer)
    print("\n" + md + footer)
    print(f"wrote {out / 'table.md'}, {out / 'results.json'}, {plot(records, out / 'curves.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
