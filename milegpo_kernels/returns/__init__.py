"""Returns of the credit methods: the episode score, GiGPO's discounted step return and
GraphGPO's graph return.

``episode_scores(reward, invalid, last, penalty)``: Z of each row (spec eq. 22), the sum
of its trajectory's rewards in step order, minus ``penalty`` on an invalid row. Rows as
for :func:`discounted_returns`. The Triton kernel walks each trajectory forward from its
first row, ``total = total + reward``, as the plain-Python reference sums (equal to the
last bit); the torch twin scatter-adds per trajectory (in row order on CPU: the same
rounding; atomics on CUDA, within a few ulps).

``discounted_returns(reward, last, gamma)``: rows of a trajectory are consecutive and in
step order; ``last`` marks each trajectory's last row (the batch's last row ends one in
any case). ``R_t = reward_t + gamma * R_{t+1}``, ``R = reward`` at a last row.

The Triton kernel walks each trajectory backward from its last row, one lane per trajectory,
as the plain-Python reference does (``running = reward + gamma * running``), so its results
are the reference's to the last bit. So are the torch twin's on CPU: it lays the
trajectories out as the columns of a table and walks them all backward one step at a time
(as many rounds as the longest has steps). On CUDA (and on CPU for one long trajectory among
many short ones) the twin is a segmented linear-recurrence scan (Hillis-Steele doubling,
ceil(log2 N) rounds of a few ops each, no host sync), within a few ulps.

``graph_return(dist, next_node, c, gamma)``: ``r^G = c * gamma^d(s_{t+1}, g)`` (spec eq. 1)
per row from the hop distances of the nodes (``dist`` (V,) int64, :data:`INF` where the
sink is unreachable: r^G = 0), and the distances as the node table reports them (-1
where unreachable). The power is formed by repeated multiplication, ``c * gamma *
gamma ...``, as the plain-Python reference forms it: the Triton kernel multiplies in a
loop per row (equal to the reference to the last bit); the torch twin takes the
cumulative product of ``[c, gamma, gamma, ...]`` (sequential on CPU: the same rounding;
a parallel scan on CUDA, within a few ulps).
"""

from __future__ import annotations

import torch

from .._backend import resolve
from .torch_ops import (
    GraphReturn,
    check_discounted_returns,
    check_episode_scores,
    check_graph_return,
    discounted_returns_torch,
    episode_scores_torch,
    graph_return_torch,
)

__all__ = ["GraphReturn", "discounted_returns", "discounted_returns_torch", "episode_scores", "episode_scores_torch",
           "graph_return", "graph_return_torch"]


def discounted_returns(reward: torch.Tensor, last: torch.Tensor, gamma: float, *, backend: str = "auto"):
    """See the module. reward: (N,) float64; last: (N,) bool. Returns (N,) float64."""
    check_discounted_returns(reward, last, gamma)
    if resolve(backend, reward) == "triton":
        from .triton_ops import discounted_returns_triton

        return discounted_returns_triton(reward, last, gamma)
    return discounted_returns_torch(reward, last, gamma)


def graph_return(dist: torch.Tensor, next_node: torch.Tensor, c: float, gamma: float, *,
                 backend: str = "auto") -> GraphReturn:
    """See the module. dist: (V,) int64; next_node: (N,) int64 in [0, V). Returns :class:`GraphReturn`."""
    check_graph_return(dist, next_node, c, gamma)
    if resolve(backend, dist) == "triton":
        from .triton_ops import graph_return_triton

        return graph_return_triton(dist, next_node, float(c), float(gamma))
    return graph_return_torch(dist, next_node, float(c), float(gamma))


def episode_scores(reward: torch.Tensor, invalid: torch.Tensor, last: torch.Tensor, penalty: float, *,
                   backend: str = "auto") -> torch.Tensor:
    """See the module. reward: (N,) float64; invalid, last: (N,) bool. Returns Z, (N,) float64."""
    check_episode_scores(reward, invalid, last, penalty)
    if resolve(backend, reward) == "triton":
        from .triton_ops import episode_scores_triton

        return episode_scores_triton(reward, invalid, last, float(penalty))
    return episode_scores_torch(reward, invalid, last, float(penalty))
