"""discounted_returns (GiGPO's step return), episode_scores (Z) and graph_return (GraphGPO's
r^G): Triton kernels vs torch twins vs plain Python.

discounted_returns: trajectories of random lengths (1 step, the horizon, runs crossing the
kernel's block of 1024), a batch whose last row is not marked as a trajectory's end, gamma
0 and 1, 1e5 rows. The kernel walks as the reference does: equal to the last bit.
episode_scores: the same trajectories, invalid rows, penalties 0 and 0.1: the kernel sums
forward as the reference does, equal to the last bit.
graph_return: no rows, no nodes, all nodes unreachable, the sink itself (d = 0), paths
longer than the horizon, rows and nodes around the block, gamma 0 and 1, 1e5 rows: equal
to the reference's repeated products to the last bit.
"""

from __future__ import annotations

import random

import pytest
import torch

from milegpo_kernels import (
    INF,
    discounted_returns,
    discounted_returns_torch,
    episode_scores,
    episode_scores_torch,
    graph_return,
    graph_return_torch,
)

from .helpers import BLOCK, check_close

pytestmark = pytest.mark.usefixtures("garbage_empty")


def reference_discounted_returns(reward, last, gamma):
    out, running = [0.0] * len(reward), 0.0
    for i in range(len(reward) - 1, -1, -1):
        if i == len(reward) - 1 or last[i]:
            running = 0.0
        running = reward[i] + gamma * running
        out[i] = running
    return out


def _trajectories(rng, n, max_len):
    last, left = [], 0
    for i in range(n):
        if left == 0:
            left = rng.randint(1, max_len)
        left -= 1
        last.append(left == 0)
    reward = [rng.choice([0.0, 0.0, 1.0, -0.1, rng.gauss(0.0, 3.0)]) for _ in range(n)]
    return reward, last


CASES = {"empty": (0, 5), "one": (1, 1), "singletons": (300, 1), "horizon_50": (2000, 50),
         "block_plus_one": (BLOCK + 1, 9)}


@pytest.mark.parametrize("gamma", [0.95, 1.0, 0.0])
@pytest.mark.parametrize("case", list(CASES))
def test_discounted_returns(case, gamma, device):
    n, max_len = CASES[case]
    reward, last = _trajectories(random.Random(n + max_len), n, max_len)
    want = reference_discounted_returns(reward, last, gamma)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    lt = torch.tensor(last, dtype=torch.bool, device=device)
    got = discounted_returns(r, lt, gamma, backend="triton")
    assert got.shape == (n,) and got.cpu().tolist() == want  # bit-exact: the same walk
    assert discounted_returns_torch(r.cpu(), lt.cpu(), gamma).tolist() == want  # on CPU: the same walk, by columns


@pytest.mark.parametrize("gamma", [0.95, 0.0])
def test_discounted_returns_twin_scans_one_long_trajectory_among_short_ones(gamma):
    # a (3000 x 2001) table for 5000 rows would be mostly padding: the twin scans instead (as on CUDA)
    rng = random.Random(4)
    reward = [rng.gauss(0.0, 1.0) for _ in range(5000)]
    last = [i >= 2999 for i in range(5000)]
    want = reference_discounted_returns(reward, last, gamma)
    check_close(discounted_returns_torch(torch.tensor(reward, dtype=torch.float64), torch.tensor(last), gamma), want)


def test_discounted_returns_walk_across_blocks(device):
    # one trajectory longer than a block: its lane walks back through the block before
    reward, _ = _trajectories(random.Random(2), BLOCK + 40, 1)
    last = [i in (20, BLOCK + 39) for i in range(BLOCK + 40)]
    want = reference_discounted_returns(reward, last, 0.95)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    got = discounted_returns(r, torch.tensor(last, device=device), 0.95, backend="triton")
    assert got.cpu().tolist() == want


def test_discounted_returns_unmarked_last_row_and_1e5(device):
    reward, last = _trajectories(random.Random(3), 100_000, 8)
    last[-1] = False  # the batch's last row ends a trajectory anyway
    want = reference_discounted_returns(reward, last, 0.9)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    lt = torch.tensor(last, dtype=torch.bool, device=device)
    assert discounted_returns(r, lt, 0.9, backend="triton").cpu().tolist() == want
    assert discounted_returns_torch(r.cpu(), lt.cpu(), 0.9).tolist() == want


def test_discounted_returns_errors(device):
    r = torch.zeros(4, dtype=torch.float64, device=device)
    with pytest.raises(ValueError, match=r"reward must be \(N,\) torch.float64"):
        discounted_returns(r.float(), torch.ones(4, dtype=torch.bool, device=device), 0.9, backend="triton")
    with pytest.raises(ValueError, match="last must be a bool tensor like reward"):
        discounted_returns(r, torch.ones(3, dtype=torch.bool, device=device), 0.9, backend="triton")
    with pytest.raises(ValueError, match="gamma must be finite"):
        discounted_returns(r, torch.ones(4, dtype=torch.bool, device=device), float("nan"), backend="triton")


def reference_graph_return(dist, next_node, c, gamma):
    def power(d):
        r = c
        for _ in range(d):
            r = r * gamma
        return r

    return ([power(dist[v]) if dist[v] < INF else 0.0 for v in next_node],
            [d if d < INF else -1 for d in dist])


def _graph(rng, v, n, max_d, p_unreachable=0.3):
    dist = [INF if rng.random() < p_unreachable else rng.randint(0, max_d) for _ in range(v)]
    return dist, [rng.randrange(v) for _ in range(n)] if v else []


GRAPH_CASES = {"empty": (0, 0, 0), "nodes_no_rows": (5, 0, 3), "one": (1, 1, 0), "mixed": (300, 2000, 50),
               "long_paths": (800, 500, 700), "block_plus_one": (BLOCK + 1, BLOCK - 1, 9),
               "more_rows_than_nodes": (7, 3 * BLOCK, 6)}


@pytest.mark.parametrize("gamma", [0.2, 1.0, 0.0])
@pytest.mark.parametrize("case", list(GRAPH_CASES))
def test_graph_return(case, gamma, device):
    v, n, max_d = GRAPH_CASES[case]
    dist, nxt = _graph(random.Random(v + n), v, n, max_d)
    want = reference_graph_return(dist, nxt, 10.0, gamma)
    d = torch.tensor(dist, dtype=torch.int64, device=device).reshape(v)
    x = torch.tensor(nxt, dtype=torch.int64, device=device).reshape(n)
    got = graph_return(d, x, 10.0, gamma, backend="triton")
    assert got.r_graph.cpu().tolist() == want[0] and got.node_dist.cpu().tolist() == want[1]  # bit-exact
    twin = graph_return_torch(d.cpu(), x.cpu(), 10.0, gamma)
    check_close(twin.r_graph, want[0])
    assert twin.node_dist.tolist() == want[1]


def test_graph_return_all_unreachable_and_1e5(device):
    for v, n, p in ((50, 400, 1.0), (20_000, 100_000, 0.2)):
        dist, nxt = _graph(random.Random(v), v, n, 60, p)
        want = reference_graph_return(dist, nxt, -3.5, 0.9)
        got = graph_return(torch.tensor(dist, device=device), torch.tensor(nxt, device=device), -3.5, 0.9,
                           backend="triton")
        assert got.r_graph.cpu().tolist() == want[0] and got.node_dist.cpu().tolist() == want[1]


def test_graph_return_errors(device):
    d = torch.tensor([0, 1, INF], device=device)
    x = torch.tensor([0, 2], device=device)
    with pytest.raises(ValueError, match=r"dist must be \(V,\) torch.int64"):
        graph_return(d.int(), x, 10.0, 0.2, backend="triton")
    with pytest.raises(ValueError, match=r"next_node must be \(N,\) torch.int64"):
        graph_return(d, x.float(), 10.0, 0.2, backend="triton")
    with pytest.raises(ValueError, match="gamma must be a finite number"):
        graph_return(d, x, 10.0, float("inf"), backend="triton")
    if device != "cpu":  # on CUDA the kernel gives such rows 0 (a check would sync)
        return
    for backend in ("torch", "triton"):
        with pytest.raises(ValueError, match=r"graph_return: next_node\[1\] = 3 is outside \[0, 3\)"):
            graph_return(d, torch.tensor([0, 3]), 10.0, 0.2, backend=backend)
        with pytest.raises(ValueError, match=r"graph_return: dist\[1\] = -1 is neither a hop count"):
            graph_return(torch.tensor([0, -1, INF]), x, 10.0, 0.2, backend=backend)
        with pytest.raises(ValueError, match=r"graph_return: dist\[2\] = 3 is neither a hop count below V = 3"):
            graph_return(torch.tensor([0, 1, 3]), x, 10.0, 0.2, backend=backend)


def reference_episode_scores(reward, invalid, last, penalty):
    """Z as the reference forms it: total = total + reward over the trajectory, then per row."""
    out, start = [0.0] * len(reward), 0
    for i in range(len(reward)):
        if i == len(reward) - 1 or last[i]:
            total = 0.0
            for j in range(start, i + 1):
                total = total + reward[j]
            for j in range(start, i + 1):
                out[j] = total - penalty if invalid[j] else total
            start = i + 1
    return out


@pytest.mark.parametrize("penalty", [0.1, 0.0])
@pytest.mark.parametrize("case", list(CASES))
def test_episode_scores(case, penalty, device):
    n, max_len = CASES[case]
    rng = random.Random(n + max_len + 1)
    reward, last = _trajectories(rng, n, max_len)
    invalid = [rng.random() < 0.2 for _ in range(n)]
    want = reference_episode_scores(reward, invalid, last, penalty)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    inv = torch.tensor(invalid, dtype=torch.bool, device=device).reshape(n)
    lt = torch.tensor(last, dtype=torch.bool, device=device).reshape(n)
    got = episode_scores(r, inv, lt, penalty, backend="triton")
    assert got.shape == (n,) and got.cpu().tolist() == want  # bit-exact: the same sum
    assert episode_scores_torch(r.cpu(), inv.cpu(), lt.cpu(), penalty).tolist() == want  # in row order on CPU


def test_episode_scores_across_blocks_unmarked_last_and_1e5(device):
    for n, last_at in ((BLOCK + 40, (20, BLOCK + 39)), (100_000, None)):
        rng = random.Random(n)
        reward, last = _trajectories(rng, n, 8)
        if last_at is not None:  # one trajectory longer than a block
            last = [i in last_at for i in range(n)]
        last[-1] = False  # the batch's last row ends a trajectory anyway
        invalid = [rng.random() < 0.1 for _ in range(n)]
        want = reference_episode_scores(reward, invalid, last, 0.1)
        got = episode_scores(torch.tensor(reward, dtype=torch.float64, device=device),
                             torch.tensor(invalid, device=device), torch.tensor(last, device=device), 0.1,
                             backend="triton")
        assert got.cpu().tolist() == want


def test_episode_scores_errors(device):
    r = torch.zeros(4, dtype=torch.float64, device=device)
    flag = torch.zeros(4, dtype=torch.bool, device=device)
    with pytest.raises(ValueError, match=r"episode_scores: reward must be \(N,\) torch.float64"):
        episode_scores(r.float(), flag, flag, 0.1, backend="triton")
    with pytest.raises(ValueError, match="episode_scores: invalid must be a bool tensor like reward"):
        episode_scores(r, flag[:3], flag, 0.1, backend="triton")
    with pytest.raises(ValueError, match="episode_scores: last must be a bool tensor like reward"):
        episode_scores(r, flag, flag.long(), 0.1, backend="triton")
    with pytest.raises(ValueError, match="episode_scores: penalty must be a finite number"):
        episode_scores(r, flag, flag, float("nan"), backend="triton")
