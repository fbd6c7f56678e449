"""experiments/credit_testbed.py: a smoke run of the learning testbed (every output written, runs paired)."""

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("scipy")

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "credit_testbed.py"


def _module():
    """The script's functions (its ``__main__`` block does not run)."""
    return SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="credit_testbed"))


def test_smoke_run_writes_the_table_the_curves_and_paired_tests(tmp_path):
    mod = _module()
    args = ["--out", str(tmp_path), "--seeds", "0", "1", "--methods", "grpo", "gigpo", "graphgpo", "milegpo-full",
            "--tasks", "4", "--groups", "2", "--group-size", "3", "--iterations", "3", "--horizon", "12",
            "--eval-episodes", "1"]
    assert mod.main(args) == 0
    saved = json.loads((tmp_path / "results.json").read_text())
    records = saved["records"]
    assert len(records) == 8 and {r["method"] for r in records} == {"grpo", "gigpo", "graphgpo", "milegpo-full"}
    for r in records:
        assert len(r["curve"]) == 3 and 0.0 <= r["final"]["success"] <= 1.0 and r["states"] > 0
    # seeds pair the methods: the first iteration is played before any update, so it is the same for all
    for seed in (0, 1):
        firsts = {json.dumps(r["curve"][0]) for r in records if r["seed"] == seed}
        assert len(firsts) == 1
    text = (tmp_path / "table.md").read_text()
    assert "| milegpo-full - graphgpo |" in text and "| gigpo - grpo |" in text and "2 seeds (0-1)" in text
    assert (tmp_path / "curves.png").stat().st_size > 1000
    # --table-only rewrites the table from results.json
    (tmp_path / "table.md").unlink()
    assert mod.main(["--out", str(tmp_path), "--table-only"]) == 0 and (tmp_path / "table.md").exists()


def test_the_tabular_policy_step_is_the_policy_gradient():
    import numpy as np

    mod = _module()
    policy = mod.TabularPolicy(prior=1.0, invalid_logit=0.0, rng=np.random.default_rng(0))
    actions, logits = policy.entry(("g", "o", ("a", "b")), ["a", "b"], "b")
    assert actions == ["a", "b", mod.INVALID_ACTION] and logits.tolist() == [0.0, 1.0, 0.0]
    p = policy.probs(logits.copy())
    policy.update([(("g", "o", ("a", "b")), 0)], np.array([2.0]), lr=0.5)
    assert policy.table[("g", "o", ("a", "b"))][1] == pytest.approx([0.0, 1.0, 0.0] + 0.5 * 2.0 * (np.eye(3)[0] - p))


def test_smoke_run_on_webshop(tmp_path, private_webshop_cache):
    mod = _module()
    args = ["--env", "webshop", "--out", str(tmp_path), "--seeds", "0", "--methods", "grpo", "milegpo-full",
            "--tasks", "3", "--groups", "2", "--group-size", "2", "--iterations", "2", "--horizon", "10",
            "--eval-episodes", "1"]
    assert mod.main(args) == 0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert (saved["settings"]["preset"], saved["settings"]["lr"]) == ("webshop", 0.05)
    for r in saved["records"]:
        assert r["env"] == "webshop" and len(r["curve"]) == 2 and 0.0 <= r["final"]["score"] <= 100.0
    assert len({json.dumps(r["curve"][0]) for r in saved["records"]}) == 1
    assert "WebShop testbed" in (tmp_path / "table.md").read_text()


def test_overrides_and_the_purchase_rows_credit(tmp_path, private_webshop_cache):
    """``--overrides`` reaches the credit (a halved step term changes GraphGPO's advantages, not the rollout of the
    first iteration); every record keeps its purchase rows' credit; a bad override is a one-line usage error."""
    mod = _module()
    args = ["--env", "webshop", "--seeds", "0", "--methods", "graphgpo", "--tasks", "3", "--groups", "2",
            "--group-size", "4", "--iterations", "3", "--horizon", "10", "--eval-episodes", "1"]
    runs = {}
    for name, extra in (("default", []), ("half", ["--overrides", '{"w_step": 0.5}'])):
        assert mod.main(args + ["--out", str(tmp_path / name), *extra]) == 0
        runs[name] = json.loads((tmp_path / name / "results.json").read_text())
    assert runs["half"]["settings"]["overrides"] == {"w_step": 0.5} and runs["default"]["settings"]["overrides"] == {}
    default, half = (runs[k]["records"][0] for k in ("default", "half"))
    assert default["curve"][0] == half["curve"][0]  # the same first rollout
    p = default["purchases"]
    assert p["won_n"] + p["lost_n"] > 0 and set(p) == {"won_n", "won_mean", "lost_n", "lost_mean", "lost_positive_share"}
    assert p["won_n"] and half["purchases"]["won_n"]  # these seeds win: the comparison below holds something
    assert p["won_mean"] != half["purchases"]["won_mean"]
    assert "The credit of the purchase rows" in (tmp_path / "default" / "table.md").read_text()
    with pytest.raises(SystemExit) as info:
        mod.main(args + ["--out", str(tmp_path / "bad"), "--overrides", '{"nope": 1}'])
    assert info.value.code == 2


def test_the_tabular_policy_searches_what_the_shopping_expert_types(private_webshop_cache):
    """WebShop's search box (``search[<your query>]``) is one action of the table: the expert's query."""
    import numpy as np

    from milegpo.evidence.quality import quality_tasks
    from milegpo.envs import make_env
    from milegpo.envs.webshop.expert import search_query

    mod = _module()
    task = quality_tasks("webshop", "train", 1, 0, 5)[0]
    env = make_env("webshop")
    obs, admissible, info = env.reset(task)
    policy, record = mod.TabularPolicy(prior=50.0, invalid_logit=0.0, rng=np.random.default_rng(0)), []
    action = policy.chooser(env, info["goal"], record)(obs, admissible, 0)
    query = f"search[{search_query(info['goal'])}]"
    assert action == query and policy.table[record[0][0]][0] == [query, mod.INVALID_ACTION]


def test_combine_joins_runs_of_one_configuration_and_refuses_the_rest(tmp_path, capsys):
    """--combine: chunks of methods / seeds of one configuration become one table; a (method, seed) twice or
    different settings end in one line (exit 2)."""
    mod = _module()
    small = ["--tasks", "4", "--groups", "2", "--group-size", "2", "--iterations", "2", "--horizon", "8",
             "--eval-episodes", "1"]
    a, b, c, other = (tmp_path / n for n in ("a", "b", "c", "other"))
    assert mod.main(["--out", str(a), "--seeds", "0", "--methods", "grpo", "graphgpo", *small]) == 0
    assert mod.main(["--out", str(b), "--seeds", "1", "--methods", "grpo", "graphgpo", *small]) == 0
    assert mod.main(["--out", str(other), "--seeds", "2", "--methods", "grpo", *small,
                     "--state-anchor", "observation"]) == 0
    assert mod.main(["--out", str(c), "--combine", str(a), str(b)]) == 0
    saved = json.loads((c / "results.json").read_text())
    assert sorted((r["method"], r["seed"]) for r in saved["records"]) == [
        ("graphgpo", 0), ("graphgpo", 1), ("grpo", 0), ("grpo", 1)]
    assert "| graphgpo - grpo |" in (c / "table.md").read_text() and str(a) in (c / "table.md").read_text()
    # a credit field that none of a folder's methods reads may differ (BEACON's w beside GRPO / GraphGPO runs);
    # one that a method of both reads may not
    beacon, gamma = tmp_path / "beacon", tmp_path / "gamma"
    assert mod.main(["--out", str(beacon), "--seeds", "0", "--methods", "beacon", *small,
                     "--overrides", '{"beacon_weight": 1.0}']) == 0
    assert mod.main(["--out", str(gamma), "--seeds", "3", "--methods", "graphgpo", *small,
                     "--overrides", '{"gamma_g": 0.5}']) == 0
    assert mod.main(["--out", str(tmp_path / "ab"), "--combine", str(a), str(beacon)]) == 0
    assert {r["method"] for r in json.loads((tmp_path / "ab" / "results.json").read_text())["records"]} == {
        "grpo", "graphgpo", "beacon"}
    capsys.readouterr()
    for folders, words in (([a, a], "grpo seed 0 is also in"), ([a, other], "state_anchor ('observation' vs "),
                           ([a, tmp_path / "none"], "no results.json there"),
                           ([a, gamma], "in the credit field gamma_g (0.5 vs 0.2")):
        with pytest.raises(SystemExit) as e:
            mod.main(["--out", str(tmp_path / "x"), "--combine", *map(str, folders)])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and words in err[-1], err


def test_settings_before_anchors_compare_as_todays():
    mod = _module()
    old = {"tasks": 32, "state": "obs"}
    assert mod.comparable_settings(old) == {"tasks": 32, "state_anchor": "observation", "policy_sees": "observation",
                                            "overrides": {}}


def test_anchor_matrix_pairs_configurations_by_seed(tmp_path, capsys):
    """experiments/anchor_matrix.py: a column per (anchor, policy input), the anchor's effect paired over seeds;
    folders whose other settings differ are refused in one line."""
    mod = _module()
    matrix = SimpleNamespace(**runpy.run_path(str(SCRIPT.parent / "anchor_matrix.py"), run_name="anchor_matrix"))
    small = ["--seeds", "0", "1", "--methods", "grpo", "graphgpo", "--tasks", "4", "--groups", "2", "--group-size",
             "2", "--iterations", "2", "--horizon", "8", "--eval-episodes", "1"]
    obs, tracked, longer = tmp_path / "obs", tmp_path / "tracked", tmp_path / "longer"
    assert mod.main(["--out", str(obs), "--state-anchor", "observation", *small]) == 0
    assert mod.main(["--out", str(tracked), *small]) == 0
    assert mod.main(["--out", str(longer), "--state-anchor", "observation", *small[:-2], "--eval-episodes", "2"]) == 0
    capsys.readouterr()
    assert matrix.main([str(obs), str(tracked)]) == 0
    out = capsys.readouterr().out
    assert "| method | observation, policy sees observation | tracked+actions, policy sees observation |" in out
    assert "| graphgpo - grpo |" in out and "tracked+actions - observation keys (policy sees observation)" in out
    # GRPO reads no state key: the anchor changes nothing of its runs, paired difference exactly 0 over 2 seeds
    assert "| grpo | +0.0 [+0.0, +0.0] (p 1.000, 2) |" in out
    assert matrix.main([str(obs), str(longer)]) == 2
    assert "eval_episodes (2 vs 1)" in capsys.readouterr().err
