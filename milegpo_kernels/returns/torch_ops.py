"""The result type, the input checks and the torch twins of :func:`milegpo_kernels.discounted_returns`,
:func:`milegpo_kernels.graph_return` and :func:`milegpo_kernels.episode_scores`; the ops are described in
:mod:`milegpo_kernels.returns`."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ..graph import INF
from ..inputs import check_id_ranges, reads_host


def _check_rows(reward, flags: dict, op: str):
    if reward.dtype != torch.float64 or reward.dim() != 1:
        raise ValueError(f"{op}: reward must be (N,) torch.float64, got {reward.dtype} {tuple(reward.shape)}")
    for name, x in flags.items():
        if x.dtype != torch.bool or x.shape != reward.shape or x.device != reward.device:
            raise ValueError(f"{op}: {name} must be a bool tensor like reward ({tuple(reward.shape)} on "
                             f"{reward.device}), got {x.dtype} {tuple(x.shape)} on {x.device}")


def check_discounted_returns(reward, last, gamma):
    """Raise ValueError naming the input of :func:`milegpo_kernels.discounted_returns` that is wrong."""
    _check_rows(reward, {"last": last}, "discounted_returns")
    if not math.isfinite(gamma):
        raise ValueError(f"discounted_returns: gamma must be finite, got {gamma}")


def discounted_returns_torch(reward: torch.Tensor, last: torch.Tensor, gamma: float) -> torch.Tensor:
    """The torch twin of :func:`discounted_returns`: no loop over rows; on CUDA no host sync."""
    n = reward.shape[0]
    if n == 0:
        return reward.clone()
    same_next = ~last
    same_next[-1] = False  # the batch's last row ends a trajectory
    if not reward.is_cuda:
        out = _returns_by_columns(reward, same_next, gamma)
        if out is not None:
            return out
    a = reward.clone()
    b = torch.where(same_next, torch.full_like(reward, gamma), torch.zeros_like(reward))
    # nxt[i]: the row whose value R_i still depends on (i + 2^k inside the trajectory)
    idx = torch.arange(n, device=reward.device)
    nxt = torch.where(same_next, idx + 1, idx)
    live = same_next.clone()
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):
        a = torch.where(live, a + b * a.index_select(0, nxt), a)
        b = torch.where(live, b * b.index_select(0, nxt), b)
        live_next = live & live.index_select(0, nxt)
        nxt = torch.where(live, nxt.index_select(0, nxt), nxt)
        live = live_next
    return a


def _returns_by_columns(reward, same_next, gamma: float):
    """On CPU: the trajectories laid out as the columns of a (longest, trajectories) table, walked
    backward one step for all of them at a time, ``running = reward + gamma * running`` as the
    reference does; a finished (shorter) trajectory's padding stays 0. None where the table would
    be much larger than the batch (one long trajectory among many short ones): the scan then."""
    n = reward.shape[0]
    start = torch.ones(n, dtype=torch.bool)
    start[1:] = ~same_next[:-1]
    traj = torch.cumsum(start, 0) - 1
    first = torch.nonzero(start).squeeze(1)
    step = torch.arange(n) - first.index_select(0, traj)
    n_traj, longest = first.shape[0], int(step.max()) + 1
    if n_traj * longest > 4 * n + 4096:
        return None
    table = torch.zeros(longest, n_traj, dtype=reward.dtype)
    cell = step * n_traj + traj
    table.view(-1).index_copy_(0, cell, reward)
    # the walk on the table's memory through numpy: a step is two calls of ~1 us on short rows,
    # where torch's per-op overhead made it slower than the reference at 6,400 rows; multiply,
    # then add: two roundings, as the reference (no fused multiply-add)
    rows = table.numpy()
    scaled = np.zeros(n_traj, dtype=rows.dtype)  # gamma * R_{t+1}
    for t in range(longest - 1, -1, -1):
        np.add(rows[t], scaled, out=rows[t])
        np.multiply(rows[t], gamma, out=scaled)
    return table.view(-1).index_select(0, cell)


class GraphReturn(NamedTuple):
    """``r_graph`` (N,) float64: r^G of each row; ``node_dist`` (V,) int64: hops to the sink,
    -1 where it is unreachable."""

    r_graph: torch.Tensor
    node_dist: torch.Tensor


def check_graph_return(dist, next_node, c, gamma):
    """Raise ValueError naming the input of :func:`milegpo_kernels.graph_return` that is wrong; on the host
    (:func:`milegpo_kernels.inputs.reads_host`) also a ``next_node`` or ``dist`` entry out of range."""
    if dist.dtype != torch.int64 or dist.dim() != 1:
        raise ValueError(f"graph_return: dist must be (V,) torch.int64, got {dist.dtype} {tuple(dist.shape)}")
    if next_node.dtype != torch.int64 or next_node.dim() != 1 or next_node.device != dist.device:
        raise ValueError(f"graph_return: next_node must be (N,) torch.int64 on {dist.device}, got {next_node.dtype} "
                         f"{tuple(next_node.shape)} on {next_node.device}")
    for name, x in (("c", c), ("gamma", gamma)):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ValueError(f"graph_return: {name} must be a finite number, got {x!r}")
    if reads_host(dist):  # reading ids on CUDA would be a host sync: the kernel gives 0 for such rows
        check_id_ranges({"next_node": (next_node, dist.shape[0])}, "graph_return")
        bad = torch.nonzero((dist < 0) | ((dist >= dist.shape[0]) & (dist != INF)))
        if bad.numel():
            i = int(bad[0, 0])
            raise ValueError(f"graph_return: dist[{i}] = {int(dist[i])} is neither a hop count below V = "
                             f"{dist.shape[0]} nor INF")


def graph_return_torch(dist: torch.Tensor, next_node: torch.Tensor, c: float, gamma: float) -> GraphReturn:
    """The torch twin of :func:`graph_return`."""
    v = dist.shape[0]
    finite = dist < INF
    powers = torch.full((v + 1,), gamma, dtype=torch.float64, device=dist.device)  # c, c g, c g g, ...
    powers[:1].fill_(c)
    r_node = torch.where(finite, powers.cumprod_(0).index_select(0, dist.clamp(0, v)), 0.0)
    return GraphReturn(r_node.index_select(0, next_node), torch.where(finite, dist, -1))


def check_episode_scores(reward, invalid, last, penalty):
    """Raise ValueError naming the input of :func:`milegpo_kernels.episode_scores` that is wrong."""
    _check_rows(reward, {"invalid": invalid, "last": last}, "episode_scores")
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not math.isfinite(penalty):
        raise ValueError(f"episode_scores: penalty must be a finite number, got {penalty!r}")


def episode_scores_torch(reward: torch.Tensor, invalid: torch.Tensor, last: torch.Tensor,
                         penalty: float) -> torch.Tensor:
    """The torch twin of :func:`episode_scores`."""
    n = reward.shape[0]
    if n == 0:
        return reward.clone()
    starts = torch.ones(n, dtype=torch.int64, device=reward.device)
    starts[1:] = last[:-1]
    traj = torch.cumsum(starts, 0) - 1
    total = torch.zeros_like(reward).scatter_add_(0, traj, reward).index_select(0, traj)
    return torch.where(invalid, total - penalty, total)
