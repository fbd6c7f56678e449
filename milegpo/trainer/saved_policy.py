"""What a policy saved by ``milegpo train`` carries beside its weights, and how it is read back.

- :data:`TASK_SETTINGS` (``milegpo_task.json``): the MileGPOConfig fields of :data:`TASK_FIELDS` (the games,
  prompt and evaluation it was trained and evaluated with); :func:`saved_task_settings` reads them and
  :meth:`milegpo.trainer.config.MileGPOConfig.with_task_settings` applies them;
- :func:`reload_tokenizer`: its tokenizer, loaded faithfully.

:class:`~milegpo.trainer.MileGPOTrainer` given a saved policy's folder uses both, and so does the job
(``milegpo eval``, ``milegpo train --model_name_or_path``), which writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: the file beside a saved policy that records the games and prompt it was trained with (`milegpo eval` and
#: `milegpo train --model_name_or_path` of that policy take them as defaults)
TASK_SETTINGS = "milegpo_task.json"
#: the evaluation settings a saved policy carries too: ``milegpo eval`` of it plays the evaluation ``milegpo train``
#: printed at its end (same tasks, episodes, temperature and seed: the same numbers)
EVAL_FIELDS = ("num_eval_tasks", "eval_group_size", "eval_temperature", "seed")
#: the MileGPOConfig fields :data:`TASK_SETTINGS` records (``num_train_tasks``: its training games, seeds 0..n-1,
#: which a small catalog may not hold a thousand of; ``groups_per_iteration`` with them: a config needs at least
#: that many games; it and ``group_size`` also size the environment pool, whose waves of episodes set the
#: generation batches of an evaluation: the same pool, the same sampled episodes)
TASK_FIELDS = ("env", "task_type", "horizon", "env_options", "prompt_style", "history_length",
               "max_completion_length", "constrain_actions", "constrain_query", "num_train_tasks", "groups_per_iteration",
               "group_size", "state_anchor", "show_state_context") + EVAL_FIELDS
#: what a policy saved before state anchors existed was trained with (its task file names neither): the
#: observation's key and no context line in the prompt
PRE_ANCHOR_SETTINGS = {"state_anchor": "observation", "show_state_context": False}


def saved_task_settings(path) -> dict[str, Any]:
    """The task settings saved beside the policy at ``path`` by ``milegpo train`` (:data:`TASK_SETTINGS`: env,
    task type, horizon, env options, prompt...), or ``{}`` for a model without them (a Hub id, any other folder,
    None). A file that is not a JSON object is a ValueError naming it. A file written before state anchors
    existed (naming neither ``state_anchor`` nor ``show_state_context``) reads as :data:`PRE_ANCHOR_SETTINGS`.
    :meth:`MileGPOConfig.with_task_settings <milegpo.trainer.config.MileGPOConfig.with_task_settings>` applies them."""
    file = Path(path) / TASK_SETTINGS if path else None
    if file is None or not file.is_file():
        return {}
    try:
        settings = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{file}: not valid JSON ({e})") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{file}: expected a JSON object of MileGPOConfig fields, got {type(settings).__name__}")
    return {**PRE_ANCHOR_SETTINGS, **settings}


def reload_tokenizer(path: str):
    """The tokenizer saved at ``path``, loaded faithfully.

    Two transformers 5.24 pitfalls with a tokenizer built from a ``tokenizers.Tokenizer`` (the tiny one):
    ``AutoTokenizer.from_pretrained`` of it (``tokenizer_class: TokenizersBackend``) re-tokenizes text into
    single characters (the policy would see other prompts than in the warm start), and the in-memory object
    drops ``add_tokens`` tokens (``<action>``...) in ``batch_decode(skip_special_tokens=True)`` (the rollout's
    decode). ``PreTrainedTokenizerFast.from_pretrained`` reads ``tokenizer.json`` as it is and has neither."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    cls = AutoTokenizer
    config = Path(path) / "tokenizer_config.json"
    if config.exists() and json.loads(config.read_text()).get("tokenizer_class") in ("TokenizersBackend",
                                                                                    "PreTrainedTokenizerFast"):
        cls = PreTrainedTokenizerFast
    tok = cls.from_pretrained(path, padding_side="left")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


__all__ = ["TASK_SETTINGS", "TASK_FIELDS", "EVAL_FIELDS", "PRE_ANCHOR_SETTINGS", "saved_task_settings", "reload_tokenizer"]
