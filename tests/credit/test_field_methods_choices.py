"""HGPO and G2PO (issue 42) and BEACON (issue 47) are a choice wherever a credit method is: the trainer's config and its flag, the job's
parser (``milegpo train --credit_method``), the demo / replay commands, the quality tables, the testbed, the job's
advantage plot."""

from __future__ import annotations

import pytest

from milegpo.credit import METHODS, method_variants

NEW = ("hgpo", "g2po", "beacon")
#: an override each method reads, and how the config shows it
OVERRIDES = {"hgpo": ('{"hgpo_history": 1}', lambda cfg: cfg.hgpo_history == 1),
             "g2po": ('{"g2po_w": 0.5}', lambda cfg: cfg.g2po_w == 0.5),
             "beacon": ('{"beacon_weight": 0.5}', lambda cfg: cfg.beacon_weight == 0.5)}


def test_registered_and_labelled():
    for name in NEW:
        assert name in METHODS and method_variants()[name] == (name, "full", {})


@pytest.mark.parametrize("name", NEW)
def test_the_trainer_config_and_the_job_parser_take_them(name):
    from trl import TrlParser

    from milegpo.job import parse
    from milegpo.trainer.config import MileGPOConfig

    (args,) = TrlParser(MileGPOConfig).parse_args_and_config(
        ["--output_dir", "/tmp/milegpo-hgpo-test", "--report_to", "none", "--use_cpu", "true", "--bf16", "false",
         "--credit_method", name.upper(), "--credit_preset", "webshop", "--credit_overrides", OVERRIDES[name][0]])
    cfg = args.credit_config()
    assert args.credit_method == name and OVERRIDES[name][1](cfg) and cfg.norm == "mean"
    # an override of the other method's fields is read by nothing: refused (tests/test_hostile_probes.py)
    _, job_cfg = parse(["--credit_method", name, "--horizon", "5", "--sft_epochs", "0"])
    assert job_cfg.credit_method == name


def test_demo_replay_and_the_plot_show_them(tmp_path, capsys):
    from milegpo.cli import main

    batch_file = tmp_path / "batch.npz"
    assert main(["demo", "--groups", "2", "--group-size", "4", "--horizon", "6", "--rows", "0", "--plots",
                 str(tmp_path), "--save", str(batch_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(any(line.startswith(f"{name} ") for line in lines) for name in NEW)
    assert main(["replay", str(batch_file), "--preset", "webshop", "--rows", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(any(line.startswith(f"{name} ") for line in lines) for name in NEW)


def test_quality_tables_and_testbed_list_them():
    from milegpo.credit import presets
    from milegpo.credit.synthetic import random_batch
    from milegpo.evidence.quality import estimate_all

    results = estimate_all(random_batch(2, 4, 6, seed=0), presets.ALFWORLD, "torch")
    assert all(name in results for name in NEW)
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "credit_testbed.py"
    spec = importlib.util.spec_from_file_location("credit_testbed", path)
    testbed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(testbed)
    assert all(testbed.METHODS[name] == (name, "full") for name in NEW)
