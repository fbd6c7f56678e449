"""verl-agent's GiGPO and GraphGPO credit, as its code computes it, against ``presets.GIGPO_REFERENCE``,
``GRAPHGPO_REFERENCE`` and their WebShop variants (issue 40).

:func:`verl_agent_credit` is written in this file from the conventions read in verl-agent's code (the team's
note of its ``gigpo/core_gigpo.py``, ``recipe/GraphGPO/core_graph.py`` and their trainers), in numpy float64,
sharing nothing with milegpo's estimators: per-row episode scores standardised over the task group's rows,
GiGPO's discounted step return with the penalty after discounting, the GraphGPO recipe's hop distances to a
literal ``"success"`` node with max + 1 for unreachable nodes and the penalty on the graph return. It agrees with
the presets to 1e-9 on adversarial random batches (every backend), and it and the presets reproduce the worked
examples read off verl-agent's own functions (their "A (verl-agent)" columns, 4 decimals).

Not reproduced, by design: verl-agent's float32 arithmetic (its zero-variance residue, up to 0.0074 per row) and
the GiGPO trainer's random duplicate rows; a segment whose values are all equal gives 0 here, its exact value.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import torch

from milegpo.credit import SINK, StepBatch, estimate, presets
from milegpo_kernels import interpreter_on

from .batches import make_rows

BACKENDS = ["reference", "torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])
EPS = 1e-6
PENALTY = 0.1
#: the scripts: (method, benchmark) -> (the milegpo preset, normalisation mode, gamma of the return)
SCRIPTS = {
    ("gigpo", "alfworld"): ("gigpo_reference", "mean_std", 0.95),
    ("gigpo", "webshop"): ("gigpo_reference_webshop", "mean", 0.95),
    ("graphgpo", "alfworld"): ("graphgpo_reference", "mean_std", 0.1),
    ("graphgpo", "webshop"): ("graphgpo_reference_webshop", "mean_std", 0.2),
}


# ------------------------------------------------------------------ verl-agent's conventions, from its code
def normalise(values: np.ndarray, keys: list, mode: str, one_value: str) -> np.ndarray:
    """episode_norm_reward / step_norm_reward: per key, (x - mean) / (std + 1e-6) with the sample std
    (mean_std) or x - mean (mean). A key holding one value: mean 0, std 1 (``one_value="unit"``, the episode
    term) or mean = x, std = 1 (``"zero"``, a step group: 0)."""
    out = np.zeros(len(values))
    members: dict = {}
    for j, key in enumerate(keys):
        members.setdefault(key, []).append(j)
    for idx in members.values():
        x = values[idx]
        if len(idx) == 1:
            mean, std = (0.0, 1.0) if one_value == "unit" else (x[0], 1.0)
        elif np.all(x == x[0]):
            out[idx] = 0.0  # exact arithmetic: the float32 residue is not a convention
            continue
        else:
            mean, std = x.mean(), x.std(ddof=1)
        out[idx] = (x - mean) / (std + EPS) if mode == "mean_std" else x - mean
    return out


def verl_agent_credit(rows: list[dict], method: str, mode: str, gamma: float) -> dict[str, np.ndarray]:
    """The per-row advantage (and its parts) of verl-agent's ``method`` (grpo, gigpo, graphgpo) on ``rows``.

    gamma: GiGPO's discount of the step return, or the GraphGPO recipe's gamma of 10 * gamma^d."""
    n = len(rows)
    trajs: dict = {}
    for i, row in enumerate(rows):
        trajs.setdefault(row["traj"], []).append(i)
    for idx in trajs.values():
        idx.sort(key=lambda i: rows[i]["t"])
    invalid = np.array([float(r["invalid"]) for r in rows])
    # 1. the trajectory's summed env reward on every row, the penalty on the invalid row's last token
    episode_reward = {tr: sum(rows[i]["reward"] for i in idx) for tr, idx in trajs.items()}
    z = np.array([episode_reward[r["traj"]] for r in rows]) - PENALTY * invalid
    # 2. standardised over the rows of the task group (uid)
    episode = normalise(z, [r["group"] for r in rows], mode, "unit")
    out = {"episode_score": z, "episode_adv": episode}
    step_keys = [(r["group"], r["state"]) for r in rows]  # exact anchor text inside the task group
    if method == "grpo":
        out["adv"] = episode
    elif method == "gigpo":
        # 3. R_t = r_t + gamma R_{t+1}, env rewards only, then the trainer's -0.1 on the invalid row
        ret = np.zeros(n)
        for idx in trajs.values():
            running = 0.0
            for i in reversed(idx):
                running = rows[i]["reward"] + gamma * running
                ret[i] = running
        ret = ret - PENALTY * invalid
        out.update(step_return=ret, adv=episode + 1.0 * normalise(ret, step_keys, mode, "zero"))
    else:
        # 4. one graph per task group: anchor -> next anchor, the literal "success" after a rewarded trajectory
        next_anchor = []
        for i, row in enumerate(rows):
            idx = trajs[row["traj"]]
            last = i == idx[-1]
            next_anchor.append("success" if last and episode_reward[row["traj"]] > 0 else
                               rows[idx[idx.index(i) + 1]]["state"] if not last else row["next_state"])
        r_graph = np.zeros(n)
        for group in {r["group"] for r in rows}:
            members = [i for i, r in enumerate(rows) if r["group"] == group]
            into: dict = {}
            for i in members:
                into.setdefault(next_anchor[i], set()).add(rows[i]["state"])
            dist = {"success": 0}  # entered even when no trajectory succeeded
            queue = deque(["success"])
            while queue:
                v = queue.popleft()
                for u in into.get(v, ()):
                    if u not in dist:
                        dist[u] = dist[v] + 1
                        queue.append(u)
            far = max(dist.values())
            for i in members:
                r_graph[i] = 10.0 * gamma ** dist.get(next_anchor[i], far + 1)
        r_graph = r_graph - PENALTY * invalid  # the recipe trainer's penalty on step_rewards (= r^G)
        out.update(r_graph=r_graph, adv=1.0 * normalise(r_graph, step_keys, mode, "zero") + 1.0 * episode)
    return out


# ------------------------------------------------------------------ adversarial batches
def adversarial_batches() -> list[list[dict]]:
    """Mixed, all-fail (valid and invalid actions at one state) and all-success groups, one-trajectory and
    one-row groups, one-step trajectories, many invalid rows and self-loops, states that cannot reach success,
    rewards before the winning step, rows in shuffled order."""
    shapes = [dict(n_groups=4, k=4, horizon=7), dict(n_groups=3, k=6, horizon=10, p_invalid=0.4),
              dict(n_groups=5, k=1, horizon=6, p_invalid=0.3), dict(n_groups=3, k=5, horizon=1, one_step=True),
              dict(n_groups=3, k=4, horizon=8, mode="all_fail", p_invalid=0.5),
              dict(n_groups=2, k=8, horizon=12, n_states=4, p_self=0.5, p_invalid=0.3),
              dict(n_groups=2, k=5, horizon=6, mode="all_success", p_invalid=0.3)]
    batches = []
    for seed in range(14):
        rng = np.random.default_rng(4000 + seed)
        rows = make_rows(rng, **shapes[seed % len(shapes)])
        if seed % 2:  # a reward of 1 on some rows of won trajectories (the episode reward stays > 0 iff won)
            rows = [{**r, "reward": r["reward"] + (1.0 if r["success"] and rng.random() < 0.3 else 0.0)} for r in rows]
        batches.append([rows[i] for i in rng.permutation(len(rows))])
    return batches


BATCHES = adversarial_batches()


def test_the_batches_are_adversarial():
    rows = [r for b in BATCHES for r in b]
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    assert any(len(m) == 1 for m in groups.values())  # a one-row group
    assert any(not any(r["success"] for r in m) and len({r["invalid"] for r in m}) == 2 for m in groups.values())
    assert any(all(r["success"] for r in m) for m in groups.values())
    assert any(r["state"] == r["next_state"] for r in rows) and any(r["invalid"] for r in rows)
    assert any(r["reward"] == 1.0 for r in rows) and len(rows) > 500


def combined(batches: list[list[dict]]) -> list[dict]:
    """Several batches as one (ids moved apart): one call of the Triton interpreter for all of them."""
    return [{**r, "group": r["group"] + 10 ** 5 * j, "traj": r["traj"] + 10 ** 7 * j}
            for j, rows in enumerate(batches) for r in rows]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method, script", list(SCRIPTS), ids=[f"{m}-{b}" for m, b in SCRIPTS])
def test_the_presets_give_verl_agent_s_credit(backend, method, script):
    preset, mode, gamma = SCRIPTS[(method, script)]
    config = presets.get_preset(preset)
    worst = 0.0
    for rows in ([combined(BATCHES)] if backend == "triton" else BATCHES):
        want = verl_agent_credit(rows, method, mode, gamma)
        got = estimate(StepBatch.from_rows(rows), method, config, backend=backend)
        for key in ("episode_score", "episode_adv", "step_return", "r_graph"):
            if key in want:
                np.testing.assert_allclose(got.rows[key].numpy(), want[key], rtol=0, atol=1e-9, err_msg=key)
        worst = max(worst, float(np.abs(got.advantages.numpy() - want["adv"]).max()))
        # grpo under the same preset: the episode term alone
        np.testing.assert_allclose(estimate(StepBatch.from_rows(rows), "grpo", config, backend=backend)
                                   .advantages.numpy(), verl_agent_credit(rows, "grpo", mode, gamma)["adv"],
                                   rtol=0, atol=1e-9)
    assert worst < 1e-9, (method, script, backend, worst)


def test_the_old_conventions_do_not_give_verl_agent_s_credit():
    # the test can fail: the spec's GiGPO (no step penalty), the recipe without its graph penalty and the
    # reproduction's preset are each off by more than 0.1 somewhere on these batches
    rows = combined(BATCHES[:7])
    batch = StepBatch.from_rows(rows)
    gigpo = verl_agent_credit(rows, "gigpo", "mean_std", 0.95)["adv"]
    graph = verl_agent_credit(rows, "graphgpo", "mean_std", 0.1)["adv"]
    for method, config, want in (
            ("gigpo", presets.ALFWORLD, gigpo), ("gigpo", presets.GRAPHGPO_REPRODUCTION, gigpo),
            ("graphgpo", presets.GRAPHGPO_REFERENCE.replace(graph_penalty="none"), graph),
            ("graphgpo", presets.GRAPHGPO_REPRODUCTION, graph)):
        got = estimate(batch, method, config, backend="reference").advantages.numpy()
        assert np.abs(got - want).max() > 0.1, (method, config)


# ------------------------------------------------------------------ the worked examples
# One task group, states s0 = 1, A = 2, B = 3, a trap T = 4 (group 0):
#   1. wins after an invalid action at A: s0 -> A, A -> A (invalid), A -> B, B -> success (reward 10)
#   2. ends in the trap: s0 -> A, A -> T, T -> T, T -> T (invalid), cut at the horizon
#   3. wins directly: s0 -> A, A -> B, B -> success
S0, A, B, T = 1, 2, 3, 4
EXAMPLE = StepBatch.from_rows([
    dict(group=0, traj=traj, t=t, state=s, next_state=ns, success=won, reward=10.0 if ns == SINK else 0.0, invalid=bad)
    for traj, won, steps in (
        (1, True, [(S0, A, False), (A, A, True), (A, B, False), (B, SINK, False)]),
        (2, False, [(S0, A, False), (A, T, False), (T, T, False), (T, T, True)]),
        (3, True, [(S0, A, False), (A, B, False), (B, SINK, False)]))
    for t, (s, ns, bad) in enumerate(steps)])
#: the "A (verl-agent)" columns of the worked examples, from verl-agent's own functions (float32), and the
#: "step value" column (R_t or r^G after the trainer's penalty)
WORKED = {
    ("gigpo", "alfworld"): [1.2560, 1.1207, 1.2638, 0.7236, -2.4099, -2.7538, -0.5492, -1.9832, 1.3447, 1.2638,
                            0.7236],
    ("gigpo", "webshop"): [6.3620, 5.4983, 6.1733, 3.6545, -12.2117, -13.3267, -6.2955, -6.4955, 6.8133, 6.1733,
                           3.6545],
    ("graphgpo", "alfworld"): [0.7236, -0.1631, 1.5896, 0.7236, -1.2563, -2.1215, -0.5492, -1.9832, 0.7236, 1.5896,
                               0.7236],
    ("graphgpo", "webshop"): [0.7236, -0.0244, 1.5845, 0.7236, -1.2563, -2.2500, -0.5492, -1.9832, 0.7236, 1.5845,
                              0.7236],
}
STEP_VALUES = {
    ("gigpo", "alfworld"): ("step_return", [8.57375, 8.925, 9.5, 10, 0, 0, 0, -0.1, 9.025, 9.5, 10]),
    ("graphgpo", "alfworld"): ("r_graph", [0.1, 0, 1, 10, 0.1, 0.001, 0.001, -0.099, 0.1, 1, 10]),
    ("graphgpo", "webshop"): ("r_graph", [0.4, 0.4 - 0.1, 2, 10, 0.4, 0.016, 0.016, 0.016 - 0.1, 0.4, 2, 10]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method, script", list(WORKED), ids=[f"{m}-{b}" for m, b in WORKED])
def test_the_worked_examples(backend, method, script):
    preset, mode, gamma = SCRIPTS[(method, script)]
    want = WORKED[(method, script)]
    mine = verl_agent_credit(EXAMPLE.rows(), method, mode, gamma)
    assert np.round(mine["adv"], 4).tolist() == pytest.approx(want, abs=1.5e-4)  # the independent implementation
    got = estimate(EXAMPLE, method, presets.get_preset(preset), backend=backend)
    assert got.advantages.tolist() == pytest.approx(want, abs=1.5e-4)  # the preset, 4 decimals
    np.testing.assert_allclose(got.advantages.numpy(), mine["adv"], rtol=0, atol=1e-9)
    if (method, script) in STEP_VALUES:
        key, values = STEP_VALUES[(method, script)]
        assert got.rows[key].tolist() == pytest.approx(values, rel=1e-12, abs=1e-12)
    # the episode term: Z = 10, 9.9, 10, 10 | 0, 0, 0, -0.1 | 10, 10, 10; mean 6.3455, sample std 5.0508
    ep = got.rows["episode_adv"].tolist()
    if mode == "mean_std":
        assert [round(x, 4) for x in (ep[0], ep[1], ep[4])] == [0.7236, 0.7038, -1.2563]


def test_the_worked_example_s_other_columns():
    # "milegpo match" (section 7's fields without the graph penalty) and the reproduction's preset (issue 33),
    # as the conventions note lists them: the graph penalty is what separates the first from verl-agent
    match = presets.ALFWORLD.replace(gamma_g=0.1, graph_unreachable="max_plus_one")
    got = estimate(EXAMPLE, "graphgpo", match, backend="reference").advantages.tolist()
    assert got == pytest.approx([0.7236, -0.0699, 1.5872, 0.7236, -1.2563, -2.2101, -1.2563, -1.2761, 0.7236, 1.5872,
                                 0.7236], abs=1.5e-4)
    old = estimate(EXAMPLE, "graphgpo", presets.GRAPHGPO_REPRODUCTION, backend="reference").advantages.tolist()
    assert old == pytest.approx([0.5687, -0.2049, 1.4324, 0.5687, -1.1547, -2.1084, -1.1547, -1.1547, 0.5859, 1.4496,
                                 0.5859], abs=1.5e-4)
    old = estimate(EXAMPLE, "gigpo", presets.GRAPHGPO_REPRODUCTION, backend="reference").advantages.tolist()
    assert old == pytest.approx([1.0918, 0.9864, 1.1086, 0.5687, -2.3077, -2.6522, -0.4478, -1.8616, 1.2159, 1.1258,
                                 0.5859], abs=1.5e-4)
