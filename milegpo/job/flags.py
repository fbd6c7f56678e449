"""The job's flags read without a traceback: every mistake of ``milegpo train`` / ``milegpo eval`` flags is one
:class:`~milegpo.usage.UsageError` line (``milegpo`` prints it and exits 2).

:func:`parse_flags` wraps ``TrlParser.parse_args_and_config``: a value the parser or MileGPOConfig refuses
(``--env nowhere``, bad JSON in ``--env_options``, ``--group_size 1``), an unknown flag (with the closest one:
``--iteratons`` -> ``--max_steps``), a missing ``--config`` file and a ``--model_name_or_path`` that is neither
a saved model folder nor a Hugging Face Hub id (:func:`check_model_path`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from ..usage import UsageError, unknown_arguments


def own_flags(parser) -> set[str]:
    """The flags milegpo declares itself (the fields of ``parser``'s own dataclasses, JobArguments, and
    MileGPOConfig's own and overridden fields), preferred over TRL's and transformers' on a tie of
    :func:`milegpo.usage.closest_flag`."""
    from ..trainer.config import MileGPOConfig

    own = {f.name for t in parser.dataclass_types if t is not MileGPOConfig and dataclasses.is_dataclass(t)
           for f in dataclasses.fields(t)}
    return own | set(MileGPOConfig.__dict__.get("__annotations__", {}))


def check_model_path(model: str | None) -> None:
    """Refuse a ``--model_name_or_path`` that names a local path that is not a saved model: a missing path
    that looks like one (it starts with ``/``, ``.`` or ``~``, has two or more ``/``, is no valid Hub id, or its
    parent folder exists here) or a folder without ``config.json``. A Hub id (``Qwen/Qwen2.5-1.5B-Instruct``)
    passes: the Hub decides."""
    if model is None:
        return
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"--model_name_or_path {model}: a folder without config.json, not a saved model "
                             "(give a folder that save_pretrained wrote, e.g. milegpo_run/final)")
        return
    if path.exists():
        raise UsageError(f"--model_name_or_path {model}: a file, not a saved model folder or a Hub id")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
        hub_id = True
    except HFValidationError:
        hub_id = False
    local_looking = (model.startswith(("/", ".", "~")) or model.count("/") >= 2 or not hub_id
                     or (len(path.parts) > 1 and path.parent.is_dir()))
    if local_looking:
        raise UsageError(f"--model_name_or_path {model}: no such folder (a saved model is a folder such as "
                         "milegpo_run/final; a Hugging Face Hub id looks like Qwen/Qwen2.5-1.5B-Instruct)")


def parse_flags(parser, argv: Sequence[str], prog: str):
    """``(JobArguments, MileGPOConfig)`` of ``argv`` by ``parser`` (a ``TrlParser`` of both); every mistake is a
    one-line :class:`~milegpo.usage.UsageError` that starts with ``prog``."""

    def error(message: str):
        raise UsageError(f"{prog}: error: {message}")

    parser.error = error  # argparse's own errors (a value of the wrong type, a flag without its value)
    try:
        job, cfg, extras = parser.parse_args_and_config(args=list(argv), return_remaining_strings=True)
    except UsageError:
        raise
    except OSError as e:  # --config FILE that is not there
        raise UsageError(f"{prog}: error: {e.filename or ''}: {e.strerror or e}") from None
    except ValueError as e:  # MileGPOConfig's ConfigError, TrainingArguments' and TRL's checks
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"{prog}: error: {first_line}") from None
    if extras:
        raise unknown_arguments(prog, list(extras), parser, own_flags(parser))
    try:
        check_model_path(job.model_name_or_path)
    except UsageError as e:
        raise UsageError(f"{prog}: error: {e}") from None
    if prog == "milegpo train" and cfg.max_steps and cfg.num_train_tasks < cfg.groups_per_iteration:
        raise UsageError(f"{prog}: error: MileGPOConfig.num_train_tasks={cfg.num_train_tasks}: must be >= "
                         f"groups_per_iteration ({cfg.groups_per_iteration}) to fill an iteration")
    # a saved policy's task settings were the defaults of these flags: the trainer keeps what the flags decided
    cfg.task_settings_applied = job.model_name_or_path is not None
    return job, cfg


__all__ = ["parse_flags", "check_model_path", "own_flags"]
