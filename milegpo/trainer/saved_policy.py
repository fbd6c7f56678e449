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
               "max_completion_length", "constrain_actions", "constrain_query", "constrained_sampling",
               "num_train_tasks", "groups_per_iteration", "group_size", "state_anchor",
               "show_state_context") + EVAL_FIELDS
#: the JSON types of :data:`TASK_FIELDS` (None: null allowed); a value of another type (``horizon: 2.5``, the
#: string ``"false"`` for a switch) is refused when the file is read
TASK_FIELD_TYPES: dict[str, tuple] = {
    "env": (str,), "task_type": (str,), "horizon": (int,), "env_options": (dict, None), "prompt_style": (str,),
    "history_length": (int,), "max_completion_length": (int, None), "constrain_actions": (bool,),
    "constrain_query": (bool,), "constrained_sampling": (str,), "num_train_tasks": (int,),
    "groups_per_iteration": (int,), "group_size": (int,),
    "state_anchor": (str,), "show_state_context": (bool,), "num_eval_tasks": (int,), "eval_group_size": (int,),
    "eval_temperature": (float, int), "seed": (int,)}
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
    unknown = sorted(set(settings) - set(TASK_FIELDS))
    if unknown:
        raise ValueError(f"{file}: unknown field(s) {', '.join(map(repr, unknown))}; a saved policy's task settings "
                         f"are {', '.join(TASK_FIELDS)}")
    for name, value in settings.items():
        if not _of_types(value, TASK_FIELD_TYPES[name]):
            raise ValueError(f"{file}: {name} {json.dumps(value)}: expected {_type_names(TASK_FIELD_TYPES[name])}")
    return {**PRE_ANCHOR_SETTINGS, **settings}


def _of_types(value, types: tuple) -> bool:
    if value is None:
        return None in types
    if isinstance(value, bool):  # JSON true / false: a bool, never a number
        return bool in types
    return any(t is not None and t is not bool and isinstance(value, t) for t in types)


def _type_names(types: tuple) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "a JSON object",
             None: "null"}
    return " or ".join(dict.fromkeys(names[t] for t in types if not (t is int and float in types)))


def recorded_task_settings(cfg) -> dict[str, Any]:
    """The :data:`TASK_SETTINGS` of a run of ``cfg`` (a MileGPOConfig): its :data:`TASK_FIELDS`, with the data
    folder it played named in ``env_options``: a WebShop run on ``$WEBSHOP_DATA`` records that folder as
    ``data_dir`` (else ``milegpo eval`` of the policy, where the variable is unset or the folder gone, would play
    another shop: the embedded one)."""
    import os

    settings = {k: getattr(cfg, k) for k in TASK_FIELDS}
    options = dict(settings.get("env_options") or {})
    if settings.get("env") == "webshop" and not options.get("data_dir") and os.environ.get("WEBSHOP_DATA"):
        options["data_dir"] = str(Path(os.path.expandvars(os.path.expanduser(os.environ["WEBSHOP_DATA"]))).resolve())
        settings["env_options"] = options
    return settings


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


__all__ = ["TASK_SETTINGS", "TASK_FIELDS", "TASK_FIELD_TYPES", "recorded_task_settings", "EVAL_FIELDS", "PRE_ANCHOR_SETTINGS", "saved_task_settings", "reload_tokenizer"]
