"""``milegpo train --env scienceworld`` without what the engine needs: one line naming what to install, exit 2,
before any model is built (the run's tasks are built first, and they check the runtime)."""

from __future__ import annotations

import pytest

from milegpo.envs.scienceworld import tasks as sw

from ...usage_errors import one_line_error


@pytest.fixture
def no_model(monkeypatch):
    import milegpo.job.pipeline as pipeline

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(pipeline, "load_policy", refuse)


def test_no_java_is_one_line_before_any_model(capsys, monkeypatch, tmp_path, no_model):
    monkeypatch.setattr(sw, "_RUNTIME_OK", [])
    monkeypatch.setattr(sw, "package_installed", lambda: True)  # the package "is there"
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    line = one_line_error(capsys, ["train", "--env", "scienceworld", "--output_dir", str(tmp_path / "run")])
    assert line.startswith("milegpo train: error: the train tasks of --env scienceworld")
    assert line.endswith("ScienceWorld needs a Java runtime (java not found on PATH): apt install "
                         "openjdk-17-jre-headless")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_no_package_is_one_line(capsys, monkeypatch, tmp_path, no_model):
    monkeypatch.setattr(sw, "_RUNTIME_OK", [])
    monkeypatch.setattr(sw, "package_installed", lambda: False)
    line = one_line_error(capsys, ["train", "--env", "scienceworld", "--output_dir", str(tmp_path / "run")])
    assert line.endswith("ScienceWorld needs its engine package (scienceworld is not installed): pip install "
                         "'milegpo[scienceworld]' (scienceworld==1.2.3)")


def test_out_of_range_task_request_is_one_line(capsys, monkeypatch, tmp_path, no_model):
    pytest.importorskip("scienceworld")
    line = one_line_error(capsys, ["train", "--env", "scienceworld", "--task_type", "identify-life-stages-2",
                                   "--num_train_tasks", "5", "--output_dir", str(tmp_path / "run")])
    assert "identify-life-stages-2 has 4 variations; asked for 5" in line


def test_job_defaults():
    from milegpo.envs.scienceworld.tasks import DEFAULT_SCIENCEWORLD_HORIZON
    from milegpo.job import ENV_DEFAULTS, parse

    tiny = ENV_DEFAULTS["scienceworld"]["tiny"]
    job, cfg = parse(["--env", "scienceworld"])
    assert (cfg.task_type, cfg.horizon, cfg.env_options, cfg.eval_splits) == (
        "find-non-living-thing", tiny["horizon"], {"simplifications": "easy"}, ["dev"])
    assert job.sft_expert == "oracle" and cfg.prompt_style == "compact"
    job, cfg = parse(["--env", "scienceworld", "--model_name_or_path", "some/model"])
    assert (cfg.horizon, cfg.eval_splits, cfg.task_type, cfg.env_options) == (
        DEFAULT_SCIENCEWORLD_HORIZON, ["dev", "test"], "", None)
    assert job.sft_expert == "oracle"
