"""scripts/probe_warm_start.py: per-verb scores of a (here: very short) warm start."""

from pathlib import Path

import torch

from ..test_recipes import load_module

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "probe_warm_start.py"


def _probe():
    return load_module(SCRIPT)


def test_probe_reports_scores_by_the_experts_verb(capsys, tmp_path):
    mod = _probe()
    threads = torch.get_num_threads()
    small = ["--probe_steps", "12", "--games", "2"]
    try:
        res = mod.main(["--epochs", "0.2", "--sft_tasks", "8", "--hidden", "32", "--save", str(tmp_path), *small])
        saved = mod.main(["--policy", str(tmp_path), *small])  # the saved warm start is the one just probed
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
    for key in ("valid", "match", "match_by_verb", "seen_match_by_verb"):
        assert saved[key] == res[key], key
    assert saved["wins"]["greedy"] == res["wins"]["greedy"]


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


def test_renamed_pairs_rename_object_types_alike_in_prompt_and_label():
    """Each example once as recorded, then renamed copies: one permutation within each group of object types per
    copy, applied to prompt and completion alike; every other word stays; most copies rename something."""
    import re

    from milegpo.job.policy import easy_tasks, expert_pairs

    mod = _probe()
    classes = mod.rename_classes()
    group_of = {kind: i for i, group in enumerate(classes) for kind in group}
    assert len(group_of) == sum(map(len, classes)) >= 12 and "desklamp" not in group_of
    pairs = expert_pairs(easy_tasks("train", 4, start=64, max_receptacles=4), 2, explore=0.2, seed=0,
                         expert="search", prompt_style="compact")
    out = mod.renamed_pairs(pairs, 3, seed=5)
    assert len(out) == 3 * len(pairs) and out[::3] == pairs
    renamed = 0
    for i, original in enumerate(pairs):
        for copy in out[3 * i + 1:3 * i + 3]:
            names = {}
            for before, after in zip(original, copy):
                a, b = re.findall(r"\w+|\W", before), re.findall(r"\w+|\W", after)
                assert len(a) == len(b)
                for x, y in zip(a, b):
                    if x in group_of:
                        assert group_of[y] == group_of[x] and names.setdefault(x, y) == y  # one name per type
                    else:
                        assert x == y
            assert len(set(names.values())) == len(names)  # a permutation: two types never share a name
            renamed += any(x != y for x, y in names.items())
    assert renamed > len(pairs)  # most copies rename something


def test_rename_objects_multiplies_the_warm_starts_examples(tmp_path):
    from milegpo.job import policy

    mod = _probe()
    recorded = policy.expert_pairs
    threads = torch.get_num_threads()
    small = ["--epochs", "0.05", "--sft_tasks", "3", "--hidden", "32", "--probe_steps", "4", "--games", "1"]
    try:
        once = mod.main(small)
        twice = mod.main(small + ["--rename_objects", "2"])
    finally:
        torch.set_num_threads(threads)
    assert twice["sft_examples"] == 2 * once["sft_examples"] > 0
    assert policy.expert_pairs is recorded  # restored after the warm start
