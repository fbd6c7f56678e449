"""scripts/probe_take_skill.py: the kinds of step it counts, the corrections it makes, both probes end to end."""

from pathlib import Path

import pytest
import torch

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
    from milegpo.job.policy import make_model, make_tokenizer

    mod = _probe()
    tok = make_tokenizer(n_tasks=4, max_receptacles=4)
    make_model(tok, hidden=32, layers=1, seed=0).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
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
