"""Plain-Python reference backend: the oracle of the project.

One function per equation of docs/algorithm.md, named after what it computes,
on plain Python values (lists, dicts, sets, floats, ints); torch is only used to
read the batch and to return the result. Everything is computed per task group.

Numerical conventions (the vectorised backends agree with these to 1e-9):

- all arithmetic in Python float (float64);
- powers by repeated multiplication, left to right: ``x = S; x = x * omega`` d times
  (:func:`decayed`), never ``**``;
- distances are directed shortest hop counts over the group's distinct edges (BFS);
  an unreachable target contributes 0 (eq. 1's r^G: unless ``graph_unreachable="max_plus_one"``);
- thresholds use ``tol = config.threshold_tol``: "x > 0" is ``x > tol`` and
  "x >= theta" is ``x >= theta - tol`` (:func:`positive`, :func:`at_least`);
- max-normalisation is ``x / max`` with 0 where the max is 0;
- normalisation segments whose values are all equal give exactly 0.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

import torch

from .batch import SINK, StepBatch
from .config import CreditConfig
from .registry import CreditMethod, get_method
from .result import BOOL_KEYS, INT_KEYS, CreditResult, check_advantages


#: relative width under which a normalisation segment counts as all-equal
EQUAL_RTOL = 1e-12


# ----------------------------------------------------------------- small helpers
def decayed(value: float, factor: float, hops: int) -> float:
    """``value * factor ** hops`` as ``hops`` multiplications, left to right."""
    x = value
    for _ in range(hops):
        x = x * factor
    return x


def positive(x: float, tol: float) -> bool:
    """The spec's "x > 0" under the threshold tolerance: ``x > tol``."""
    return x > tol


def at_least(x: float, theta: float, tol: float) -> bool:
    """The spec's "x >= theta" under the threshold tolerance: ``x >= theta - tol``."""
    return x >= theta - tol


def max_normalize(scores: dict) -> dict:
    """``x / max(scores)``, all 0 where the max is 0 (spec sections 5, 6)."""
    top = max(scores.values(), default=0.0)
    if top == 0.0:
        return {k: 0.0 for k in scores}
    return {k: v / top for k, v in scores.items()}


# ------------------------------------------------------------ rollout graph (§2)
@dataclass
class RolloutGraph:
    """The rollout graph of one task group (spec section 2) with its counts.

    trajs: row indices of each trajectory in t order; success: y per trajectory;
    nodes: sorted distinct state keys (g = SINK last when present); edges: sorted
    distinct (s_t, s_{t+1}) pairs; n_* / e_*: |T(.)|, |T+(.)|, |T-(.)| per node /
    edge; n_revisit: n_re(v); k / k_pos: K and K+.
    """

    group: int
    trajs: list
    success: list
    nodes: list
    edges: list
    succ: dict = field(default_factory=dict)
    pred: dict = field(default_factory=dict)
    n_traj: dict = field(default_factory=dict)
    n_pos: dict = field(default_factory=dict)
    n_neg: dict = field(default_factory=dict)
    e_traj: dict = field(default_factory=dict)
    e_pos: dict = field(default_factory=dict)
    e_neg: dict = field(default_factory=dict)
    n_revisit: dict = field(default_factory=dict)
    k: int = 0
    k_pos: int = 0

    @property
    def has_sink(self) -> bool:
        return self.k_pos > 0

    @property
    def p_pos_q(self) -> float:
        """p_q+ = K+ / K."""
        return self.k_pos / self.k

    @property
    def p_neg_q(self) -> float:
        """p_q- = 1 - p_q+."""
        return 1.0 - self.p_pos_q

    def p_pos(self, v) -> float:
        """p+(v) = |T+(v)| / |T(v)|."""
        return self.n_pos[v] / self.n_traj[v]

    def p_neg(self, v) -> float:
        """p-(v) = |T-(v)| / |T(v)| (its own division, not 1 - p+)."""
        return self.n_neg[v] / self.n_traj[v]

    def p_pos_edge(self, e) -> float:
        return self.e_pos[e] / self.e_traj[e]

    def p_neg_edge(self, e) -> float:
        return self.e_neg[e] / self.e_traj[e]


def group_trajectories(rows: list) -> dict:
    """{group: [row indices of one trajectory in t order, ...]}, groups and trajectories by id."""
    by_traj: dict = {}
    for i, r in enumerate(rows):
        by_traj.setdefault(r["traj"], []).append(i)
    groups: dict = {}
    for tr in sorted(by_traj):
        idx = sorted(by_traj[tr], key=lambda i: rows[i]["t"])
        groups.setdefault(rows[idx[0]]["group"], []).append(idx)
    return {g: groups[g] for g in sorted(groups)}


def visit_sequence(rows: list, traj: list) -> list:
    """s_0, s_1, ..., s_T of a trajectory: every row's state, then the last next_state (spec §2 [decided])."""
    return [rows[i]["state"] for i in traj] + [rows[traj[-1]]["next_state"]]


def rollout_graph(group: int, trajs: list, rows: list) -> RolloutGraph:
    """Nodes, distinct edges, trajectory sets T/T+/T- and n_re of one task group (spec section 2)."""
    success = [bool(rows[tr[0]]["success"]) for tr in trajs]
    nodes, edges = set(), set()
    g = RolloutGraph(group=group, trajs=trajs, success=success, nodes=[], edges=[])
    g.k = len(trajs)
    g.k_pos = sum(1 for y in success if y)
    for tr, y in zip(trajs, success):
        seq = visit_sequence(rows, tr)
        tr_edges = {(rows[i]["state"], rows[i]["next_state"]) for i in tr}
        seen: dict = {}
        for v in seq:
            seen[v] = seen.get(v, 0) + 1
        for v, count in seen.items():
            nodes.add(v)
            g.n_traj[v] = g.n_traj.get(v, 0) + 1
            g.n_pos[v] = g.n_pos.get(v, 0) + (1 if y else 0)
            g.n_neg[v] = g.n_neg.get(v, 0) + (0 if y else 1)
            g.n_revisit[v] = g.n_revisit.get(v, 0) + (count - 1)
        for e in tr_edges:
            edges.add(e)
            g.e_traj[e] = g.e_traj.get(e, 0) + 1
            g.e_pos[e] = g.e_pos.get(e, 0) + (1 if y else 0)
            g.e_neg[e] = g.e_neg.get(e, 0) + (0 if y else 1)
    g.nodes = sorted(nodes)
    g.edges = sorted(edges)
    g.succ = {v: [] for v in g.nodes}
    g.pred = {v: [] for v in g.nodes}
    for u, v in g.edges:
        g.succ[u].append(v)
        g.pred[v].append(u)
    return g


def hop_distances_to(graph: RolloutGraph, target) -> dict:
    """d(s, target) for every s that reaches target: one reverse BFS (spec section 2).

    Returns {node: hops}; nodes missing from the dict cannot reach target (d = inf).
    """
    if target not in graph.pred:
        return {}
    dist = {target: 0}
    queue = deque([target])
    while queue:
        v = queue.popleft()
        for u in graph.pred[v]:
            if u not in dist:
                dist[u] = dist[v] + 1
                queue.append(u)
    return dist


# ------------------------------------------------------------ GraphGPO (eq. 1)
def return_distance(graph: RolloutGraph, dist_g: dict, node, config: CreditConfig):
    """The hops eq. 1 decays over for s_{t+1} = node: d(node, g) + ``graph_distance_offset``; where node cannot
    reach g, None (r^G = 0), or with ``graph_unreachable="max_plus_one"`` (the GraphGPO recipe) the group's
    largest finite d(., g) + 1 (+ the offset), g's own 0 included: 0 + 1 in a group without a success, where
    every node is unreachable. Without a success and with ``"zero"``: None."""
    d = dist_g.get(node)
    if d is None and config.graph_unreachable == "max_plus_one":
        d = max(dist_g.values(), default=0) + 1
    return None if d is None else d + config.graph_distance_offset


def graph_return(graph: RolloutGraph, rows: list, dist_g: dict, config: CreditConfig) -> dict:
    """Eq. 1: r^G_t = c * gamma_G ^ d(s_{t+1}, g) (d as :func:`return_distance` takes it); 0 when unreachable
    or the group has no success; minus ``invalid_penalty`` on an invalid row with
    ``graph_penalty="return"`` (verl-agent's GraphGPO trainer), in every group.

    Returns {row index: r^G}.
    """
    out = {}
    for tr in graph.trajs:
        for i in tr:
            d = return_distance(graph, dist_g, rows[i]["next_state"], config)
            r = decayed(config.c, config.gamma_g, d) if d is not None else 0.0
            out[i] = r - config.invalid_penalty if config.graph_penalty == "return" and rows[i]["invalid"] else r
    return out


# ------------------------------------------------------------ Milestone Discovery (eqs. 2-7)
def milestone_candidates(graph: RolloutGraph, config: CreditConfig) -> list:
    """S+: nodes other than g visited by at least ``min_node_support`` successful trajectories."""
    return [v for v in graph.nodes if v != SINK and graph.n_pos[v] >= config.min_node_support]


def node_degree(graph: RolloutGraph, config: CreditConfig) -> dict:
    """deg(v) = v's distinct incoming edges + its distinct outgoing edges, edges to g counted (eq. 5); a self-loop
    (v, v) counts in both with ``degree_self_loops`` (the paper), in neither without (the spec [decided])."""
    loops = config.degree_self_loops
    return {v: sum(1 for u in graph.pred[v] if loops or u != v) + sum(1 for w in graph.succ[v] if loops or w != v)
            for v in graph.nodes}


def coverage(graph: RolloutGraph) -> dict:
    """Eq. 3: m(v) = |T+(v)| / max(K+, 1), every node (g included, it never is a milestone)."""
    return {v: graph.n_pos[v] / max(graph.k_pos, 1) for v in graph.nodes}


def centrality(graph: RolloutGraph, config: CreditConfig) -> dict:
    """Eq. 5's C(v) = deg(v) / max deg over the success-visited nodes (0 where that max is 0): g among them
    with ``degree_max_with_sink`` (the paper: every won trajectory visits g), not without (the spec).
    Returns {node other than g: C(v)}."""
    deg = node_degree(graph, config)
    with_sink = config.degree_max_with_sink
    top = max((deg[v] for v in graph.nodes if (with_sink or v != SINK) and graph.n_pos[v] >= 1), default=0)
    return {v: (deg[v] / top if top > 0 else 0.0) for v in graph.nodes if v != SINK}


def milestone_scores(graph: RolloutGraph, config: CreditConfig) -> dict:
    """Eq. 5: S0+(v) = w_s * l+(v) + w_m * m(v) + w_c * C(v) for v in S+.

    l+(v) = max(p+(v) - p_q+, 0) (eq. 2), m(v) coverage (eq. 3), C(v) centrality (eq. 4).
    Returns {candidate: S0+}.
    """
    m = coverage(graph)
    cen = centrality(graph, config)
    out = {}
    for v in milestone_candidates(graph, config):
        lift = max(graph.p_pos(v) - graph.p_pos_q, 0.0)
        out[v] = config.w_s * lift + config.w_m * m[v] + config.w_c * cen[v]
    return out


def trap_scores(graph: RolloutGraph, config: CreditConfig) -> tuple:
    """Eq. 6: S-(v) = w_f * l-(v) + w_l * f-(v) * L(v).

    Pre-conditions: v != g, never visited by a success, and |T-(v)| >= min_trap_visits
    or n_re(v) > 0. l-(v) = max(p-(v) - p_q-, 0), f-(v) = |T-(v)| / max(K-, 1),
    L(v) = n_re(v) / max(|T(v)|, 1). Returns ({node passing the pre-conditions: S-},
    set of traps S- (score >= min_trap_score)).
    """
    tol = config.threshold_tol
    k_neg = graph.k - graph.k_pos
    scores, traps = {}, set()
    for v in graph.nodes:
        if v == SINK or graph.n_pos[v] > 0:
            continue
        if not (graph.n_neg[v] >= config.min_trap_visits or graph.n_revisit[v] > 0):
            continue
        lift = max(graph.p_neg(v) - graph.p_neg_q, 0.0)
        freq = graph.n_neg[v] / max(k_neg, 1)
        loop = graph.n_revisit[v] / max(graph.n_traj[v], 1)
        s = config.w_f * lift + config.w_l * freq * loop
        scores[v] = s
        if at_least(s, config.min_trap_score, tol):
            traps.add(v)
    return scores, traps


def potential(graph: RolloutGraph, scores: dict, omega: float) -> dict:
    """Phi(s) = max over candidates v of S(v) * omega ^ d(s, v); unreachable candidates give 0.

    scores: {candidate: S(v)}. Returns {node: Phi} for every node of the group (g: 0).
    """
    phi = {v: 0.0 for v in graph.nodes}
    for v, s in scores.items():
        for u, d in hop_distances_to(graph, v).items():
            val = decayed(s, omega, d)
            if val > phi[u]:
                phi[u] = val
    return phi


def uniform_potential(graph: RolloutGraph, candidates: Iterable, config: CreditConfig) -> dict:
    """Eq. 7 (MD ablation): Phi(s) = max over v in the candidate set of omega ^ d(s, v)."""
    return potential(graph, {v: 1.0 for v in candidates}, config.omega)


def reliability_potential(graph: RolloutGraph, scores: dict, config: CreditConfig) -> dict:
    """Eq. 8 (and eq. 19 with S_pcc+): Phi_R(s) = max over v of Sbar(v) * omega ^ d(s, v), Sbar = S / max S."""
    return potential(graph, max_normalize(scores), config.omega)


def shaping_terms(graph: RolloutGraph, rows: list, phi_pos: dict, phi_neg: dict, config: CreditConfig) -> dict:
    """Eqs. 9-10: delta+_t = max(gamma_Phi * w+ * Phi+(s_{t+1}) - w+ * Phi+(s_t), 0), delta- likewise with w-.

    Returns {row index: (delta+, delta-)}.
    """
    out = {}
    for tr in graph.trajs:
        for i in tr:
            s, ns = rows[i]["state"], rows[i]["next_state"]
            dp = max(config.gamma_phi * config.w_pos * phi_pos[ns] - config.w_pos * phi_pos[s], 0.0)
            dn = max(config.gamma_phi * config.w_neg * phi_neg[ns] - config.w_neg * phi_neg[s], 0.0)
            out[i] = (dp, dn)
    return out


# ------------------------------------------------------------ PCC (eqs. 11-19)
def sibling_mean(values: dict, e, branches: list) -> float:
    """Unweighted mean of ``values`` over the other branches of e's source: (sum of all - own) / (n - 1)."""
    total = 0.0
    for f in branches:
        total = total + values[f]
    return (total - values[e]) / (len(branches) - 1)


def branch_contrast(graph: RolloutGraph, config: CreditConfig) -> dict:
    """Eqs. 12-13: c(e) = c~(e) / max over the group's edges of |c~|, c~(e) = p+(e) - mu+(e).

    Branches B(u) are all distinct outgoing edges of u (self-loops and edges into g
    included); c~(e) = 0 when e is the only branch. A margin |c~(e)| <= threshold_tol
    is 0: it is a rounding residue of a sibling mean (three branches at p+ = 3/7 give
    c~ = 5.6e-17), which the max-normalisation of eq. 13 would otherwise blow up to
    +-1. Returns {edge: c(e)}.
    """
    tol = config.threshold_tol
    p_pos = {e: graph.p_pos_edge(e) for e in graph.edges}
    raw = {}
    for u in graph.nodes:
        branches = [(u, w) for w in graph.succ[u]]
        for e in branches:
            margin = 0.0 if len(branches) == 1 else p_pos[e] - sibling_mean(p_pos, e, branches)
            raw[e] = margin if abs(margin) > tol else 0.0
    top = max((abs(x) for x in raw.values()), default=0.0)
    if top == 0.0:
        return {e: 0.0 for e in raw}
    return {e: x / top for e, x in raw.items()}


def branch_evidence(graph: RolloutGraph, contrast: dict, config: CreditConfig) -> dict:
    """Eq. 14: b(v) = max c(e) over incoming e = (u, v) with c(e) > 0, else 0 (g: 0); a self-loop u = v is one
    of them with ``evidence_self_loops`` (the paper), not without (the spec [decided])."""
    tol = config.threshold_tol
    loops = config.evidence_self_loops
    out = {}
    for v in graph.nodes:
        best = 0.0
        if v != SINK:
            for u in graph.pred[v]:
                c = contrast[(u, v)]
                if (loops or u != v) and positive(c, tol) and c > best:
                    best = c
        out[v] = best
    return out


def local_progress(graph: RolloutGraph, dist_g: dict, config: CreditConfig) -> dict:
    """Eq. 15: psi(e) = a_d * dd(e) + a_s * (p+(v) - p_q+) - a_f * l-(e) for e = (u, v).

    dd(e) = d(u, g) - d(v, g), 0 when either is infinite; l-(e) = max(p-(e) - mu-(e), 0)
    with mu-(e) the sibling mean of p-, and l-(e) = max(p-(v) - p_q-, 0) when e has no
    sibling. Returns {edge: psi(e)}.
    """
    p_neg = {e: graph.p_neg_edge(e) for e in graph.edges}
    out = {}
    for u in graph.nodes:
        branches = [(u, w) for w in graph.succ[u]]
        for e in branches:
            v = e[1]
            du, dv = dist_g.get(u), dist_g.get(v)
            dd = float(du - dv) if (du is not None and dv is not None) else 0.0
            if len(branches) == 1:
                l_neg = max(graph.p_neg(v) - graph.p_neg_q, 0.0)
            else:
                l_neg = max(p_neg[e] - sibling_mean(p_neg, e, branches), 0.0)
            out[e] = config.a_d * dd + config.a_s * (graph.p_pos(v) - graph.p_pos_q) - config.a_f * l_neg
    return out


def progress_evidence(graph: RolloutGraph, psi: dict, config: CreditConfig) -> dict:
    """Eq. 16: psi-bar(v) = psi~(v) / max psi~ over the group's nodes.

    psi~(v) = max psi(e) over incoming e = (u, v) with |T+(e)| >= 1 and psi(e) > 0, 0 otherwise; a
    self-loop u = v is one of them with ``evidence_self_loops`` (the paper), not without (the spec). g's
    psi~ (its edges u -> g) is in the max and psi-bar(g) = psi~(g) / max with ``progress_max_with_sink``
    (the paper: the max over all of V_q); without it (the spec) g is left out and psi-bar(g) = 0.
    Returns {node: psi-bar}.
    """
    tol = config.threshold_tol
    loops, with_sink = config.evidence_self_loops, config.progress_max_with_sink
    raw = {}
    for v in graph.nodes:
        best = 0.0
        if with_sink or v != SINK:
            for u in graph.pred[v]:
                e = (u, v)
                if (loops or u != v) and graph.e_pos[e] >= 1 and positive(psi[e], tol) and psi[e] > best:
                    best = psi[e]
        raw[v] = best
    return max_normalize(raw)


def pcc_scores(graph: RolloutGraph, s0: dict, b: dict, psi_bar: dict, config: CreditConfig) -> tuple:
    """Eqs. 17-18: E(v) = w_bc * b(v) + w_pg * psi-bar(v); S_pcc+(v) = S0+(v) * (1 + w_pcc * E(v))
    if retained else rho * S0+(v).

    retained z(v) = psi-bar(v) > 0 or m(v) >= theta_m or (kappa_bc = 1 and b(v) > 0).
    Returns ({candidate: S_pcc+ before max-normalisation}, {candidate: z(v)}).
    """
    tol = config.threshold_tol
    m = coverage(graph)
    scores, retained = {}, {}
    for v, s in s0.items():
        z = (positive(psi_bar[v], tol) or at_least(m[v], config.theta_m, tol)
             or (config.kappa_bc == 1 and positive(b[v], tol)))
        evidence = config.w_bc * b[v] + config.w_pg * psi_bar[v]
        scores[v] = s * (1.0 + config.w_pcc * evidence) if z else config.rho * s
        retained[v] = z
    return scores, retained


# ------------------------------------------------------------ return and advantage (eqs. 20-22)
def shaped_return(r_graph: dict, deltas: dict, config: CreditConfig) -> dict:
    """Eq. 20: r^M_t = r^G_t + c * lambda * (delta+_t - delta-_t). Returns {row index: r^M}."""
    return {i: r_graph[i] + config.c * config.lam * (deltas[i][0] - deltas[i][1]) for i in r_graph}


def all_equal(values: list) -> bool:
    """(max - min) <= 1e-12 * max(|max|, |min|, 1): the segment normalises to exactly 0."""
    hi, lo = max(values), min(values)
    return hi - lo <= EQUAL_RTOL * max(abs(hi), abs(lo), 1.0)


def normalize_segment(values: list, mode: str, eps: float, single_row: str) -> list:
    """Norm of one segment: ``mean_std`` (x - mean) / (std + eps), unbiased std; ``mean`` x - mean.

    single_row: ``"zero"`` (a one-row segment gives 0, step groups) or ``"unit"`` (mean 0,
    std 1, the episode group, as verl-agent's episode_norm_reward). All-equal segments of
    more than one row give exactly 0.
    """
    n = len(values)
    if n == 1:
        if single_row == "zero":
            return [0.0]
        return [(values[0] - 0.0) / (1.0 + eps)] if mode == "mean_std" else [values[0] - 0.0]
    if all_equal(values):
        return [0.0] * n
    mean = sum(values) / n
    if mode == "mean":
        return [x - mean for x in values]
    std = math.sqrt(sum((x - mean) * (x - mean) for x in values) / (n - 1))
    return [(x - mean) / (std + eps) for x in values]


def normalize_segments(values: dict, keys: dict, mode: str, eps: float, single_row: str) -> dict:
    """Normalise ``values`` ({row: x}) inside segments of equal ``keys[row]``, rows in ascending order."""
    segments: dict = {}
    for i in sorted(values):
        segments.setdefault(keys[i], []).append(i)
    out = {}
    for idx in segments.values():
        for i, y in zip(idx, normalize_segment([values[i] for i in idx], mode, eps, single_row)):
            out[i] = y
    return out


def normalize_step(values: dict, rows: list, config: CreditConfig) -> dict:
    """Eq. 21 Norm_{q,s}: normalise over rows with the same (group, state); one row gives 0."""
    keys = {i: (rows[i]["group"], rows[i]["state"]) for i in values}
    return normalize_segments(values, keys, config.norm, config.norm_eps, "zero")


def normalize_episode(values: dict, rows: list, config: CreditConfig) -> dict:
    """Eq. 22 Norm_q: normalise over all rows of the task group (``episode_norm_over="rows"``), or over its
    trajectories, each once (``"trajectories"``: the score of the trajectory's first row, broadcast back to its
    rows); a group of one value: mean 0, std 1 (``episode_single_value="unit"``) or 0 (``"zero"``)."""
    single = config.episode_single_value
    if config.episode_norm_over == "rows":
        keys = {i: rows[i]["group"] for i in values}
        return normalize_segments(values, keys, config.norm, config.norm_eps, single)
    first: dict = {}  # trajectory -> its first row index (every row of a trajectory has one score)
    for i in sorted(values):
        first.setdefault(rows[i]["traj"], i)
    heads = {i: values[i] for i in first.values()}
    normed = normalize_segments(heads, {i: rows[i]["group"] for i in heads}, config.norm, config.norm_eps, single)
    return {i: normed[first[rows[i]["traj"]]] for i in values}


def episode_scores(trajs: list, rows: list, config: CreditConfig) -> dict:
    """Z of each row: reward summed over the trajectory (t order), minus invalid_penalty if the row is invalid
    (``episode_penalty="row"``), or minus invalid_penalty times the trajectory's number of invalid rows on every
    row (``"trajectory"``: the trajectory's return)."""
    out = {}
    for tr in trajs:
        total = 0.0
        for i in tr:
            total = total + rows[i]["reward"]
        if config.episode_penalty == "trajectory":
            n_invalid = sum(1 for i in tr if rows[i]["invalid"])
            for i in tr:
                out[i] = total - config.invalid_penalty * n_invalid
            continue
        for i in tr:
            out[i] = total - config.invalid_penalty if rows[i]["invalid"] else total
    return out


def step_reward(row: dict, config: CreditConfig) -> float:
    """GiGPO's immediate reward of a row: its reward, minus invalid_penalty on an invalid row with
    ``step_penalty="reward"`` (the GraphGPO recipe)."""
    if config.step_penalty == "reward" and row["invalid"]:
        return row["reward"] - config.invalid_penalty
    return row["reward"]


def gigpo_step_returns(trajs: list, rows: list, config: CreditConfig) -> dict:
    """GiGPO R_t = sum_{k >= t} gamma^(k-t) r_k, r = :func:`step_reward`, backward: running = r_t + gamma * running."""
    out = {}
    for tr in trajs:
        running = 0.0
        for i in reversed(tr):
            running = step_reward(rows[i], config) + config.gamma * running
            out[i] = running
    return out


def penalised_step_returns(returns: dict, rows: list, config: CreditConfig) -> dict:
    """verl-agent's GiGPO step return (``step_penalty="return"``): R_t - invalid_penalty on an
    invalid row, after discounting (its trainer's ``apply_invalid_action_penalty`` on ``step_rewards``); BEACON's
    segment reward takes the penalty the same way (``beacon_penalty="return"``)."""
    return {i: r - config.invalid_penalty if rows[i]["invalid"] else r for i, r in returns.items()}


def milegpo_advantage(a_graph: float, a_res: float, episode_adv: float, config: CreditConfig) -> float:
    """Eq. 22: A_t = w_step * (A^G + eta * A^res) + w_ep * Norm_q(Z)."""
    return config.w_step * (a_graph + config.eta * a_res) + config.w_ep * episode_adv


def graphgpo_advantage(a_graph: float, episode_adv: float, config: CreditConfig) -> float:
    """GraphGPO: A_t = w_step * A^G + w_ep * Norm_q(Z) (eq. 22 with eta = 0)."""
    return config.w_step * a_graph + config.w_ep * episode_adv


# ------------------------------------------------------------ per-group node values
def milegpo_nodes(graph: RolloutGraph, dist_g: dict, config: CreditConfig, variant: str) -> dict:
    """Every per-node quantity of MileGPO for one group: {name: {node: value}} plus the potentials."""
    s0 = milestone_scores(graph, config)
    s_neg, traps = trap_scores(graph, config)
    contrast = branch_contrast(graph, config)
    b = branch_evidence(graph, contrast, config)
    psi_bar = progress_evidence(graph, local_progress(graph, dist_g, config), config)
    s_pcc, retained = pcc_scores(graph, s0, b, psi_bar, config)
    trap_score = {v: s_neg[v] for v in traps}
    if variant == "md":
        phi_pos = uniform_potential(graph, s0, config)
        phi_neg = uniform_potential(graph, traps, config)
    elif variant == "rcs":
        phi_pos = reliability_potential(graph, s0, config)
        phi_neg = reliability_potential(graph, trap_score, config)
    else:  # full
        phi_pos = reliability_potential(graph, s_pcc, config)
        phi_neg = reliability_potential(graph, trap_score, config)
    return {"s0_pos": s0, "s_neg": s_neg, "traps": traps, "b": b, "psi_bar": psi_bar, "s_pcc": s_pcc,
            "retained": retained, "phi_pos": phi_pos, "phi_neg": phi_neg}


# ------------------------------------------------------------ entry point
def _tensor(name: str, values: list) -> torch.Tensor:
    if name in INT_KEYS:
        return torch.tensor(values, dtype=torch.int64)
    if name in BOOL_KEYS:
        return torch.tensor(values, dtype=torch.bool)
    return torch.tensor(values, dtype=torch.float64)


@dataclass
class ReferenceTerms:
    """What every method's reference estimator starts from (:attr:`CreditMethod.reference
    <milegpo.credit.registry.CreditMethod.reference>`): one batch, plain Python.

    rows: the batch's N rows (dicts of the spec's fields), input order; groups: task group -> its
    trajectories (row index lists in t order); episode_adv: row index -> Norm_q(Z) (eq. 22); row_vals:
    key -> N values (the method's ``row_keys``; ``episode_score`` / ``episode_adv`` filled), node_vals:
    key -> per-node values (its ``node_keys``, empty), both filled by the method."""

    rows: list
    groups: dict
    config: CreditConfig
    variant: str
    episode_adv: dict
    row_vals: dict
    node_vals: dict


def estimate_reference(batch: StepBatch, method: str | CreditMethod, config: CreditConfig,
                       variant: str) -> CreditResult:
    """Advantages and intermediates of ``method`` on ``batch``, plain Python, per task group.

    batch: N rows in any order. Returns a :class:`CreditResult` with backend
    ``"reference"``: rows (N,) in input order with exactly the method's ``row_keys``; nodes
    (V,) sorted by (group, key) with exactly its ``node_keys`` (:class:`~milegpo.credit.registry.CreditMethod`).
    The variant is the caller's to check (:func:`milegpo.credit.estimate` does).
    """
    spec = method if isinstance(method, CreditMethod) else get_method(method)
    rows = batch.rows()
    n = len(rows)
    groups = group_trajectories(rows)
    row_vals: dict = {k: [None] * n for k in spec.row_keys}
    node_vals: dict = {k: [] for k in spec.node_keys}

    z: dict = {}
    for trajs in groups.values():
        z.update(episode_scores(trajs, rows, config))
    episode_adv = normalize_episode(z, rows, config)
    for i in range(n):
        row_vals["episode_score"][i] = z[i]
        row_vals["episode_adv"][i] = episode_adv[i]
    advantages = spec.reference(ReferenceTerms(rows, groups, config, variant, episode_adv, row_vals, node_vals))
    advantages = check_advantages(spec.name, advantages, n)  # a list of N numbers; estimate reads the values

    return CreditResult(
        method=spec.name, variant=variant, config=config, backend="reference", batch=batch,
        advantages=advantages.to(torch.float64),
        rows={k: _tensor(k, v) for k, v in row_vals.items()},
        nodes={k: _tensor(k, v) for k, v in node_vals.items()},
    )


__all__ = [
    "estimate_reference", "ReferenceTerms", "RolloutGraph", "rollout_graph", "group_trajectories", "hop_distances_to",
    "graph_return", "return_distance", "milestone_candidates", "node_degree", "coverage", "centrality",
    "milestone_scores", "trap_scores", "potential", "uniform_potential", "reliability_potential", "shaping_terms",
    "branch_contrast", "branch_evidence", "local_progress", "progress_evidence", "pcc_scores", "milegpo_nodes",
    "shaped_return", "normalize_segment", "normalize_step", "normalize_episode", "episode_scores",
    "step_reward", "gigpo_step_returns", "penalised_step_returns", "milegpo_advantage", "graphgpo_advantage",
    "decayed", "max_normalize",
]
