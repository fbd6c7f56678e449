"""Reference parity (issue 33): the GraphGPO recipe's credit as a reproduction's docstrings describe it, written
in this file from the issue's text alone (not from milegpo.credit.reference), against
``presets.GRAPHGPO_REPRODUCTION`` (what ``GRAPHGPO_REFERENCE`` / ``GIGPO_REFERENCE`` meant before issue 40 gave
them verl-agent's code: tests/credit/test_verl_agent_presets.py) on every backend, on random and adversarial batches; hand-computed values for
the max + 1 rule, the per-trajectory penalty counts and one-trajectory groups; every new CreditConfig
field on its own, every backend against the reference."""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest
import torch

from milegpo.credit import SINK, CreditConfig, StepBatch, estimate, presets
from milegpo.credit.config import PAPER_FIELDS, choices
from milegpo_kernels import interpreter_on

from .batches import make_rows
from .test_estimate import compare

BACKENDS = ["reference", "torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])
RECIPE_METHODS = ("grpo", "gigpo", "graphgpo")


# ------------------------------------------------------------------ the recipe, from the text
def standardise(values: list[float]) -> list[float]:
    """Sample std, (x - mean) / (std + 1e-6); one value or zero variance gives 0."""
    if len(values) == 1 or len(set(values)) == 1:
        return [0.0] * len(values)
    mean = sum(values) / len(values)
    std = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))
    return [(x - mean) / (std + 1e-6) for x in values]


def standardise_by(keys: list, values: list[float]) -> list[float]:
    """``values`` standardised among the entries of equal key."""
    members: dict = {}
    for j, key in enumerate(keys):
        members.setdefault(key, []).append(j)
    out = [0.0] * len(values)
    for idx in members.values():
        for j, y in zip(idx, standardise([values[j] for j in idx])):
            out[j] = y
    return out


def recipe_credit(rows: list[dict], method: str, per_row_episode: bool = False, plus_one: bool = False) -> list[float]:
    """The recipe's advantage of every row of ``rows`` (issue 33, "The public GraphGPO recipe's credit").

    per_row_episode: the original helper (each trajectory's return repeated once per row before
    standardising); plus_one: the paper's eq. 4 return 10 * omega ** (d(next_state) + 1).
    """
    trajs: dict = {}
    for i, row in enumerate(rows):
        trajs.setdefault(row["traj"], []).append(i)
    for idx in trajs.values():
        idx.sort(key=lambda i: rows[i]["t"])
    # episode: 10 * success - 0.1 * (number of invalid actions) per trajectory
    ret = {tr: 10.0 * rows[idx[0]]["success"] - 0.1 * sum(rows[i]["invalid"] for i in idx) for tr, idx in trajs.items()}
    episode = [0.0] * len(rows)
    if per_row_episode:
        for i, y in enumerate(standardise_by([r["group"] for r in rows], [ret[r["traj"]] for r in rows])):
            episode[i] = y
    else:
        names = sorted(trajs)
        per_traj = dict(zip(names, standardise_by([rows[trajs[tr][0]]["group"] for tr in names],
                                                  [ret[tr] for tr in names])))
        for i, row in enumerate(rows):
            episode[i] = per_traj[row["traj"]]
    if method == "grpo":
        return episode
    if method == "gigpo":
        step_return = [0.0] * len(rows)
        for idx in trajs.values():
            running = 0.0
            for k, i in reversed(list(enumerate(idx))):
                won = rows[i]["success"] and k == len(idx) - 1
                reward = (-0.1 if rows[i]["invalid"] else 0.0) + (10.0 if won else 0.0)
                running = reward + 0.95 * running
                step_return[i] = running
        step = standardise_by([(r["group"], r["state"]) for r in rows], step_return)
        return [e + s for e, s in zip(episode, step)]
    # graphgpo: one edge per row, reverse search from the sink over the distinct pairs
    graph_ret = [0.0] * len(rows)
    for group in {r["group"] for r in rows}:
        members = [i for i, r in enumerate(rows) if r["group"] == group]
        if not any(rows[i]["success"] for i in members):
            continue  # an all-fail group: graph advantage 0
        into: dict = {}
        for i in members:
            into.setdefault(rows[i]["next_state"], set()).add(rows[i]["state"])
        dist = {SINK: 0}
        queue = deque([SINK])
        while queue:
            v = queue.popleft()
            for u in into.get(v, ()):
                if u not in dist:
                    dist[u] = dist[v] + 1
                    queue.append(u)
        beyond = max(dist.values()) + 1
        for i in members:
            d = dist.get(rows[i]["next_state"], beyond) + (1 if plus_one else 0)
            graph_ret[i] = 10 * 0.1 ** d
    graph = standardise_by([(r["group"], r["state"]) for r in rows], graph_ret)
    return [e + g for e, g in zip(episode, graph)]


# ------------------------------------------------------------------ batches
def recipe_batches() -> list[list[dict]]:
    """Random batches (mixed, all-fail and all-success groups, invalid rows, self-loops, states that cannot
    reach success) and adversarial ones: one-trajectory groups, one-step trajectories, many invalid rows."""
    shapes = [dict(n_groups=4, k=4, horizon=7), dict(n_groups=3, k=6, horizon=10, p_invalid=0.4),
              dict(n_groups=5, k=1, horizon=6, p_invalid=0.3), dict(n_groups=3, k=5, horizon=1, one_step=True),
              dict(n_groups=3, k=3, horizon=8, mode="all_fail", p_invalid=0.5),
              dict(n_groups=2, k=8, horizon=12, n_states=4, p_self=0.5)]
    batches = []
    for seed in range(12):
        rng = np.random.default_rng(1000 + seed)
        rows = make_rows(rng, **shapes[seed % len(shapes)])
        extra = make_rows(rng, n_groups=1, k=1, horizon=5)  # one more one-trajectory group, ids of its own
        rows += [{**row, "group": 5000 + seed, "traj": 10 ** 6 + seed} for row in extra]
        batches.append([rows[i] for i in rng.permutation(len(rows))])
    return batches


BATCHES = recipe_batches()


def combined(batches: list[list[dict]]) -> list[dict]:
    """The rows of several batches as one (group and trajectory ids moved apart): one call of the Triton
    interpreter costs about as much for all of them as for one."""
    return [{**row, "group": row["group"] + 10 ** 5 * j, "traj": row["traj"] + 10 ** 7 * j}
            for j, rows in enumerate(batches) for row in rows]


def batches_for(backend: str) -> list[list[dict]]:
    """The batches one backend runs on: each alone, or all in one under Triton's (slow) interpreter."""
    return [combined(BATCHES)] if backend == "triton" else BATCHES


def features(rows: list[dict]) -> set[str]:
    """Which of the adversarial structures the rows hold."""
    out = set()
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    for members in groups.values():
        if len({r["traj"] for r in members}) == 1:
            out.add("one-trajectory group")
        if not any(r["success"] for r in members):
            out.add("all-fail group")
        else:  # a next_state from which the group's edges never reach the sink
            into: dict = {}
            for r in members:
                into.setdefault(r["next_state"], set()).add(r["state"])
            seen, todo = {SINK}, [SINK]
            while todo:
                for u in into.get(todo.pop(), ()):
                    if u not in seen:
                        seen.add(u)
                        todo.append(u)
            if any(r["next_state"] not in seen for r in members):
                out.add("unreachable state")
    if any(r["invalid"] for r in rows):
        out.add("invalid row")
    if any(r["state"] == r["next_state"] for r in rows):
        out.add("self-loop")
    return out


def test_the_batches_hold_every_adversarial_structure():
    seen = set().union(*(features(rows) for rows in BATCHES))
    assert seen == {"one-trajectory group", "all-fail group", "unreachable state", "invalid row", "self-loop"}
    assert sum(len(rows) for rows in BATCHES) > 600


# ------------------------------------------------------------------ the presets reproduce the recipe
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("preset", ["graphgpo_reproduction"])
def test_the_presets_give_the_recipes_credit(backend, preset):
    config = presets.get_preset(preset)
    worst = 0.0
    for rows in batches_for(backend):
        batch = StepBatch.from_rows(rows)
        for method in RECIPE_METHODS:
            want = torch.tensor(recipe_credit(rows, method), dtype=torch.float64)
            got = estimate(batch, method, config, backend=backend).advantages
            worst = max(worst, (got - want).abs().max().item())
            torch.testing.assert_close(got, want, rtol=0, atol=1e-9, msg=f"{method} / {preset} / {backend}")
    assert worst < 1e-9


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_recipes_options(backend):
    # the original helper (returns repeated per row) and the paper's eq. 4 (d + 1), one at a time
    per_row = presets.GRAPHGPO_REPRODUCTION.replace(episode_norm_over="rows")
    plus_one = presets.GRAPHGPO_REPRODUCTION.replace(graph_distance_offset=1)
    for rows in batches_for(backend):
        batch = StepBatch.from_rows(rows)
        for method in RECIPE_METHODS:
            want = torch.tensor(recipe_credit(rows, method, per_row_episode=True), dtype=torch.float64)
            torch.testing.assert_close(estimate(batch, method, per_row, backend=backend).advantages, want,
                                       rtol=0, atol=1e-9, msg=f"per-row {method}")
        want = torch.tensor(recipe_credit(rows, "graphgpo", plus_one=True), dtype=torch.float64)
        torch.testing.assert_close(estimate(batch, "graphgpo", plus_one, backend=backend).advantages, want,
                                   rtol=0, atol=1e-9, msg="eq. 4")


def test_the_old_defaults_do_not_give_the_recipe():
    # the test can fail: the spec's conventions differ from the recipe on these batches
    rows = BATCHES[0]
    batch = StepBatch.from_rows(rows)
    for method in RECIPE_METHODS:
        old = estimate(batch, method, presets.ALFWORLD.replace(gamma_g=0.1).as_preset(), backend="reference").advantages
        want = torch.tensor(recipe_credit(rows, method), dtype=torch.float64)
        assert (old - want).abs().max().item() > 0.1, method


def test_the_two_presets_are_one_convention():
    # the reproduction's convention has its own name; verl-agent's presets are another (issue 40)
    assert presets.PRESETS["graphgpo_reproduction"] is presets.GRAPHGPO_REPRODUCTION
    assert presets.GRAPHGPO_REPRODUCTION not in (presets.GRAPHGPO_REFERENCE, presets.GIGPO_REFERENCE)
    # what the recipe keeps of the spec
    ref = presets.GRAPHGPO_REPRODUCTION
    assert (ref.c, ref.gamma_g, ref.gamma, ref.norm, ref.norm_eps, ref.invalid_penalty, ref.w_step, ref.w_ep,
            ref.step_weight) == (10.0, 0.1, 0.95, "mean_std", 1e-6, 0.1, 1.0, 1.0, 1.0)


# ------------------------------------------------------------------ hand-computed values
def rows_of(*trajs, group=0) -> list[dict]:
    """Rows of trajectories given as (traj id, success, [(state, next_state, invalid), ...])."""
    out = []
    for tr, won, steps in trajs:
        for t, (s, ns, bad) in enumerate(steps):
            out.append(dict(group=group, traj=tr, t=t, state=s, next_state=ns, success=won,
                            reward=10.0 if ns == SINK else 0.0, invalid=bad))
    return out


def sample_norm(x: float, values: list[float]) -> float:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return (x - mean) / (std + 1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_plus_one_rule_by_hand(backend):
    # A wins: 1 -> 2 -> g (d(2) = 1, d(1) = 2); B fails: 1 -> 3 -> 4, which cannot reach g: the largest
    # finite distance is 2, so 3 and 4 are at 3 and r^G = 10 * 0.1^3 = 0.01 (the spec: 0)
    rows = rows_of((0, True, [(1, 2, False), (2, SINK, False)]), (1, False, [(1, 3, False), (3, 4, False)]))
    batch = StepBatch.from_rows(rows)
    got = estimate(batch, "graphgpo", presets.GRAPHGPO_REPRODUCTION, backend=backend)
    assert got.rows["r_graph"].tolist() == pytest.approx([1.0, 10.0, 0.01, 0.01], rel=1e-12)
    a_graph = [sample_norm(1.0, [1.0, 0.01]), 0.0, sample_norm(0.01, [1.0, 0.01]), 0.0]
    assert a_graph[0] == pytest.approx(0.7071057, abs=1e-6)
    assert got.rows["a_graph"].tolist() == pytest.approx(a_graph, rel=1e-12, abs=1e-15)
    episode = [sample_norm(10.0, [10.0, 0.0])] * 2 + [sample_norm(0.0, [10.0, 0.0])] * 2
    assert got.advantages.tolist() == pytest.approx([e + g for e, g in zip(episode, a_graph)], rel=1e-12)
    assert got.nodes["dist"].tolist() == [2, 1, -1, -1, 0]  # the search's distances, g last
    spec = estimate(batch, "graphgpo", presets.ALFWORLD.replace(gamma_g=0.1), backend=backend)
    assert spec.rows["r_graph"].tolist() == pytest.approx([1.0, 10.0, 0.0, 0.0], rel=1e-12)
    # with the paper's eq. 4 every hop count grows by one
    eq4 = estimate(batch, "graphgpo", presets.GRAPHGPO_REPRODUCTION.replace(graph_distance_offset=1), backend=backend)
    assert eq4.rows["r_graph"].tolist() == pytest.approx([0.1, 1.0, 0.001, 0.001], rel=1e-12)
    # an all-fail group stays at 0
    fail = StepBatch.from_rows(rows_of((0, False, [(1, 3, False)]), (1, False, [(1, 4, True)])))
    assert estimate(fail, "graphgpo", presets.GRAPHGPO_REPRODUCTION, backend=backend).rows["a_graph"].tolist() == [0, 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_trajectory_penalty_counts_by_hand(backend):
    # A wins with 2 invalid rows, B fails with none, C fails with 1: returns 9.8, 0, -0.1 on every row
    rows = rows_of((0, True, [(1, 1, True), (1, 2, False), (2, 2, True), (2, SINK, False)]),
                   (1, False, [(1, 3, False), (3, 5, False)]),
                   (2, False, [(1, 4, False), (4, 4, True), (4, 5, False)]))
    batch = StepBatch.from_rows(rows)
    returns = [9.8, 0.0, -0.1]
    got = estimate(batch, "grpo", presets.GRAPHGPO_REPRODUCTION, backend=backend)
    assert got.rows["episode_score"].tolist() == pytest.approx([9.8] * 4 + [0.0] * 2 + [-0.1] * 3, rel=1e-12)
    per_traj = [sample_norm(x, returns) for x in returns]
    assert got.advantages.tolist() == pytest.approx([per_traj[0]] * 4 + [per_traj[1]] * 2 + [per_traj[2]] * 3,
                                                    rel=1e-12)
    # the original helper: the same scores repeated once per row (A counts 4 times, B 2, C 3)
    repeated = [9.8] * 4 + [0.0] * 2 + [-0.1] * 3
    helper = estimate(batch, "grpo", presets.GRAPHGPO_REPRODUCTION.replace(episode_norm_over="rows"), backend=backend)
    assert helper.advantages.tolist() == pytest.approx([sample_norm(x, repeated) for x in repeated], rel=1e-12)
    # the spec: the penalty on the invalid row alone (10 - 0.1 = 9.9 there, 10 on A's valid rows)
    spec = estimate(batch, "grpo", presets.ALFWORLD, backend=backend)
    assert spec.rows["episode_score"].tolist() == pytest.approx([9.9, 10, 9.9, 10, 0, 0, 0, -0.1, 0], rel=1e-12)
    # GiGPO's step reward: -0.1 on an invalid row, discounted into the earlier rows
    gigpo = estimate(batch, "gigpo", presets.GRAPHGPO_REPRODUCTION, backend=backend)
    r_a = [10.0 * 0.95 ** 3 - 0.1 - 0.1 * 0.95 ** 2, 10.0 * 0.95 ** 2 - 0.1 * 0.95, 10.0 * 0.95 - 0.1, 10.0]
    r_c = [-0.1 * 0.95, -0.1, 0.0]
    assert gigpo.rows["step_return"].tolist() == pytest.approx(r_a + [0.0, 0.0] + r_c, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_trajectory_groups_by_hand(backend):
    # one trajectory in its group: one value, its episode advantage is 0 (the spec: a one-row group gives
    # 10 / (1 + 1e-6), and rows of unequal Z are standardised among themselves)
    won = StepBatch.from_rows(rows_of((0, True, [(1, SINK, False)])))
    assert estimate(won, "grpo", presets.ALFWORLD, backend=backend).advantages.tolist() == pytest.approx(
        [10 / (1 + 1e-6)], rel=1e-12)
    for method in RECIPE_METHODS + ("milegpo",):
        assert estimate(won, method, presets.GRAPHGPO_REPRODUCTION, backend=backend).advantages.tolist() == [0.0]
    # three rows, one invalid, two at state 1: episode 0 (the spec standardises Z = 9.9, 10, 10); r^G at
    # state 1: 10 * 0.1^d(1) = 0.1 (row 0, the self-loop 1 -> 1, d(1) = 2) and 10 * 0.1^d(2) = 1 (row 1)
    rows = rows_of((0, True, [(1, 1, True), (1, 2, False), (2, SINK, False)]))
    batch = StepBatch.from_rows(rows)
    spec = estimate(batch, "grpo", presets.ALFWORLD, backend=backend).advantages
    z = [9.9, 10.0, 10.0]
    assert spec.tolist() == pytest.approx([sample_norm(x, z) for x in z], rel=1e-12)
    for method in RECIPE_METHODS:
        got = estimate(batch, method, presets.GRAPHGPO_REPRODUCTION, backend=backend).advantages.tolist()
        assert got == pytest.approx(recipe_credit(rows, method), abs=1e-12)
    graph = estimate(batch, "graphgpo", presets.GRAPHGPO_REPRODUCTION, backend=backend)
    assert graph.rows["r_graph"].tolist() == pytest.approx([0.1, 1.0, 10.0], rel=1e-12)
    assert graph.advantages.tolist() == pytest.approx([sample_norm(0.1, [0.1, 1.0]), sample_norm(1.0, [0.1, 1.0]),
                                                       0.0], rel=1e-12)
    gigpo = estimate(batch, "gigpo", presets.GRAPHGPO_REPRODUCTION, backend=backend)
    r = [-0.1 + 0.95 * 9.5, 9.5]  # the two rows at state 1: R_0 = -0.1 + 0.95 R_1, R_1 = 0.95 * 10
    assert gigpo.advantages.tolist() == pytest.approx([sample_norm(r[0], r), sample_norm(r[1], r), 0.0], rel=1e-12)


# ------------------------------------------------------------------ each field alone, every backend
def one_switch_configs() -> dict[str, CreditConfig]:
    """Each new field away from its default on ALFWORLD (and WEBSHOP's mean norm), and the presets: presets each
    (run by every method, each reading its own fields)."""
    base = presets.ALFWORLD
    return {name: config.as_preset() for name, config in {
        "trajectory-penalty": base.replace(episode_penalty="trajectory"),
        "per-trajectory": base.replace(episode_penalty="trajectory", episode_norm_over="trajectories"),
        "single-zero": base.replace(episode_single_value="zero"),
        "step-reward-penalty": base.replace(step_penalty="reward"),
        "max-plus-one": base.replace(graph_unreachable="max_plus_one"),
        "offset": base.replace(graph_distance_offset=1),
        "max-plus-one-offset": base.replace(graph_unreachable="max_plus_one", graph_distance_offset=1),
        "webshop-per-trajectory": presets.WEBSHOP.replace(episode_penalty="trajectory",
                                                           episode_norm_over="trajectories"),
        "graphgpo_reproduction": presets.GRAPHGPO_REPRODUCTION,
    }.items()}


CASES = [("grpo", "full"), ("gigpo", "full"), ("graphgpo", "full"), ("milegpo", "full")]
#: the code paths of the new fields, for Triton's interpreter: the rows path with the trajectory's penalty, the
#: per-trajectory path, the mean norm, the graph return's two rules, the step reward
TRITON_CONFIGS = ("trajectory-penalty", "webshop-per-trajectory", "max-plus-one-offset", "graphgpo_reproduction")


@pytest.mark.parametrize("backend, static_shapes", [("torch", False), ("torch", True)]
                         + ([("triton", True)] if "triton" in BACKENDS else []))
def test_every_backend_matches_the_reference_on_each_field(backend, static_shapes):
    # every row and node array of each method against the reference (test_estimate.compare), the host layout
    # and the GPU's static one (padding slots, one-row dump segments of the per-trajectory norm)
    configs = one_switch_configs()
    if backend == "triton":
        configs = {name: configs[name] for name in TRITON_CONFIGS}
        compare(StepBatch.from_rows(combined(BATCHES[:6])), backend=backend, cases=CASES, presets_=configs,
                static_shapes=static_shapes)
        return
    for rows in BATCHES[:6]:
        compare(StepBatch.from_rows(rows), backend=backend, presets_=configs, static_shapes=static_shapes)


def test_each_field_changes_what_it_says_and_nothing_else():
    rows = next(rows for rows in BATCHES if {"unreachable state", "invalid row"} <= features(rows))
    batch = StepBatch.from_rows(rows)
    base = presets.ALFWORLD

    def run(method, cfg, key):
        return estimate(batch, method, cfg, backend="reference").rows[key]

    for name, cfg in one_switch_configs().items():
        episode_moves = name not in ("step-reward-penalty", "max-plus-one", "offset", "max-plus-one-offset")
        for method in ("grpo", "gigpo", "graphgpo", "milegpo"):
            same = torch.equal(run(method, cfg, "episode_adv"), run(method, base, "episode_adv"))
            assert same != episode_moves or name == "single-zero", (name, method)
        if name in ("max-plus-one", "offset", "max-plus-one-offset"):
            assert not torch.equal(run("graphgpo", cfg, "r_graph"), run("graphgpo", base, "r_graph")), name
        if name == "step-reward-penalty":
            assert not torch.equal(run("gigpo", cfg, "step_return"), run("gigpo", base, "step_return"))
            assert torch.equal(run("graphgpo", cfg, "r_graph"), run("graphgpo", base, "r_graph"))


def test_the_defaults_are_the_spec():
    cfg = CreditConfig()
    assert (cfg.episode_penalty, cfg.episode_norm_over, cfg.episode_single_value, cfg.graph_unreachable,
            cfg.graph_distance_offset, cfg.step_penalty) == ("row", "rows", "unit", "zero", 0, "none")
    paper = {f.name for f in PAPER_FIELDS}
    for name, names in choices().items():
        if name in paper:  # the field's methods (hgpo_, g2po_, beacon_) default to their code's reading
            assert getattr(cfg, name) == names[0], name


def test_config_errors():
    with pytest.raises(ValueError, match=r"episode_penalty must be one of \('row', 'trajectory'\), got 'traj'"):
        CreditConfig(episode_penalty="traj")
    with pytest.raises(ValueError, match="graph_unreachable must be one of"):
        CreditConfig(graph_unreachable="inf")
    with pytest.raises(ValueError, match="graph_distance_offset must be 0 or 1, got 2"):
        CreditConfig(graph_distance_offset=2)
    with pytest.raises(ValueError, match="episode_norm_over='trajectories' needs episode_penalty='trajectory'"):
        CreditConfig(episode_norm_over="trajectories")
    with pytest.raises(ValueError, match=r"step_penalty must be one of \('none', 'reward', 'return'\), got True"):
        CreditConfig(step_penalty=True)  # one choice: the penalty cannot be placed twice


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs a GPU or TRITON_INTERPRET=1")
@pytest.mark.parametrize("method", ["grpo", "gigpo", "graphgpo", "milegpo"])
def test_gpu_layout_pipeline_reads_nothing_on_the_host_under_the_preset(method):
    # as tests/credit/test_triton_backend.py: the new paths (per-trajectory norm, max + 1 distances, the step
    # reward) at the GPU's static layout make none of the ops that would sync or copy from the host there
    from milegpo.credit.vectorized import credit_tables
    from milegpo_kernels.inputs import host_checks
    from milegpo_kernels.testing import no_host_reads

    batch = StepBatch.from_rows(BATCHES[0])
    config = presets.GRAPHGPO_REPRODUCTION
    with host_checks(False), no_host_reads(method):  # raises naming the host reads
        tables = credit_tables(batch, method, config, "full", "triton", static_shapes=True)
        adv = tables.result(batch, method, config, "full", "triton").advantages
    torch.testing.assert_close(adv, estimate(batch, method, config, backend="reference").advantages,
                               rtol=1e-9, atol=1e-9)


def test_credit_quality_measures_every_method_under_every_preset():
    # milegpo credit-quality --preset graphgpo_reproduction: gigpo-verl puts verl-agent's penalty after discounting
    # in place of the preset's in the step reward (one choice: never both)
    from milegpo.credit import method_variants

    for name, config in presets.PRESETS.items():
        for label, (_, _, changes) in method_variants().items():
            changed = config.replace(**changes)
            if label == "gigpo-verl":
                assert changed.step_penalty == "return", name
