"""The paper's reading of eqs. 5, 14 and 16 (spec section 12, points 2-5) and verl-agent's graph penalty: one
hand-computed group per switch where the switch changes a number, every backend (reference, torch, Triton
under the interpreter) equal to the hand values to 1e-9; every backend equal to the reference under each switch
alone on random batches; the presets that hold them."""

from __future__ import annotations

import math

import pytest
import torch

from milegpo.credit import SINK, StepBatch, estimate, presets
from milegpo.credit.config import PAPER_READING
from milegpo.credit.synthetic import paths_batch
from milegpo_kernels import interpreter_on

from .batches import make_batch
from .test_estimate import compare

BACKENDS = ["reference", "torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])
G = SINK
SPEC, PAPER = presets.ALFWORLD_SPEC, presets.ALFWORLD_PAPER


def by_key(result, name: str) -> dict:
    return dict(zip(result.nodes["key"].tolist(), result.nodes[name].tolist()))


def close(x):
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def only(name: str):
    """The spec's reading with one of the paper's switches on."""
    return SPEC.replace(**{name: True})


# ---------------------------------------------------------------------------------------------
# Group L: a self-loop on a success path that is its state's best incoming edge, and a group whose
# largest psi~ is the sink's. Trajectories (group 3):
#   A (won):  1 -> 2 -> 2 -> g        C (won): 1 -> g
#   B1, B2 (lost): 1 -> 2 -> 3        D1, D2, D3 (lost): 1 -> 4
# K = 7, K+ = 2, p_q+ = 2/7. p+(1) = 2/7, p+(2) = 1/3 (A of A, B1, B2), p-(2) = 2/3.
# d(., g): g 0, 1 1 (1 -> g), 2 1, 3 and 4 unreachable.
# Edges, p+ / p-: (1,2) 1/3 / 2/3; (1,g) 1 / 0; (1,4) 0 / 1; (2,2) 1 / 0; (2,g) 1 / 0; (2,3) 0 / 1.
#
# eq. 12: branches of 1: c~(1,2) = 1/3 - (1 + 0)/2 = -1/6, c~(1,g) = 1 - (1/3 + 0)/2 = 5/6, c~(1,4) = -2/3;
#   branches of 2: c~(2,2) = 1 - (1 + 0)/2 = 1/2, c~(2,g) = 1/2, c~(2,3) = 0 - 1 = -1. max |c~| = 1, c = c~.
# eq. 14: b(2) over its incoming edges with c > 0: (1,2) has -1/6; the self-loop (2,2) has 1/2.
#   spec: b(2) = 0; paper (evidence_self_loops): b(2) = 1/2.
# eq. 15: psi(1,2) = dd 0 + (1/3 - 2/7) - l-, l- = max(2/3 - (0 + 1)/2, 0) = 1/6: psi = 1/21 - 1/6 < 0;
#   psi(2,2) = 0 + 1/21 - max(0 - (0 + 1)/2, 0) = 1/21 > 0, |T+| = 1;
#   psi(1,g) = 1 + (1 - 2/7) - 0 = 12/7; psi(2,g) = 1 + 5/7 - 0 = 12/7.
# eq. 16: psi~(2): spec 0 (its only positive incoming edge is its loop); paper 1/21. psi~(g) = 12/7.
#   psi-bar(2): spec 0 (max over nodes other than g: 0); evidence_self_loops alone 1 (max 1/21);
#   paper (with the sink in the max): (1/21) / (12/7) = 1/36. psi-bar(g): 1 with progress_max_with_sink, else 0.
# eq. 5: deg without self-loops: 1: out {2, g, 4} = 3; 2: in {1} + out {g, 3} = 3; g: in {1, 2} = 2.
#   With self-loops: 2: in {1, 2} + out {2, g, 3} = 5. C(1) = 3/3 = 1 (spec), 3/5 (self-loops counted).
#   l+(1) = 0, m(1) = 1: S0+(1) = 1 + 0.25 C(1): 1.25 (spec), 1.15 (paper).
#   l+(2) = 1/21, m(2) = 1/2, C(2) = 1: S0+(2) = 1/21 + 1/2 + 1/4 = 67/84 (both).
# eqs. 17-18 (ALFWorld: theta_m 1.1, kappa_bc 0, rho 0): z(1) = 0 (psi-bar 0, m = 1 < 1.1): S_pcc(1) = 0;
#   z(2) = [psi-bar(2) > 0]: spec 0 -> S_pcc(2) = 0; evidence_self_loops alone: E = 1/2 + 1 = 3/2,
#   S_pcc(2) = 67/84 * 5/2 = 335/168; paper: E = 1/2 + 1/36 = 19/36, S_pcc(2) = 67/84 * 55/36 = 3685/3024.
# ---------------------------------------------------------------------------------------------
L_PATHS = [(3, [1, 2, 2, G]), (3, [1, G]), (3, [1, 2, 3]), (3, [1, 2, 3]), (3, [1, 4]), (3, [1, 4]), (3, [1, 4])]

L_HAND = {  # config name -> {node value: {key: value}}
    "spec": {"b": {2: 0.0}, "psi_bar": {2: 0.0, G: 0.0}, "retained": {1: False, 2: False},
             "s0_pos": {1: 1.25, 2: 67 / 84}, "s_pcc": {1: 0.0, 2: 0.0}},
    "degree_self_loops": {"s0_pos": {1: 1.15, 2: 67 / 84}, "b": {2: 0.0}, "psi_bar": {2: 0.0}},
    "evidence_self_loops": {"b": {2: 0.5}, "psi_bar": {2: 1.0, G: 0.0}, "retained": {1: False, 2: True},
                            "s0_pos": {1: 1.25}, "s_pcc": {1: 0.0, 2: 335 / 168}},
    "progress_max_with_sink": {"b": {2: 0.0}, "psi_bar": {2: 0.0, G: 1.0}, "retained": {2: False}},
    "paper": {"b": {2: 0.5}, "psi_bar": {2: 1 / 36, G: 1.0}, "retained": {1: False, 2: True},
              "s0_pos": {1: 1.15, 2: 67 / 84}, "s_pcc": {1: 0.0, 2: 3685 / 3024}},
}


def reading(name: str):
    return {"spec": SPEC, "paper": PAPER}.get(name) or only(name)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(L_HAND))
def test_self_loop_and_sink_progress_by_hand(backend, name):
    batch = paths_batch(L_PATHS, shuffle_seed=5)
    got = estimate(batch, "milegpo", reading(name), "full", backend=backend)
    for value, want in L_HAND[name].items():
        have = by_key(got, value)
        for key, x in want.items():
            if isinstance(x, bool):
                assert bool(have[key]) is x, (name, value, key)
            else:
                assert have[key] == close(x), (name, value, key)
    # the advantages move with the reading: spec has no milestone potential here, the paper's has node 2's
    spec = estimate(batch, "milegpo", SPEC, "full", backend=backend)
    if name in ("paper", "evidence_self_loops"):
        assert by_key(got, "phi_pos")[2] == close(1.0) and by_key(spec, "phi_pos")[2] == 0.0
        assert (got.advantages - spec.advantages).abs().max().item() > 1e-3


# ---------------------------------------------------------------------------------------------
# Group T: the sink has the largest degree among the success-visited states (degree_max_with_sink).
# Four won trajectories (group 0) of a binary tree, every leaf one step from g:
#   1 -> 2 -> 4 -> g,  1 -> 2 -> 5 -> g,  1 -> 3 -> 6 -> g,  1 -> 3 -> 7 -> g
# deg: 1 out {2, 3} = 2; 2, 3: in 1 + out 2 = 3; 4-7: in 1 + out 1 = 2; g: in {4, 5, 6, 7} = 4 (no self-loops).
# K = K+ = 4, p_q+ = 1: every lift is 0. m: 1 -> 1, 2/3 -> 1/2, 4-7 -> 1/4.
# spec (g not in the max, 3): C = 2/3, 1, 2/3: S0+ = m + 0.25 C = 7/6, 3/4, 1/4 + 1/6 = 5/12.
# paper (g in the max, 4): C = 1/2, 3/4, 1/2: S0+ = 9/8, 11/16, 3/8.
# ---------------------------------------------------------------------------------------------
T_PATHS = [(0, [1, 2, 4, G]), (0, [1, 2, 5, G]), (0, [1, 3, 6, G]), (0, [1, 3, 7, G])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sink_in_the_centrality_normaliser_by_hand(backend):
    batch = paths_batch(T_PATHS, shuffle_seed=1)
    spec = by_key(estimate(batch, "milegpo", SPEC, "rcs", backend=backend), "s0_pos")
    paper = by_key(estimate(batch, "milegpo", PAPER, "rcs", backend=backend), "s0_pos")
    alone = by_key(estimate(batch, "milegpo", only("degree_max_with_sink"), "rcs", backend=backend), "s0_pos")
    assert [spec[k] for k in (1, 2, 3, 4, 7, G)] == close([7 / 6, 3 / 4, 3 / 4, 5 / 12, 5 / 12, 0.0])
    assert [paper[k] for k in (1, 2, 3, 4, 7, G)] == close([9 / 8, 11 / 16, 11 / 16, 3 / 8, 3 / 8, 0.0])
    assert alone == paper  # no self-loop here: the sink alone makes the difference


# ---------------------------------------------------------------------------------------------
# graph_penalty="return" (verl-agent's GraphGPO trainer), GRAPHGPO_REFERENCE (gamma_G 0.1, max + 1).
# Group 0: A (won): 1 -> 1 (invalid) -> 2 -> g;  B (lost): 1 -> 3 (invalid).
#   d: g 0, 2 1, 1 2; 3 cannot reach g: the largest finite d is 2, so 3 is at 3.
#   r^G: A: 10 * 0.1^2 - 0.1 = 0 (the invalid self-loop), 10 * 0.1 = 1, 10; B: 10 * 0.1^3 - 0.1 = -0.09.
# Group 1, all-fail: F1: 5 -> 6;  F2: 5 -> 7 (invalid). Every node at d = 0 + 1: r^G = 10 * 0.1 = 1 and
#   1 - 0.1 = 0.9, so A^G = +-0.05 / (sqrt(0.005) + 1e-6) (without the penalty: 1 and 1, A^G = 0).
# ---------------------------------------------------------------------------------------------
def sample_norm(x: float, values: list[float]) -> float:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return (x - mean) / (std + 1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_invalid_step_on_a_graphgpo_path_by_hand(backend):
    batch = paths_batch([(0, [1, 1, 2, G]), (0, [1, 3]), (1, [5, 6]), (1, [5, 7])], invalid={0: [0], 1: [0], 3: [0]})
    got = estimate(batch, "graphgpo", presets.GRAPHGPO_REFERENCE, backend=backend)
    assert got.rows["r_graph"].tolist() == close([0.0, 1.0, 10.0, -0.09, 1.0, 0.9])
    at_1 = [0.0, 1.0, -0.09]
    a_graph = [sample_norm(0.0, at_1), sample_norm(1.0, at_1), 0.0, sample_norm(-0.09, at_1),
               sample_norm(1.0, [1.0, 0.9]), sample_norm(0.9, [1.0, 0.9])]
    assert a_graph[4] == pytest.approx(0.7071, abs=1e-4)
    assert got.rows["a_graph"].tolist() == close(a_graph)
    z = [9.9, 10.0, 10.0, -0.1]  # the row episode score (group 0), standardised over its 4 rows
    episode = [sample_norm(x, z) for x in z] + [sample_norm(x, [0.0, -0.1]) for x in (0.0, -0.1)]
    assert got.advantages.tolist() == close([e + a for e, a in zip(episode, a_graph)])
    # without the penalty the invalid self-loop keeps 0.1 and the all-fail group is tied
    plain = estimate(batch, "graphgpo", presets.GRAPHGPO_REFERENCE.replace(graph_penalty="none"),
                     backend=backend)
    assert plain.rows["r_graph"].tolist() == close([0.1, 1.0, 10.0, 0.01, 1.0, 1.0])
    assert plain.rows["a_graph"][4:].tolist() == [0.0, 0.0]
    # the spec's "zero": an all-fail group has r^G = 0 (the penalty still moves the invalid row)
    spec = estimate(batch, "graphgpo", SPEC.replace(gamma_g=0.1, graph_penalty="return"),
                    backend=backend)
    assert spec.rows["r_graph"].tolist() == close([0.0, 1.0, 10.0, -0.1, 0.0, -0.1])
    assert spec.rows["a_graph"][4:].tolist() == close(a_graph[4:])


# ---------------------------------------------------------------------------------------------
# every backend against the reference under each switch alone and under each preset
# ---------------------------------------------------------------------------------------------
def switch_configs() -> dict:
    out = {f"only {name}": only(name) for name in PAPER_READING}
    out["graph penalty"] = SPEC.replace(graph_penalty="return")
    out["graph penalty, max + 1"] = PAPER.replace(graph_penalty="return", graph_unreachable="max_plus_one")
    # presets, each run by graphgpo and milegpo (graphgpo reads none of the four switches)
    return {**{name: config.as_preset() for name, config in out.items()},
            **{name: presets.get_preset(name) for name in presets.PRESETS}}


SWITCH_BATCHES = [dict(n_groups=3, k=5, horizon=10, n_states=3, p_self=0.6, p_invalid=0.3),
                  dict(n_groups=2, k=6, horizon=6, mode="all_fail", p_invalid=0.4),
                  dict(n_groups=4, k=3, horizon=8, n_states=5, p_self=0.4)]


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "reference"])
def test_every_backend_matches_the_reference_under_each_switch(backend):
    configs = switch_configs()
    cases = [("graphgpo", "full"), ("milegpo", "md"), ("milegpo", "rcs"), ("milegpo", "full")]
    if backend == "triton":  # the interpreter is slow: the switches' code paths, once each
        configs = {k: configs[k] for k in [f"only {n}" for n in PAPER_READING] + ["graph penalty, max + 1",
                                                                                  "alfworld_spec", "webshop_paper"]}
        cases = [("graphgpo", "full"), ("milegpo", "full")]
        compare(make_batch(11, **SWITCH_BATCHES[0]), backend=backend, cases=cases, presets_=configs,
                static_shapes=True)
        return
    for seed, kw in enumerate(SWITCH_BATCHES):
        for static in (False, True):
            compare(make_batch(20 + seed, **kw), backend=backend, cases=cases, presets_=configs, static_shapes=static)


def test_each_switch_changes_numbers_on_random_batches():
    # the test can fail: each switch alone moves some milegpo advantage on these batches
    # (the sink's centrality matters in rcs, where S0+ seeds Phi+; the rest in full)
    batches = [make_batch(30 + s, n_groups=4, k=6, horizon=10, n_states=6, p_self=0.2) for s in range(4)]
    for name in PAPER_READING:
        moved = max((estimate(b, "milegpo", only(name), variant, backend="reference").advantages
                     - estimate(b, "milegpo", SPEC, variant, backend="reference").advantages).abs().max().item()
                    for b in batches for variant in ("rcs", "full"))
        assert moved > 1e-4, name
    # and none of them touches a baseline
    for b in batches[:1]:
        for method in ("grpo", "gigpo", "graphgpo"):
            assert torch.equal(estimate(b, method, PAPER, backend="reference").advantages,
                               estimate(b, method, SPEC, backend="reference").advantages), method


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs a GPU or TRITON_INTERPRET=1")
@pytest.mark.parametrize("preset", ["alfworld_paper", "graphgpo_reference"])
def test_gpu_layout_reads_nothing_on_the_host_under_the_new_switches(preset):
    from milegpo.credit.vectorized import credit_tables
    from milegpo_kernels.inputs import host_checks
    from milegpo_kernels.testing import no_host_reads

    batch = make_batch(3, **SWITCH_BATCHES[0])
    config = presets.get_preset(preset)
    method = "milegpo"
    with host_checks(False), no_host_reads(method):  # raises naming the host reads
        tables = credit_tables(batch, method, config, "full", "triton", static_shapes=True)
        adv = tables.result(batch, method, config, "full", "triton").advantages
    torch.testing.assert_close(adv, estimate(batch, method, config, backend="reference").advantages,
                               rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# the presets
# ---------------------------------------------------------------------------------------------
def test_the_defaults_are_the_paper_s_reading():
    from milegpo.credit import CreditConfig

    assert presets.ALFWORLD == presets.ALFWORLD_PAPER == CreditConfig()
    assert presets.WEBSHOP == presets.WEBSHOP_PAPER
    for paper, spec in ((presets.ALFWORLD_PAPER, presets.ALFWORLD_SPEC), (presets.WEBSHOP_PAPER, presets.WEBSHOP_SPEC)):
        assert all(getattr(paper, n) for n in PAPER_READING) and not any(getattr(spec, n) for n in PAPER_READING)
        assert paper.replace(**{n: False for n in PAPER_READING}) == spec  # nothing else differs
    # table 5's WebShop column
    web = presets.WEBSHOP_PAPER
    assert (web.theta_m, web.kappa_bc, web.rho, web.eta, web.norm) == (0.5, 1, 0.5, 1.0, "mean")
    # the trainer's and the CLI's default preset is the paper's
    from milegpo.cli import PRESET_NAMES
    from milegpo.trainer.config import MileGPOConfig

    assert presets.get_preset(MileGPOConfig.credit_preset) == presets.ALFWORLD_PAPER
    assert set(PRESET_NAMES) == set(presets.PRESETS)
    import inspect

    assert inspect.signature(estimate).parameters["config"].default == presets.ALFWORLD_PAPER


def test_the_verl_agent_presets():
    ref = presets.GIGPO_REFERENCE
    assert ref == presets.ALFWORLD_PAPER.replace(step_penalty="return")
    assert presets.GIGPO_REFERENCE_WEBSHOP.norm == "mean" and presets.GIGPO_REFERENCE_WEBSHOP.step_penalty == "return"
    for graph, gamma_g in ((presets.GRAPHGPO_REFERENCE, 0.1), (presets.GRAPHGPO_REFERENCE_WEBSHOP, 0.2)):
        assert (graph.gamma_g, graph.graph_unreachable, graph.graph_penalty, graph.norm) == (
            gamma_g, "max_plus_one", "return", "mean_std")
        assert (graph.episode_penalty, graph.episode_norm_over, graph.episode_single_value, graph.c) == (
            "row", "rows", "unit", 10.0)
    for name in ("GIGPO_REFERENCE", "GIGPO_REFERENCE_WEBSHOP", "GRAPHGPO_REFERENCE", "GRAPHGPO_REFERENCE_WEBSHOP",
                 "ALFWORLD_PAPER", "WEBSHOP_PAPER", "ALFWORLD_SPEC", "WEBSHOP_SPEC", "GRAPHGPO_REPRODUCTION"):
        assert presets.get_preset(name) is getattr(presets, name)  # every preset by its name, any case


def test_graph_penalty_config_is_a_bool():
    from milegpo.credit import CreditConfig

    with pytest.raises(ValueError, match=r"graph_penalty must be one of \('none', 'return'\), got 'reward'"):
        CreditConfig(graph_penalty="reward")
    with pytest.raises(TypeError, match="degree_self_loops must be a bool"):
        CreditConfig(degree_self_loops="yes")
    assert StepBatch  # the module's imports are used
