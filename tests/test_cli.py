"""The `milegpo` command: demo, replay, generate-games (train / eval: tests/job/test_pipeline.py)."""

import json

import pytest

from milegpo.cli import main
from milegpo.credit import StepBatch


def test_demo_prints_methods_diagnostics_and_writes_plot(tmp_path, capsys):
    batch_file = tmp_path / "batch.npz"
    assert main(["demo", "--groups", "2", "--group-size", "4", "--horizon", "8", "--plots", str(tmp_path),
                 "--save", str(batch_file)]) == 0
    out = capsys.readouterr().out
    for word in ("grpo", "gigpo", "graphgpo", "milegpo", "tie_correction_rate", "shared_state_coverage"):
        assert word in out
    assert (tmp_path / "advantages_by_method.png").stat().st_size > 1000
    assert len(StepBatch.load(batch_file)) > 0
    assert main(["replay", str(batch_file), "--preset", "webshop", "--variant", "rcs", "--rows", "0"]) == 0
    assert "preset webshop, variant rcs" in capsys.readouterr().out


def test_generate_household_games(tmp_path, capsys):
    path = tmp_path / "games.jsonl"
    assert main(["generate-games", "household", str(path), "--split", "ood", "--n", "3"]) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 3 and all(r["split"] == "ood" and r["walkthrough"] for r in rows)


def test_generate_webshop_catalog_is_played_with_data_dir(tmp_path, capsys, private_webshop_cache):
    from milegpo.envs.webshop import WebShopEnv, generate_catalog, webshop_tasks
    from milegpo.envs.webshop.data import HUMAN_FILE, REVIEWS_FILE, SMALL_FILES

    folder = tmp_path / "shop"
    assert main(["generate-games", "webshop", str(folder), "--size", "80", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert f"wrote a WebShop catalog to {folder}: 80 products" in text and '"data_dir"' in text
    assert sorted(p.name for p in folder.iterdir()) == sorted([*SMALL_FILES, HUMAN_FILE, REVIEWS_FILE])
    for name, content in generate_catalog(80, 3).items():  # WebShop's files, as the generator makes them
        assert json.loads((folder / name).read_text()) == content
    tasks = webshop_tasks("test", 5, data_dir=folder, test_goals=5)
    assert all(dict(t.options)["data_dir"] == str(folder.resolve()) for t in tasks)
    won = 0
    for task in tasks:
        env = WebShopEnv()
        env.reset(task)
        while not env.done:
            env.step(env.expert_action())
        won += env.won
    assert won >= 3
    with pytest.raises(SystemExit):
        main(["generate-games", "webshop", str(tmp_path / "tiny"), "--size", "5"])
    assert "--size must be >= 10" in capsys.readouterr().err
