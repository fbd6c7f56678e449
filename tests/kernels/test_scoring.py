"""graph_scores: Triton kernels vs torch twin vs plain Python (spec eqs. 2-8, 11-19).

The plain-Python reference below is written from the spec's definitions on lists, one
node / edge / group at a time; the benchmarks import it. Inputs are random rollout
graphs with their counts (groups of nodes, edges inside groups, padding slots marked
invalid) and adversarial ones: no node, no edge, one node, every node a sink, no
success anywhere, equal sibling margins (the sums of eq. 12 land on ties), sizes
around the kernels' block of 1024, out-of-range ids.
"""

from __future__ import annotations

import random

import pytest
import torch

from milegpo.credit import presets
from milegpo_kernels import INF, GraphScores, ScoreParams, graph_scores, graph_scores_torch

from .helpers import BLOCK, check_close, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")

FIELDS = ("src", "dst", "edge_valid", "node_group", "node_valid", "is_sink", "dist", "n_traj", "n_pos", "n_revisit",
          "e_traj", "e_pos", "k_count", "k_pos")
BOOL_FIELDS = {"edge_valid", "node_valid", "is_sink"}
#: the spec's reading of eqs. 5, 14, 16 (the cases' hand expectations, e.g. psi-bar 0 at the sink, are its)
DEFAULT = ScoreParams.of(presets.ALFWORLD_SPEC)
PARAMS = {
    "default": DEFAULT,
    # the paper's reading (spec section 12): self-loops in deg, in b and psi~; the sink in C's and psi-bar's max
    "paper": ScoreParams.of(presets.ALFWORLD_PAPER),
    # the other branches of eq. 18 and of the retained set
    "kappa_rho": DEFAULT._replace(kappa_bc=1, rho=0.5, theta_m=0.5, w_pcc=0.7, min_node_support=2, min_trap_visits=1,
                             min_trap_score=0.05, w_c=0.6, a_d=0.3, a_f=2.0),
}


# ---------------------------------------------------------------------------
# plain-Python reference
# ---------------------------------------------------------------------------


def _group_max(values, groups, mask, n_groups):
    out = [0.0] * n_groups  # "0 where nothing qualifies" (every use normalises by a positive max)
    seen = [False] * n_groups
    for x, g, m in zip(values, groups, mask):
        if m and (not seen[g] or x > out[g]):
            out[g], seen[g] = x, True
    return out


def _normalised(values, groups, mask, n_groups):
    """max_normalize inside groups: x / max over the masked members when that max is > 0."""
    mx = _group_max(values, groups, mask, n_groups)
    return [x / mx[g] if m and mx[g] > 0 else 0.0 for x, g, m in zip(values, groups, mask)]


def reference_graph_scores(src, dst, edge_valid, node_group, node_valid, is_sink, dist, n_traj, n_pos, n_revisit, e_traj,
                    e_pos, k_count, k_pos, p: ScoreParams = DEFAULT, variant: str = "full") -> dict:
    v, e, n_groups = len(node_group), len(src), len(k_count)
    tol = p.threshold_tol
    live = [node_valid[i] and not is_sink[i] for i in range(v)]
    gq = node_group
    p_q = [k_pos[g] / max(k_count[g], 1) for g in range(n_groups)]  # p_q+
    n_neg = [n_traj[i] - n_pos[i] for i in range(v)]
    lift_raw = [n_pos[i] / max(n_traj[i], 1) - p_q[gq[i]] for i in range(v)]
    lift_neg = [max(n_neg[i] / max(n_traj[i], 1) - (1.0 - p_q[gq[i]]), 0.0) for i in range(v)]
    coverage = [n_pos[i] / max(k_pos[gq[i]], 1) for i in range(v)]
    edges = [j for j in range(e) if edge_valid[j]]
    deg = [0] * v
    for j in edges:
        if src[j] != dst[j] or p.degree_self_loops:
            deg[src[j]] += 1
            deg[dst[j]] += 1
    in_max = [(live[i] or (p.degree_max_with_sink and node_valid[i])) and n_pos[i] >= 1 for i in range(v)]
    max_deg = _group_max(deg, gq, in_max, n_groups)
    is_m = [live[i] and n_pos[i] >= p.min_node_support for i in range(v)]
    s0 = [0.0] * v
    for i in range(v):
        if is_m[i]:
            centrality = deg[i] / max_deg[gq[i]] if max_deg[gq[i]] > 0 else 0.0
            s0[i] = p.w_s * max(lift_raw[i], 0.0) + p.w_m * coverage[i] + p.w_c * centrality
    s_neg, is_t = [0.0] * v, [False] * v
    for i in range(v):
        if live[i] and n_pos[i] == 0 and (n_neg[i] >= p.min_trap_visits or n_revisit[i] > 0):
            freq = n_neg[i] / max(k_count[gq[i]] - k_pos[gq[i]], 1)
            s_neg[i] = p.w_f * lift_neg[i] + p.w_l * freq * (n_revisit[i] / max(n_traj[i], 1))
            is_t[i] = s_neg[i] >= p.min_trap_score - tol

    # eq. 12: an edge's success rate against the mean of its siblings (same source)
    rate_pos = [e_pos[j] / max(e_traj[j], 1) for j in range(e)]
    rate_neg = [(e_traj[j] - e_pos[j]) / max(e_traj[j], 1) for j in range(e)]
    branches = {}
    for j in edges:
        branches.setdefault(src[j], []).append(j)
    c_tilde, lneg = [0.0] * e, [0.0] * e
    for j in edges:
        sib = branches[src[j]]
        if len(sib) > 1:
            mu_pos = (sum(rate_pos[k] for k in sib) - rate_pos[j]) / (len(sib) - 1)
            mu_neg = (sum(rate_neg[k] for k in sib) - rate_neg[j]) / (len(sib) - 1)
            c = rate_pos[j] - mu_pos
            c_tilde[j] = c if abs(c) > tol else 0.0
            lneg[j] = max(rate_neg[j] - mu_neg, 0.0)
        else:
            lneg[j] = lift_neg[dst[j]]
    edge_group = [gq[s] for s in src]
    c_max = _group_max([abs(c) for c in c_tilde], edge_group, edge_valid, n_groups)
    b, psi_t = [0.0] * v, [0.0] * v
    for j in edges:
        if src[j] == dst[j] and not p.evidence_self_loops:
            continue
        c = c_tilde[j] / c_max[edge_group[j]] if c_max[edge_group[j]] > 0 else 0.0  # eq. 13
        if c > tol:
            b[dst[j]] = max(b[dst[j]], c)  # eq. 14
        d_s, d_d = dist[src[j]], dist[dst[j]]
        dd = float(d_s - d_d) if d_s < INF and d_d < INF else 0.0
        psi = p.a_d * dd + p.a_s * lift_raw[dst[j]] - p.a_f * lneg[j]  # eq. 15
        if e_pos[j] >= 1 and psi > tol:
            psi_t[dst[j]] = max(psi_t[dst[j]], psi)
    b = [0.0 if is_sink[i] else b[i] for i in range(v)]
    psi_bar = _normalised(psi_t, gq, node_valid if p.progress_max_with_sink else live, n_groups)  # eq. 16
    retained, s_pcc = [False] * v, [0.0] * v
    for i in range(v):
        if not is_m[i]:
            continue
        retained[i] = psi_bar[i] > tol or coverage[i] >= p.theta_m - tol or (p.kappa_bc == 1 and b[i] > tol)
        evidence = p.w_bc * b[i] + p.w_pg * psi_bar[i]  # eq. 17
        s_pcc[i] = s0[i] * (1.0 + p.w_pcc * evidence) if retained[i] else p.rho * s0[i]  # eq. 18
    if variant == "md":
        seeds = [[float(a), float(t)] for a, t in zip(is_m, is_t)]
    else:
        pos = s0 if variant == "rcs" else s_pcc
        seeds = [list(pair) for pair in zip(_normalised(pos, gq, is_m, n_groups),
                                            _normalised(s_neg, gq, is_t, n_groups))]
    return {"coverage": coverage, "is_milestone": is_m, "is_trap": is_t, "s0_pos": s0, "s_neg": s_neg,
            "s_pcc": s_pcc, "b": b, "psi_bar": psi_bar, "retained": retained, "seeds": seeds}


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------


def random_graph_inputs(rng: random.Random, n_groups: int, nodes_per_group: int, edges_per_group: int,
                        pad_nodes: int = 0, pad_edges: int = 0, k: int = 8, p_sink: float = 0.1,
                        p_success: float = 0.4, equal_rates: bool = False) -> dict:
    """A rollout graph with counts that hang together: n_pos <= n_traj <= K of the group."""
    node_group, is_sink, n_traj, n_pos, n_rev, dist = [], [], [], [], [], []
    k_count = [k] * n_groups
    k_pos = [sum(rng.random() < p_success for _ in range(k)) for _ in range(n_groups)]
    for g in range(n_groups):
        for _ in range(nodes_per_group):
            node_group.append(g)
            is_sink.append(rng.random() < p_sink)
            t = rng.randint(0, k)
            n_traj.append(t)
            n_pos.append(rng.randint(0, min(t, k_pos[g])) if rng.random() < 0.6 else 0)
            n_rev.append(rng.choice([0, 0, 1, 3]))
            dist.append(rng.choice([INF, 0, 1, 2, 3, 5, 9]))
    v_real = len(node_group)
    src, dst, e_traj, e_pos = [], [], [], []
    for g in range(n_groups):
        base = g * nodes_per_group
        for _ in range(edges_per_group):
            src.append(base + rng.randrange(nodes_per_group))
            dst.append(base + rng.randrange(nodes_per_group))
            t = 4 if equal_rates else rng.randint(1, k)
            e_traj.append(t)
            e_pos.append(2 if equal_rates else rng.randint(0, t))
    e_real = len(src)
    for _ in range(pad_edges):  # padding: self-loops at node 0, invalid
        src.append(0)
        dst.append(0)
        e_traj.append(0)
        e_pos.append(0)
    node_group += [0] * pad_nodes
    is_sink += [False] * pad_nodes
    n_traj += [0] * pad_nodes
    n_pos += [0] * pad_nodes
    n_rev += [0] * pad_nodes
    dist += [INF] * pad_nodes
    return {"src": src, "dst": dst, "edge_valid": [j < e_real for j in range(len(src))],
            "node_group": node_group, "node_valid": [i < v_real for i in range(len(node_group))],
            "is_sink": is_sink, "dist": dist, "n_traj": n_traj, "n_pos": n_pos, "n_revisit": n_rev,
            "e_traj": e_traj, "e_pos": e_pos, "k_count": k_count, "k_pos": k_pos}


def _tensors(d: dict, device) -> list[torch.Tensor]:
    return [torch.tensor(d[f], dtype=torch.bool if f in BOOL_FIELDS else torch.int64, device=device)
            .reshape(len(d[f])) for f in FIELDS]


def _check(got: GraphScores, want: dict, v: int):
    for name in GraphScores._fields:
        g = getattr(got, name)
        assert g.device.type in ("cpu", "cuda")
        if name in ("is_milestone", "is_trap", "retained"):
            assert g.dtype == torch.bool and to_cpu(g).tolist() == want[name], name
        else:
            assert g.dtype == torch.float64, name
            assert g.shape == ((v, 2) if name == "seeds" else (v,)), name
            check_close(g, want[name])


CASES = {
    "random_small": lambda rng: random_graph_inputs(rng, 3, 12, 20),
    "padded": lambda rng: random_graph_inputs(rng, 4, 10, 15, pad_nodes=17, pad_edges=9),
    "one_group_dense": lambda rng: random_graph_inputs(rng, 1, 6, 80),
    "many_groups_block_plus_one": lambda rng: random_graph_inputs(rng, 41, 25, 25, pad_nodes=1, pad_edges=0),
    "edges_block_minus_one": lambda rng: random_graph_inputs(rng, 9, 30, (BLOCK - 1) // 9 + 1, pad_edges=2),
    "all_sinks": lambda rng: random_graph_inputs(rng, 2, 8, 12, p_sink=1.0),
    "no_success": lambda rng: random_graph_inputs(rng, 3, 10, 20, p_success=0.0),
    "equal_sibling_rates": lambda rng: random_graph_inputs(rng, 2, 5, 30, equal_rates=True),
    "no_edges": lambda rng: random_graph_inputs(rng, 2, 7, 0, pad_nodes=3),
    "one_node": lambda rng: random_graph_inputs(rng, 1, 1, 0),
    "self_loops_only": lambda rng: random_graph_inputs(rng, 1, 1, 5),
    "no_nodes": lambda rng: random_graph_inputs(rng, 0, 0, 0),
}


@pytest.mark.parametrize("variant", ["md", "rcs", "full"])
@pytest.mark.parametrize("pname", list(PARAMS))
@pytest.mark.parametrize("case", list(CASES))
def test_graph_scores(case, pname, variant, device):
    d = CASES[case](random.Random(len(case) * 31 + len(pname)))
    params = PARAMS[pname]
    want = reference_graph_scores(*(d[f] for f in FIELDS), params, variant)
    v = len(d["node_group"])
    args = _tensors(d, device)
    _check(graph_scores(*args, params, variant, backend="triton"), want, v)
    _check(graph_scores_torch(*(a.cpu() for a in args), params, variant), want, v)


def test_graph_scores_adversarial_milestones(device):
    """Every node a milestone candidate of equal score, and the sink an edge's only target:
    the group maxima see ties, and b / psi must stay 0 at the sink."""
    rng = random.Random(5)
    d = random_graph_inputs(rng, 2, 6, 18, p_sink=0.0, p_success=1.0)
    d["n_pos"] = list(d["n_traj"])
    d["is_sink"][3] = True
    d["dst"] = [3 if j % 3 == 0 else x for j, x in enumerate(d["dst"])]
    for variant in ("rcs", "full"):
        want = reference_graph_scores(*(d[f] for f in FIELDS), DEFAULT, variant)
        assert want["b"][3] == 0.0 and want["psi_bar"][3] == 0.0
        _check(graph_scores(*_tensors(d, device), DEFAULT, variant, backend="triton"), want, len(d["node_group"]))


def test_graph_scores_large(device):
    d = random_graph_inputs(random.Random(11), 64, 120, 150, pad_nodes=BLOCK + 3, pad_edges=77)
    want = reference_graph_scores(*(d[f] for f in FIELDS))
    _check(graph_scores(*_tensors(d, device), DEFAULT, backend="triton"), want, len(d["node_group"]))


def test_graph_scores_errors(device):
    d = random_graph_inputs(random.Random(1), 2, 5, 8)
    args = _tensors(d, device)
    with pytest.raises(ValueError, match="variant must be one of"):
        graph_scores(*args, DEFAULT, "best", backend="triton")
    with pytest.raises(TypeError, match="params must be a ScoreParams"):
        graph_scores(*args, {"w_s": 1.0}, backend="triton")
    bad = list(args)
    bad[FIELDS.index("n_pos")] = bad[FIELDS.index("n_pos")].to(torch.int32)
    with pytest.raises(ValueError, match=r"n_pos must be \(10,\) torch.int64"):
        graph_scores(*bad, DEFAULT, backend="triton")
    bad = list(args)
    bad[FIELDS.index("k_pos")] = bad[FIELDS.index("k_pos")][:1]
    with pytest.raises(ValueError, match=r"k_pos must be \(2,\)"):
        graph_scores(*bad, DEFAULT, backend="triton")
    if device == "cpu":  # on CUDA the kernels skip such ids (reading them would sync)
        for name, value, bound in (("dst", 10, 10), ("src", -1, 10), ("node_group", 2, 2)):
            bad = list(args)
            t = bad[FIELDS.index(name)].clone()
            t[1] = value
            bad[FIELDS.index(name)] = t
            for backend in ("torch", "triton"):
                with pytest.raises(ValueError, match=rf"{name}\[1\] = {value} is outside \[0, {bound}\)"):
                    graph_scores(*bad, DEFAULT, backend=backend)


def test_score_params_of_a_config():
    p = ScoreParams.of(presets.ALFWORLD)
    assert p.threshold_tol == presets.ALFWORLD.threshold_tol and p.w_pcc == presets.ALFWORLD.w_pcc


def test_graph_scores_1e5_edges(device):
    d = random_graph_inputs(random.Random(13), 100, 400, 1000, pad_nodes=5, pad_edges=11)
    assert len(d["src"]) > 100_000
    want = reference_graph_scores(*(d[f] for f in FIELDS))
    _check(graph_scores(*_tensors(d, device), DEFAULT, backend="triton"), want, len(d["node_group"]))


def test_graph_scores_strided_inputs(device):
    # views with a stride (columns of a 2-d tensor) read as their elements, not as memory
    d = random_graph_inputs(random.Random(21), 3, 9, 14)
    want = reference_graph_scores(*(d[f] for f in FIELDS))
    strided = [torch.stack([t, t], 1)[:, 0] if t.dtype == torch.int64 else t for t in _tensors(d, device)]
    assert not strided[FIELDS.index("n_traj")].is_contiguous()
    _check(graph_scores(*strided, DEFAULT, backend="triton"), want, len(d["node_group"]))
