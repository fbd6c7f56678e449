"""The main job behind ``milegpo train`` / ``milegpo eval``: warm start, evaluate, train, evaluate, report.

- :mod:`~milegpo.job.arguments`: the flags (:class:`JobArguments` + every MileGPOConfig field),
  :data:`ENV_DEFAULTS` (each environment kind's defaults, its own and its tiny run's), :data:`TINY_RUN` /
  :data:`TINY_DEFAULTS` (the embedded CPU run's defaults);
- :mod:`~milegpo.job.flags`: :func:`parse`, the flags read and checked, every mistake one line;
- :mod:`~milegpo.job.policy`: the policy, the given model or a tiny Qwen2 and tokenizer built on the spot
  (:func:`load_policy`), and its SFT warm start (:func:`warm_start`, TRL's ``SFTTrainer`` on expert
  walkthroughs);
- :mod:`~milegpo.job.pipeline`: :func:`run_train` (the whole job) and :func:`run_eval`;
- :mod:`~milegpo.job.console`: one line per iteration on the console, every metric in ``metrics.jsonl``
  (:class:`IterationConsole`);
- :mod:`~milegpo.job.report`: summaries (:func:`eval_summary`, :func:`training_history`,
  :func:`format_summary`), ``summary.json`` and the run's plots, drawn by :mod:`~milegpo.job.plots`.

    >>> from milegpo.job import parse, run_train
    >>> job, cfg = parse(["--max_steps", "3", "--output_dir", "runs/short"])
    >>> summary = run_train(job, cfg)
"""

from __future__ import annotations

from .arguments import (ANY_KIND_TINY, ENV_DEFAULTS, EVAL_FIELDS, TASK_FIELDS, TASK_SETTINGS, TINY_DEFAULTS, TINY_RUN, JobArguments,
                        env_defaults, saved_task_settings)
from .flags import build_parser, parse
from .console import METRICS_FILE, IterationConsole, iteration_line
from .pipeline import make_trainer, run_eval, run_train
from .policy import load_policy, reload_tokenizer, sft_tasks, warm_start
from .report import (advantages_plot, eval_line, eval_summary, format_eval, format_summary, time_split,
                     training_ends, training_history, write_plots, write_summary)

__all__ = ["JobArguments", "ANY_KIND_TINY", "TINY_DEFAULTS", "TINY_RUN", "ENV_DEFAULTS", "env_defaults", "saved_task_settings",
           "TASK_SETTINGS", "TASK_FIELDS", "EVAL_FIELDS", "build_parser", "parse", "run_train", "run_eval", "make_trainer",
           "IterationConsole", "iteration_line", "METRICS_FILE", "load_policy", "reload_tokenizer", "sft_tasks", "warm_start", "eval_summary",
           "training_history", "training_ends", "time_split", "eval_line", "format_eval", "format_summary", "write_summary",
           "write_plots", "advantages_plot"]
