"""Milestone, trap and branch scores of a rollout graph, in one op (spec eqs. 2-8, 11-18).

:func:`graph_scores` takes the rollout graph (edges ``src -> dst`` over nodes that
belong to task groups) with its counts (distinct trajectories per node and edge,
split by outcome; revisits; trajectories per group) and returns every per-node
score of the MileGPO calibration, up to the seeds of the potentials:

- milestone candidates and their score S0+ (eqs. 2-5: lift, coverage, centrality);
- trap candidates and their score S- (eq. 6);
- branch contrast b (eqs. 12-14) and progress-gap evidence psi-bar (eqs. 15-16);
- the retained set and the PCC score (eqs. 17-18);
- the seeds of Phi+ / Phi- for the variant: ``md`` the candidate indicators,
  ``rcs`` the max-normalised S0+ / S- (eq. 8), ``full`` the max-normalised PCC score
  and S- (eq. 19).

The torch twin is a chain of segment ops (about 170 small kernels on a GPU); the
Triton path (:mod:`milegpo_kernels.scoring.triton_ops`) computes the same quantities in
seven passes over the edges and nodes, with integer atomics for the maxima. Both
evaluate every formula with the same operations in the same order, so results agree
to the last bit, except where a float sum (the sibling sums of eq. 12) lands in a
different order; thresholds are taken with ``threshold_tol`` so that such a residue
changes no decision.

Inputs (V nodes, E edges, G groups; padding slots allowed, marked invalid):

- ``src, dst``: (E,) int64 node ids; ``edge_valid``: (E,) bool.
- ``node_group``: (V,) int64 in ``[0, G)``; ``node_valid``, ``is_sink``: (V,) bool.
- ``dist``: (V,) int64 hop distance to the sink, :data:`~milegpo_kernels.graph.INF`
  where unreachable.
- ``n_traj, n_pos, n_revisit``: (V,) int64: |T(s)|, |T+(s)|, n_re(s).
- ``e_traj, e_pos``: (E,) int64: |T(e)|, |T+(e)|.
- ``k_count, k_pos``: (G,) int64: trajectories per group, successful ones.
"""

from __future__ import annotations

from .._backend import resolve
from .torch_ops import F64, VARIANTS, GraphScores, ScoreParams, check_inputs, graph_scores_torch

__all__ = ["F64", "VARIANTS", "GraphScores", "ScoreParams", "graph_scores", "graph_scores_torch"]


def graph_scores(src, dst, edge_valid, node_group, node_valid, is_sink, dist, n_traj, n_pos, n_revisit,
                 e_traj, e_pos, k_count, k_pos, params: ScoreParams, variant: str = "full", *,
                 backend: str = "auto") -> GraphScores:
    """Milestone / trap / branch scores and potential seeds of a rollout graph: see the module."""
    args = (src, dst, edge_valid, node_group, node_valid, is_sink, dist, n_traj, n_pos, n_revisit, e_traj, e_pos,
            k_count, k_pos, params, variant)
    check_inputs(*args)
    if resolve(backend, src, node_group) == "triton":
        from .triton_ops import graph_scores_triton

        return graph_scores_triton(*args)
    return graph_scores_torch(*args)
