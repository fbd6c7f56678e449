"""The flags of `milegpo train`: JobArguments + every MileGPOConfig field, and the embedded defaults."""


def test_train_flags_are_the_config_fields():
    from milegpo.job import TINY_DEFAULTS, parse

    job, cfg = parse(["--credit_method", "gigpo", "--horizon", "5", "--sft_epochs", "0"])
    assert cfg.credit_method == "gigpo" and cfg.horizon == 5 and job.sft_epochs == 0
    assert job.model_name_or_path is None and cfg.task_type == TINY_DEFAULTS["task_type"]  # embedded defaults
    job, cfg = parse(["--model_name_or_path", "some/model", "--output_dir", "x"])
    assert cfg.task_type == "" and cfg.max_steps == 300  # a real model keeps the paper's recipe
