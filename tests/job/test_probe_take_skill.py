"""scripts/probe_take_skill.py: the kinds of step it counts, the corrections it makes, the action distribution it
reads, the three probes end to end."""

import math
from pathlib import Path

import pytest
import torch

from milegpo.job import TINY_DEFAULTS

from ..test_recipes import load_module

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "probe_take_skill.py"


def _probe():
    return load_module(SCRIPT)


def test_step_kinds_and_corrections_on_real_rooms():
    """A take where the goal's object is absent, right or wrong where it is; the wrong object in hand marks every
    next step and the `recover` correction puts it back (the searching expert's move), `take` leaves it."""
    from milegpo.envs import HouseholdEnv
    from milegpo.job.policy import easy_tasks

    mod = _probe()
    seen = set()
    for task in easy_tasks("id", 40, max_receptacles=4):
        env = HouseholdEnv()
        _, adm, _ = env.reset(task)
        target = env.game.target_type
        for go in [a for a in adm if a.startswith("go to ")]:
            assert mod.step_kind(env, go, adm) == "go" and mod.corrected(env, go, "both") == go
            _, _, _, _, info = env.step(go)
            adm = info["admissible_actions"]
            takes = [a for a in adm if a.startswith("take ")]
            right = [a for a in takes if a.split()[1] == target]
            wrong = [a for a in takes if a.split()[1] != target]
            if right:
                assert mod.step_kind(env, right[0], adm) == "take:right"
                assert mod.corrected(env, right[0], "take") == right[0]
                seen.add("right")
            if wrong:
                assert mod.step_kind(env, wrong[0], adm) == ("take:wrong" if right else "take:absent")
                assert mod.corrected(env, wrong[0], "none") == wrong[0]
                assert mod.corrected(env, wrong[0], "take") == env.search_action() != wrong[0]
                seen.add("wrong" if right else "absent")
                if "held" not in seen:  # once: take it, and see the next steps marked and corrected
                    _, _, _, _, info = env.step(wrong[0])
                    adm = info["admissible_actions"]
                    use = next((a for a in adm if a.startswith("use ")), adm[0])
                    assert mod.holding_wrong(env) and mod.step_kind(env, use, adm).endswith(":holding_wrong")
                    assert mod.corrected(env, use, "take") == use
                    assert mod.corrected(env, use, "recover").startswith("move " + wrong[0].split(" from ")[0][5:])
                    seen.add("held")
                    break
    assert seen == {"right", "wrong", "absent", "held"}
    with pytest.raises(ValueError, match="fix must be one of"):
        mod.corrected(HouseholdEnv(), "look", "all")


def test_both_probes_run_on_an_untrained_policy(tmp_path, capsys):
    mod = _probe()
    _untrained_policy(tmp_path)
    threads = torch.get_num_threads()
    try:
        res = mod.main(["credit", "--policy", str(tmp_path), "--tasks", "4", "--episodes", "2"])
        rooms = mod.main(["headroom", "--policy", str(tmp_path), "--games", "2", "--fixes", "none", "both"])
    finally:
        torch.set_num_threads(threads)
    assert sum(k["rows"] for k in res["kinds"].values()) == res["rows"] > 0 and 0 <= res["success"] <= 100
    for kind in res["kinds"].values():
        assert set(kind) == {"rows", "milegpo (the job's)", "grpo", "gigpo", "graphgpo"}
    assert [(r["fix"], r["games"]) for r in rooms] == [("none", 2), ("both", 2)]
    assert capsys.readouterr().out.count('"id_success"') == 2


def _untrained_policy(path):
    from milegpo.job.policy import make_model, make_tokenizer

    tok = make_tokenizer(n_tasks=4, max_receptacles=4)
    model = make_model(tok, hidden=32, layers=1, seed=0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return tok, model.eval()


def test_action_distribution_is_the_constrained_samplers(tmp_path):
    """Each admissible action's probability equals the one the job's constraint (ActionConstraint, as
    ``--constrain_actions`` samples) gives it, token by token after the shared thought, computed here apart (one
    completion at a time, the allowed tokens asked of the constraint); the probabilities sum to 1."""
    from milegpo.envs import HouseholdEnv
    from milegpo.job.arguments import TINY_DEFAULTS
    from milegpo.job.policy import completion_text, easy_tasks
    from milegpo.rollout import render_prompt
    from milegpo.trainer.constrained import allowed_tokens_fn

    mod = _probe()
    tok, model = _untrained_policy(tmp_path)
    env = HouseholdEnv()
    obs, adm, info = env.reset(easy_tasks("id", 1, max_receptacles=4)[0])
    goal, checked, takes = info["goal"], 0, 0
    for _ in range(3):  # the first room, then receptacles (with takes among their actions)
        takes += any(a.startswith("take ") for a in adm)
        prompt = render_prompt(goal, obs, adm, [], 0, 2, "compact", info.get("state_context", ""))
        p = mod.action_distribution(tok, model, prompt, adm)
        assert len(p) == len(adm) and abs(sum(p) - 1) < 1e-9 and min(p) > 0
        prompt_ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                             return_dict=True)["input_ids"]
        seqs = [tok(completion_text(a), add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for a in adm]
        shared = next(j for j in range(min(map(len, seqs))) if len({s[j] for s in seqs}) > 1)
        for action, seq, prob in zip(adm, seqs, p):
            constraint = allowed_tokens_fn(tok, [tok.eos_token_id], [adm], TINY_DEFAULTS["max_completion_length"])
            ids = torch.tensor([prompt_ids + seq])
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
            total = 0.0
            for j in range(len(seq)):
                allowed = constraint(0, ids[0, :len(prompt_ids) + j])
                if j >= shared:
                    assert seq[j] in allowed, (action, j)
                    row = logp[len(prompt_ids) + j - 1]
                    total += float(row[seq[j]] - torch.logsumexp(row[allowed], 0))
            assert abs(math.exp(total) - prob) < 1e-9, action
            checked += 1
        go = next(a for a in adm if a.startswith("go to "))
        obs, _, _, _, info = env.step(go)
        adm = info["admissible_actions"]
    assert checked >= 10 and takes >= 1


def test_sequence_distribution_is_the_sequence_samplers(tmp_path):
    """``normalise="sequence"``: each admissible action's probability is the softmax of the scores the job's
    ``--constrained_sampling sequence`` draws by (SequenceScorer after the prompt and the thought, each action's
    tokens as the constraint spells them), at temperatures 1 and 0.4."""
    from milegpo.envs import HouseholdEnv
    from milegpo.job.policy import easy_tasks
    from milegpo.rollout import render_prompt
    from milegpo.trainer.constrained import SequenceScorer, Vocabulary

    mod = _probe()
    tok, model = _untrained_policy(tmp_path)
    vocabulary = Vocabulary(tok, [tok.eos_token_id])
    env = HouseholdEnv()
    obs, adm, info = env.reset(easy_tasks("id", 1, max_receptacles=4)[0])
    prompt = render_prompt(info["goal"], obs, adm, [], 0, 2, "compact", info.get("state_context", ""))
    prompt_ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                         return_dict=True)["input_ids"]
    thought = tok("<think> i act </think> <action>", add_special_tokens=False)["input_ids"]
    for temperature in (1.0, 0.4):
        p = mod.action_distribution(tok, model, prompt, adm, "sequence", temperature)
        scores = SequenceScorer(model, temperature)(prompt_ids + thought, [vocabulary.action_ids(a) for a in adm],
                                                    vocabulary.eos)
        want = torch.softmax(scores.double(), 0).tolist()
        assert abs(sum(p) - 1) < 1e-9 and max(abs(x - y) for x, y in zip(p, want)) < 1e-5, (p, want)
        assert p != mod.action_distribution(tok, model, prompt, adm, "token", temperature)


def test_decide_runs_on_an_untrained_policy(tmp_path):
    mod = _probe()
    _untrained_policy(tmp_path)
    threads = torch.get_num_threads()
    try:
        res = mod.main(["decide", "--policy", str(tmp_path), "--games", "6"])
        ood = mod.main(["decide", "--policy", str(tmp_path), "--games", "12", "--split", "ood"])
    finally:
        torch.set_num_threads(threads)
    assert res["games"] == 6 and 0 <= res["success"] <= 100
    assert set(mod.DECISIONS) <= set(res) and sum(res[k]["states"] for k in mod.DECISIONS) > 0
    for kind in mod.DECISIONS:
        if res[kind]["states"]:
            assert 0 <= res[kind]["mean"] <= 1 and 0 <= res[kind]["above_0.9"] <= 1
    # by the goal's object type: the ID split's are all training types; the parts add up to the whole
    assert res["success_seen_type"]["games"] == 6 and res["success_unseen_type"] == {"games": 0, "success": None}
    assert res["present_p_right_seen_type"]["states"] == res["present_p_right"]["states"]
    assert res["present_p_take_unseen_type"] == {"states": 0}
    parts = ood["success_seen_type"], ood["success_unseen_type"]
    assert sum(p["games"] for p in parts) == 12 and all(p["games"] for p in parts), parts
    assert math.isclose(sum(p["games"] * (p["success"] or 0) for p in parts) / 12, ood["success"], abs_tol=0.1)
    assert sum(ood[f"present_p_right_{t}"]["states"] for t in ("seen_type", "unseen_type")) \
        == ood["present_p_right"]["states"]
    # every lost game is counted once where it stopped: a task type and one of its subgoals (or none)
    from milegpo.envs.household.subgoals import SUBGOALS
    for r in (res, ood):
        stops = r["lost_games_furthest_subgoal"]
        assert sum(stops.values()) == round(r["games"] * (1 - r["success"] / 100)), (r["success"], stops)
        for key in stops:
            ttype, reached = key.split(": ")
            assert reached in ("none",) + SUBGOALS[ttype][:-1], key


def test_fit_runs_on_an_untrained_policy(tmp_path):
    """Both state sets, split by where the goal's object is and whether the lamp is in view: the counts are the
    recording's states with a take admissible and nothing in hand, and the parts add up to the whole."""
    from milegpo.job.policy import easy_tasks, expert_steps

    mod = _probe()
    _untrained_policy(tmp_path)
    threads = torch.get_num_threads()
    try:
        res = mod.main(["fit", "--policy", str(tmp_path), "--sft_tasks", "3", "--games", "3", "--seed", "2"])
    finally:
        torch.set_num_threads(threads)
    start = TINY_DEFAULTS["num_train_tasks"]  # the warm start's games follow the RL's (no settings saved here)
    expected = {"sft": (easy_tasks("train", 3, start=start, max_receptacles=4), 2),
                "held_out": (easy_tasks("id", 3, max_receptacles=4), 3)}
    for name in mod.FIT_SETS:
        tasks, seed = expected[name]
        n = sum(1 for env, _, _, adm in expert_steps(tasks, 2, 0.2, seed, "search", "compact")
                if not env.s.holding and any(a.startswith("take ") for a in adm))
        cell = res[name]
        assert sum(cell[w]["states"] for w in ("absent", "present") if w in cell) == n > 0
        for where in ("absent", "present"):
            if where in cell:
                parts = [cell[k] for k in (f"{where}:lamp", f"{where}:no_lamp") if k in cell]
                assert sum(c["states"] for c in parts) == cell[where]["states"]
                assert 0 <= cell[where]["p_take"] <= 1
