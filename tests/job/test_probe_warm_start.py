"""scripts/probe_warm_start.py: per-verb scores of a (here: very short) warm start."""

from pathlib import Path

import torch

from ..test_recipes import load_module

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "probe_warm_start.py"


def _probe():
    return load_module(SCRIPT)


def test_probe_reports_scores_by_the_experts_verb(capsys):
    mod = _probe()
    threads = torch.get_num_threads()
    try:
        res = mod.main(["--epochs", "0.2", "--sft_tasks", "8", "--hidden", "32", "--probe_steps", "12", "--games", "2"])
    finally:
        torch.set_num_threads(threads)
    assert res["sft_examples"] > 0 and 0.0 <= res["valid"] <= 1.0 and 0.0 <= res["match"] <= res["valid"]
    steps = [v.split("/") for v in res["match_by_verb"].values()]
    assert sum(int(total) for _, total in steps) == 12 and {"go", "take"} <= set(res["match_by_verb"])
    assert set(res["wins"]) == {"greedy", "T=0.4"} and res["wins"]["greedy"].endswith("/2")
    assert set(res["takes"]) == {"greedy", "T=0.4"}
    for takes in res["takes"].values():
        right, present = map(int, takes["right_when_present"].split("/"))
        assert right <= present and present + takes["target_absent"] == takes["takes"]
    assert '"match_by_verb"' in capsys.readouterr().out


def test_take_facts_tells_an_absent_target_from_a_right_or_wrong_take():
    """A take where the goal's object is not in view counts as absent; where it is, right or wrong, with a random
    take's chance (right takes / admissible takes)."""
    from milegpo.envs import HouseholdEnv
    from milegpo.job.policy import easy_tasks

    mod = _probe()
    seen = set()
    for task in easy_tasks("id", 40, max_receptacles=4):
        env = HouseholdEnv()
        _, adm, _ = env.reset(task)
        target = env.game.target_type
        for go in [a for a in adm if a.startswith("go to ")]:
            _, _, _, _, info = env.step(go)
            takes = [a for a in info["admissible_actions"] if a.startswith("take ")]
            right = [a for a in takes if a.split()[1] == target]
            wrong = [a for a in takes if a.split()[1] != target]
            if takes and not right:
                assert mod.take_facts(env, takes[0], info["admissible_actions"]) == {"takes": 1, "absent": 1}
                seen.add("absent")
            if right and wrong:
                chance = len(right) / len(takes)
                assert mod.take_facts(env, right[0], info["admissible_actions"]) == {
                    "takes": 1, "present": 1, "right": 1, "chance": chance}
                assert mod.take_facts(env, wrong[0], info["admissible_actions"]) == {
                    "takes": 1, "present": 1, "right": 0, "chance": chance}
                seen.add("present")
    assert seen == {"absent", "present"}
