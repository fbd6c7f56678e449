"""The paper's four methods, GRPO, GiGPO, GraphGPO and MileGPO: their two estimators, strung from the stages of
:mod:`milegpo.credit.reference` (the oracle, one function per equation) and :mod:`milegpo.credit.vectorized`
(the pipeline), and their registrations, with the CreditConfig fields each reads (declared in
:mod:`milegpo.credit.config`; the episode term's, eq. 22, are every method's)."""

from __future__ import annotations

import torch

from .batch import SINK
from .config import CreditConfig
from .reference import (ReferenceTerms, coverage, gigpo_step_returns, graph_return, graphgpo_advantage,
                        hop_distances_to, milegpo_advantage, milegpo_nodes, normalize_step, penalised_step_returns,
                        rollout_graph, shaped_return, shaping_terms)
from .registry import CreditMethod, register
from .vectorized import GroupOrderedRows, MethodOutput, gigpo_step_terms, graph_terms
from .vectorized import graphgpo_advantage as graphgpo_advantage_terms
from .vectorized import milestone_trap_scores, potentials, shaping_and_advantage


# ------------------------------------------------------------------------------------------ the oracle
def grpo_reference(terms: ReferenceTerms) -> list:
    """GRPO: A_t = Norm_q(Z) (eq. 22's episode term)."""
    return [terms.episode_adv[i] for i in range(len(terms.rows))]


def gigpo_reference(terms: ReferenceTerms) -> list:
    """GiGPO (spec section 9): A_t = Norm_q(Z) + step_weight * Norm_{q,s}(R_t)."""
    rows, config, row_vals, episode_adv = terms.rows, terms.config, terms.row_vals, terms.episode_adv
    n = len(rows)
    advantages = [0.0] * n
    ret: dict = {}
    for trajs in terms.groups.values():
        ret.update(gigpo_step_returns(trajs, rows, config))
    if config.step_penalty == "return":
        ret = penalised_step_returns(ret, rows, config)
    step_adv = normalize_step(ret, rows, config)
    for i in range(n):
        row_vals["step_return"][i] = ret[i]
        row_vals["step_adv"][i] = step_adv[i]
        advantages[i] = episode_adv[i] + config.step_weight * step_adv[i]
    return advantages


def graphgpo_reference(terms: ReferenceTerms) -> list:
    """GraphGPO: A_t = w_step * A^G + w_ep * Norm_q(Z) (eqs. 1, 21-22 with eta = 0)."""
    return graph_reference(terms, shaped=False)


def milegpo_reference(terms: ReferenceTerms) -> list:
    """MileGPO: A_t = w_step * (A^G + eta * A^res) + w_ep * Norm_q(Z) (eqs. 1-22)."""
    return graph_reference(terms, shaped=True)


def graph_reference(terms: ReferenceTerms, shaped: bool) -> list:
    """The rollout-graph methods: r^G and A^G per group (eq. 1, 21), and with ``shaped`` MileGPO's node
    scores, potentials, shaping and A^res (eqs. 2-22). Fills the rows' and nodes' values; returns the
    advantages."""
    rows, config, variant = terms.rows, terms.config, terms.variant
    row_vals, node_vals, episode_adv = terms.row_vals, terms.node_vals, terms.episode_adv
    n = len(rows)
    advantages = [0.0] * n
    r_graph: dict = {}
    r_shaped: dict = {}
    deltas: dict = {}
    offset = 0
    for group, trajs in terms.groups.items():
        graph = rollout_graph(group, trajs, rows)
        dist_g = hop_distances_to(graph, SINK) if graph.has_sink else {}
        index = {v: offset + j for j, v in enumerate(graph.nodes)}
        offset += len(graph.nodes)
        rg = graph_return(graph, rows, dist_g, config)
        r_graph.update(rg)
        for i in rg:
            row_vals["node"][i] = index[rows[i]["state"]]
            row_vals["next_node"][i] = index[rows[i]["next_state"]]
        node_vals["group"] += [group] * len(graph.nodes)
        node_vals["key"] += list(graph.nodes)
        node_vals["is_sink"] += [v == SINK for v in graph.nodes]
        node_vals["dist"] += [dist_g.get(v, -1) for v in graph.nodes]
        if shaped:
            nv = milegpo_nodes(graph, dist_g, config, variant)
            d = shaping_terms(graph, rows, nv["phi_pos"], nv["phi_neg"], config)
            deltas.update(d)
            r_shaped.update(shaped_return(rg, d, config))
            m = coverage(graph)
            for v in graph.nodes:
                node_vals["n_traj"].append(graph.n_traj[v])
                node_vals["n_pos"].append(graph.n_pos[v])
                node_vals["n_revisit"].append(graph.n_revisit[v])
                node_vals["coverage"].append(m[v])
                node_vals["is_milestone"].append(v in nv["s0_pos"])
                node_vals["is_trap"].append(v in nv["traps"])
                node_vals["s0_pos"].append(nv["s0_pos"].get(v, 0.0))
                node_vals["s_neg"].append(nv["s_neg"].get(v, 0.0))
                node_vals["s_pcc"].append(nv["s_pcc"].get(v, 0.0))
                node_vals["b"].append(nv["b"][v])
                node_vals["psi_bar"].append(nv["psi_bar"][v])
                node_vals["retained"].append(nv["retained"].get(v, False))
                node_vals["phi_pos"].append(nv["phi_pos"][v])
                node_vals["phi_neg"].append(nv["phi_neg"][v])
    a_graph = normalize_step(r_graph, rows, config)
    for i in range(n):
        row_vals["r_graph"][i] = r_graph[i]
        row_vals["a_graph"][i] = a_graph[i]
    if not shaped:
        return [graphgpo_advantage(a_graph[i], episode_adv[i], config) for i in range(n)]
    a_mix = normalize_step(r_shaped, rows, config)
    for i in range(n):
        a_res = a_mix[i] - a_graph[i]
        row_vals["r_shaped"][i] = r_shaped[i]
        row_vals["a_mix"][i] = a_mix[i]
        row_vals["a_res"][i] = a_res
        row_vals["delta_pos"][i] = deltas[i][0]
        row_vals["delta_neg"][i] = deltas[i][1]
        advantages[i] = milegpo_advantage(a_graph[i], a_res, episode_adv[i], config)
    return advantages


# ------------------------------------------------------------------------------------------ the pipeline
def grpo_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                variant: str) -> MethodOutput:
    """GRPO: the advantage is Norm_q(Z) (``row_values["episode_adv"]``)."""
    return MethodOutput(row_values["episode_adv"], row_values)


def gigpo_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                 variant: str) -> MethodOutput:
    """GiGPO: :func:`~milegpo.credit.vectorized.gigpo_step_terms` on top of the episode terms."""
    adv, step_values = gigpo_step_terms(rows, row_values["episode_adv"], config)
    return MethodOutput(adv, {**row_values, **step_values})


def graphgpo_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                    variant: str) -> MethodOutput:
    """GraphGPO: :func:`~milegpo.credit.vectorized.graph_terms`, then
    :func:`~milegpo.credit.vectorized.graphgpo_advantage`."""
    graph, _, graph_ret, node_values = graph_terms(rows, row_values, config)
    adv, a_graph = graphgpo_advantage_terms(graph, graph_ret.r_graph, row_values["episode_adv"], config)
    return MethodOutput(adv, {**row_values, "a_graph": a_graph}, node_values, graph)


def milegpo_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                   variant: str) -> MethodOutput:
    """MileGPO: :func:`~milegpo.credit.vectorized.graph_terms`, the node scores, the potentials, the shaping and
    the advantage."""
    graph, dist, graph_ret, node_values = graph_terms(rows, row_values, config)
    scores = milestone_trap_scores(graph, dist, config, variant)
    phi = potentials(graph, scores.seeds, config)
    phi_pos, phi_neg = phi[:, 0], phi[:, 1]
    shaped = shaping_and_advantage(graph, phi, graph_ret.r_graph, row_values["episode_adv"], config)
    row_values.update(a_graph=shaped.a_graph, r_shaped=shaped.r_shaped, a_mix=shaped.a_mix, a_res=shaped.a_res,
                      delta_pos=shaped.delta_pos, delta_neg=shaped.delta_neg)
    counts = graph.counts
    node_values.update(n_traj=counts.node_traj, n_pos=counts.node_pos, n_revisit=counts.node_revisit,
                       coverage=scores.coverage, is_milestone=scores.is_milestone, is_trap=scores.is_trap,
                       s0_pos=scores.s0_pos, s_neg=scores.s_neg, s_pcc=scores.s_pcc, b=scores.b,
                       psi_bar=scores.psi_bar, retained=scores.retained, phi_pos=phi_pos, phi_neg=phi_neg)
    return MethodOutput(shaped.adv, row_values, node_values, graph)


# ------------------------------------------------------------------------------------------ the registrations
#: the fields of GraphGPO's return and advantage (eqs. 1, 21-22), which MileGPO reads too
GRAPH_FIELDS = ("c", "gamma_g", "graph_distance_offset", "graph_unreachable", "graph_penalty", "w_step", "w_ep")
#: MileGPO's own: potentials and shaping (eqs. 7-10, 20), milestone / trap scores (eqs. 2-6), PCC (eqs. 11-19),
#: eta of eq. 22, the threshold tolerance
MILEGPO_FIELDS = ("omega", "gamma_phi", "lam", "w_pos", "w_neg", "w_s", "w_m", "w_c", "w_f", "w_l",
                  "min_node_support", "degree_self_loops", "degree_max_with_sink", "min_trap_visits", "min_trap_score",
                  "evidence_self_loops", "progress_max_with_sink", "a_d", "a_s", "a_f", "w_bc", "w_pg", "w_pcc",
                  "theta_m", "kappa_bc", "rho", "eta", "threshold_tol")

register(CreditMethod(
    "grpo", "A = Norm_q(Z): the episode term alone (eq. 22 with w_step = 0)",
    grpo_reference, grpo_tables, row_keys=("episode_score", "episode_adv")))
register(CreditMethod(
    "gigpo", "A = Norm_q(Z) + step_weight * Norm_{q,s}(R_t): GiGPO's step groups of one state (spec section 9)",
    gigpo_reference, gigpo_tables, row_keys=("episode_score", "episode_adv", "step_return", "step_adv"),
    fields=("gamma", "step_weight", "step_penalty"),
    # verl-agent's trainer: the penalty after discounting, in place of a preset's placement (graphgpo_reproduction)
    settings={"gigpo-verl": {"step_penalty": "return"}}))
register(CreditMethod(
    "graphgpo", "A = w_step * A^G + w_ep * Norm_q(Z): the rollout graph's return (eqs. 1, 21-22 with eta = 0)",
    graphgpo_reference, graphgpo_tables,
    row_keys=("episode_score", "episode_adv", "r_graph", "a_graph", "node", "next_node"),
    node_keys=("group", "key", "is_sink", "dist"), fields=GRAPH_FIELDS))
register(CreditMethod(
    "milegpo", "A = w_step * (A^G + eta * A^res) + w_ep * Norm_q(Z): milestone / trap shaping (eqs. 1-22)",
    milegpo_reference, milegpo_tables,
    row_keys=("episode_score", "episode_adv", "r_graph", "a_graph", "node", "next_node", "r_shaped", "a_mix",
              "a_res", "delta_pos", "delta_neg"),
    node_keys=("group", "key", "is_sink", "dist", "n_traj", "n_pos", "n_revisit", "coverage", "is_milestone",
               "is_trap", "s0_pos", "s_neg", "s_pcc", "b", "psi_bar", "retained", "phi_pos", "phi_neg"),
    variants=("md", "rcs", "full"), fields=GRAPH_FIELDS + MILEGPO_FIELDS))

__all__ = ["grpo_reference", "gigpo_reference", "graphgpo_reference", "milegpo_reference", "graph_reference",
           "grpo_tables", "gigpo_tables", "graphgpo_tables", "milegpo_tables", "GRAPH_FIELDS", "MILEGPO_FIELDS"]
