"""The job's flags read without a traceback: every mistake of ``milegpo train`` / ``milegpo eval`` flags is one
:class:`~milegpo.usage.UsageError` line (``milegpo`` prints it and exits 2).

:func:`parse` is the job's one reading of its flags (the flags themselves and their defaults are
:mod:`milegpo.job.arguments`'): a saved policy's task settings and the env's defaults become the parser's
defaults, the ``--config`` file's values flags, and :func:`parse_flags` checks the whole.
:func:`parse_flags` wraps ``TrlParser.parse_args_and_config``: a value the parser or MileGPOConfig refuses
(``--env nowhere``, bad JSON in ``--env_options``, ``--group_size 1``), an unknown flag (with the closest one:
``--iteratons`` -> ``--max_steps``), a missing ``--config`` file and a ``--model_name_or_path`` that is neither
a saved model folder nor a Hugging Face Hub id (:func:`check_model_path`, which also reads its ``config.json``),
a ``--resume_from_checkpoint`` that is not a whole checkpoint (:func:`checkpoint_step`) and an ``--output_dir``
that cannot be written. ``--config recipe.yaml`` is read by :func:`read_config` and its values become flags
(:func:`config_flags`) placed before the command line's: they pass the same checks, and a flag given wins.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Collection, Sequence

from ..usage import UsageError, check_writable, unknown_arguments
from .arguments import (HELP_ALL, JobArguments, arrange_help, canonical_flags, env_defaults, merged_env_options,
                        saved_task_settings)


def _unique_key_loader():
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        """PyYAML's safe loader, refusing a key given twice in one mapping (safe_load keeps the last silently)."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def read_config(path: str, prog: str) -> dict:
    """The mapping of the ``--config`` YAML file ``path``; a missing or unreadable file, a YAML syntax error or a
    document that is not a mapping is one :class:`UsageError` line naming the file."""
    import yaml

    _UniqueKeyLoader = _unique_key_loader()
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"{prog}: error: {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{prog}: error: --config {path}: not a text file ({e.reason})") from None
    try:
        config = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"{prog}: error: --config {path}: not valid YAML{where}: {problem}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise UsageError(f"{prog}: error: --config {path}: expected a YAML mapping of flag names to values, got "
                         f"{type(config).__name__}")
    return config


def config_flags(config: dict, parser, prog: str, path: str) -> list[str]:
    """The command-line flags that say what the ``--config`` mapping ``config`` says: ``--name value`` for each
    key (lists as several values, dicts as JSON, booleans as ``true`` / ``false``); a null value becomes the
    parser's default instead. A key that names no flag is a one-line :class:`UsageError` with the closest flag.
    TRL's ``env:`` mapping of environment variables is set here, as TRL does; ``env:`` a string is the
    environment kind (MileGPOConfig.env)."""
    import os

    dests = {action.dest: action for action in parser._actions}
    tokens: list[str] = []
    for key, value in config.items():
        if key == "env" and isinstance(value, dict):  # TrlParser's environment variables
            os.environ.update({str(k): str(v) for k, v in value.items()})
            continue
        if not isinstance(key, str) or key not in dests or key == "help":
            err = unknown_arguments(prog, [f"--{key}"], parser, own_flags(parser))
            raise UsageError(str(err).replace(f"{prog}: error: unknown flag", f"{prog}: error: --config {path}: "
                                              "unknown key", 1)) from None
        if value is None:
            parser.set_defaults(**{key: None})
            continue
        values = value if isinstance(value, list) else [value]
        tokens.append(f"--{key}")
        for item in values:
            if isinstance(item, bool):
                tokens.append("true" if item else "false")
            elif isinstance(item, (dict, list)):
                tokens.append(json.dumps(item))
            else:
                tokens.append(str(item))
    return tokens


def own_flags(parser) -> set[str]:
    """The flags milegpo declares itself (the fields of ``parser``'s own dataclasses, JobArguments, and
    MileGPOConfig's own and overridden fields), preferred over TRL's and transformers' on a tie of
    :func:`milegpo.usage.closest_flag`."""
    from ..trainer.config import MileGPOConfig

    own = {f.name for t in parser.dataclass_types if t is not MileGPOConfig and dataclasses.is_dataclass(t)
           for f in dataclasses.fields(t)}
    return own | set(MileGPOConfig.__dict__.get("__annotations__", {}))


def check_model_path(model: str | None, flag: str = "--model_name_or_path") -> None:
    """Refuse a ``--model_name_or_path`` that names a local path that is not a saved model: a missing path
    that looks like one (it starts with ``/``, ``.`` or ``~``, has two or more ``/``, is no valid Hub id, or its
    parent folder exists here) or a folder without ``config.json``. A Hub id (``Qwen/Qwen2.5-1.5B-Instruct``)
    passes: the Hub decides. A folder's ``config.json`` must be a model configuration transformers reads."""
    if model is None:
        return
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"{flag} {model}: a folder without config.json, not a saved model "
                             "(give a folder that save_pretrained wrote, e.g. milegpo_run/final)")
        _check_model_config(path / "config.json", flag, model)
        return
    if path.exists():
        raise UsageError(f"{flag} {model}: a file, not a saved model folder or a Hub id")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
        hub_id = True
    except HFValidationError:
        hub_id = False
    local_looking = (model.startswith(("/", ".", "~")) or model.count("/") >= 2 or not hub_id
                     or (len(path.parts) > 1 and path.parent.is_dir()))
    if local_looking:
        raise UsageError(f"{flag} {model}: no such folder (a saved model is a folder such as "
                         "milegpo_run/final; a Hugging Face Hub id looks like Qwen/Qwen2.5-1.5B-Instruct)")


def _check_model_config(file: Path, flag: str, model: str) -> None:
    """Refuse a ``config.json`` that is no JSON object naming a ``model_type`` transformers knows."""
    try:
        config = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{flag} {model}: {file.name} is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise UsageError(f"{flag} {model}: {file.name} holds a JSON {type(config).__name__}, not a model "
                         "configuration (an object with model_type)")
    from transformers import CONFIG_MAPPING

    model_type = config.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise UsageError(f"{flag} {model}: {file.name} names "
                         f"{'no model_type' if model_type is None else f'model_type {model_type!r}'}, not one "
                         "transformers knows")


#: what a checkpoint folder the trainer can resume from holds (transformers' Trainer._save_checkpoint)
TRAINER_STATE = "trainer_state.json"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "adapter_model.safetensors")


def checkpoint_step(checkpoint) -> int:
    """The training step (``global_step``) a checkpoint folder was saved at; a folder that is missing, lacks its
    trainer state or weights, or holds a torn (unreadable, truncated) one is a one-line :class:`UsageError`."""
    import json

    path = Path(checkpoint)
    flag = f"--resume_from_checkpoint {checkpoint}"
    if not path.is_dir():
        raise UsageError(f"{flag}: {'a file, not' if path.exists() else 'no such'} checkpoint folder (a run saves "
                         "<output_dir>/checkpoint-N with --save_strategy steps)")
    try:
        state = json.loads((path / TRAINER_STATE).read_text())
        step = state["global_step"]
    except FileNotFoundError:
        raise UsageError(f"{flag}: no {TRAINER_STATE}: not a whole checkpoint") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, KeyError) as e:
        raise UsageError(f"{flag}: {TRAINER_STATE} is torn or not a trainer state ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from None
    if not isinstance(step, int) or step < 0:
        raise UsageError(f"{flag}: {TRAINER_STATE} has global_step {step!r}, not a step")
    weights = [path / name for name in WEIGHT_FILES if (path / name).is_file()]
    if not weights:
        raise UsageError(f"{flag}: no model weights ({' or '.join(WEIGHT_FILES[:3])}): not a whole checkpoint")
    if weights[0].suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(weights[0]), framework="pt") as f:
                names = list(f.keys())
                f.get_tensor(names[-1]) if names else None  # the last tensor: a truncated file fails here
        except Exception as e:  # safetensors raises its own SafetensorError (and OSError) on a torn file
            raise UsageError(f"{flag}: {weights[0].name} is torn or unreadable ({str(e).splitlines()[0]})") from None
    return step


def check_job_arguments(job, cfg, train: bool = True) -> None:
    """The job's flags that depend on the run's config: ``--sft_expert`` must be an expert of the env's world
    (when ``train`` has a warm start). The embedded tiny policy (no ``--model_name_or_path``) plays any text
    environment: its tokenizer is made of the world's own words (:func:`milegpo.job.policy.tokenizer_texts`)."""
    if train and job.sft_epochs > 0:
        from ..envs import env_class

        experts = sorted(env_class(cfg.env).experts)
        if job.sft_expert not in experts:
            raise UsageError(f"--sft_expert {job.sft_expert!r}: the {cfg.env} world's experts are "
                             f"{', '.join(experts) or 'none'} (--sft_epochs 0: no warm start)")


def check_tasks(cfg, train: bool) -> None:
    """Build the run's task sets (its ``num_train_tasks`` training tasks when ``train``, ``num_eval_tasks`` of each
    evaluation split) as the trainer will, so that what the environment refuses (a WebShop ``data_dir`` that is
    not there or holds broken files, fewer goals than asked, a category it lacks) is a one-line
    :class:`UsageError` before any model is built. A kind that is not one of milegpo's own worlds (a user's class,
    a gymnasium id, an entry point) is also made and reset on the first task (:func:`check_first_reset`)."""
    from ..envs import EnvError
    from ..rollout import make_tasks

    wanted = ([(cfg.train_split, cfg.num_train_tasks)] if train else []) + \
        ([(split, cfg.num_eval_tasks) for split in cfg.eval_splits] if cfg.num_eval_tasks else [])
    first = None
    for split, n in wanted:
        try:
            tasks = make_tasks(cfg.env, split, n, cfg.task_type, cfg.horizon, options=cfg.env_options)
        except (EnvError, ValueError, TypeError, OSError) as e:
            options = f" --env_options '{json.dumps(cfg.env_options)}'" if cfg.env_options else ""
            raise UsageError(f"the {split} tasks of --env {cfg.env}{options}: {str(e).splitlines()[0]}") from None
        first = first or (tasks[0] if tasks else None)
    check_first_reset(cfg.env, first)


def check_first_reset(kind: str, task) -> None:
    """Make one environment of a user's ``kind`` (not one of milegpo's own worlds) and reset it on ``task`` (when
    there is one), before any model is built: a constructor that raises or needs arguments, a reset that returns
    None or array observations (``gym:CartPole-v1``), a reset that raises, are a one-line :class:`UsageError`
    naming the kind and what failed (issue 48.2: a traceback after the model was built)."""
    from ..envs import get_kind
    from ..envs.base import error_summary

    spec = get_kind(kind)
    if spec.origin == "milegpo":
        return
    try:
        env = spec.make()
    except Exception as e:  # noqa: BLE001 - a user's constructor may raise anything
        raise UsageError(f"--env {kind}: making the environment failed: {error_summary(e)}") from None
    try:
        if task is not None:
            env.reset(task)
    except Exception as e:  # noqa: BLE001 - a user's reset may raise anything
        raise UsageError(f"--env {kind}: the reset of task {task.task_id!r} failed: {error_summary(e)}") from None
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def check_run_environment(model: str | None, cfg) -> None:
    """What the run needs from this machine, checked before any model is built (a one-line :class:`UsageError`
    naming what is missing; issue 44: tracebacks, some after start-up):

    - ``--use_vllm true``: vLLM installed;
    - a ``model`` that is no folder here (a Hub id): in the Hugging Face cache, or the Hub reachable
      (``HF_HUB_OFFLINE`` unset, and a connection to its host within 5 s);
    - ``--report_to tensorboard``: TensorBoard's folder (``$TENSORBOARD_LOGGING_DIR``, else ``<output_dir>/runs``)
      a folder this process can write (not a regular file, not read-only).

    ``milegpo train`` / ``eval`` and the example scripts call it after their flags are parsed (it may touch the
    network, so :func:`parse_flags` does not)."""
    import importlib.util
    import os

    if getattr(cfg, "use_vllm", False) and importlib.util.find_spec("vllm") is None:
        raise UsageError("--use_vllm true: vLLM is not installed here (pip install vllm, or --use_vllm false: "
                         "generation by transformers)")
    if model is not None and not Path(model).expanduser().exists():
        _check_hub_model(model)
    report_to = cfg.report_to if isinstance(cfg.report_to, (list, tuple)) else [cfg.report_to]
    if "tensorboard" in report_to or "all" in report_to:
        folder = os.environ.get("TENSORBOARD_LOGGING_DIR")
        where = "$TENSORBOARD_LOGGING_DIR" if folder else "TensorBoard's folder (--report_to tensorboard)"
        check_writable(folder or str(Path(cfg.output_dir) / "runs"), where)


def _check_hub_model(model: str) -> None:
    """Refuse a Hub id that is not in the local Hugging Face cache when the Hub cannot be reached."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    try:
        if isinstance(try_to_load_from_cache(model, "config.json"), str):
            return
    except Exception:  # noqa: BLE001 - an id the cache cannot even look up: the Hub decides
        pass
    missing = (f"--model_name_or_path {model}: not a folder here and not in the Hugging Face cache "
               f"({constants.HF_HUB_CACHE})")
    if constants.HF_HUB_OFFLINE:
        raise UsageError(f"{missing}, and HF_HUB_OFFLINE is set (download it first, or give a saved model's folder)")
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    port = urlparse(constants.ENDPOINT).port or (443 if constants.ENDPOINT.startswith("https") else 80)
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as e:
        raise UsageError(f"{missing}, and the Hub ({host}) cannot be reached ({e.strerror or e}); download it where "
                         "the Hub is reachable, or give a saved model's folder") from None


def check_query_goals(cfg, train: bool) -> None:
    """With ``--constrain_query``, every goal of the run's task sets (as :func:`check_tasks` builds them) must hold a
    word a query can be made of (:func:`milegpo.envs.base.goal_words`); a goal without one is a one-line
    :class:`UsageError` naming its task, before any model is built (issue 44: a traceback mid-run)."""
    from ..envs import EnvError, make_env
    from ..envs.base import goal_words
    from ..rollout import make_tasks

    if not cfg.constrain_query:
        return
    wanted = ([(cfg.train_split, cfg.num_train_tasks)] if train else []) + \
        ([(split, cfg.num_eval_tasks) for split in cfg.eval_splits] if cfg.num_eval_tasks else [])
    env = make_env(cfg.env)
    try:
        for split, n in wanted:
            for task in make_tasks(cfg.env, split, n, cfg.task_type, cfg.horizon, options=cfg.env_options):
                goal = env.reset(task)[2].get("goal", "")
                try:
                    goal_words(goal)
                except ValueError:
                    raise UsageError(f"--constrain_query: the goal of task {task.task_id} ({goal!r:.120}) has no word "
                                     "a query could use (words holding [ ] < > are left out); give --constrain_query "
                                     "false, or a data folder whose goals all have words") from None
    except (EnvError, TypeError, OSError):  # the environment's own refusals are check_tasks'
        pass
    finally:
        env.close()


def check_user_anchor(cfg, train: bool) -> None:
    """Call a user's ``--state_anchor`` (a dotted path, not a built-in anchor) where it will run, before any model
    is built: on the reset of the run's first task and on one step of its first admissible action. An anchor that
    raises there or returns no str is a one-line :class:`UsageError` naming the anchor and where it failed (issue
    44: it ended every episode after one step, recorded as truncated, and the run exited 0)."""
    from ..envs import EnvError, make_env
    from ..envs.anchors import STATE_ANCHORS, AnchorError
    from ..rollout import make_tasks

    if cfg.state_anchor in STATE_ANCHORS:
        return
    split = cfg.train_split if train or not cfg.num_eval_tasks or not cfg.eval_splits else cfg.eval_splits[0]
    env = None
    try:
        task = make_tasks(cfg.env, split, 1, cfg.task_type, cfg.horizon, options=cfg.env_options)[0]
        env = make_env(cfg.env)
        env.set_state_anchor(cfg.state_anchor)
        _, admissible, _ = env.reset(task)
        if admissible:
            env.step(admissible[0])
    except AnchorError as e:
        raise UsageError(f"--state_anchor {cfg.state_anchor}: {e}") from None
    except (EnvError, ValueError, TypeError, OSError):  # the environment's own refusals are check_tasks'
        pass
    finally:
        if env is not None:
            env.close()


def parse_flags(parser, argv: Sequence[str], prog: str, from_config: Collection[str] = (),
                config_path: str | None = None):
    """``(JobArguments, MileGPOConfig)`` of ``argv`` by ``parser`` (a ``TrlParser`` of both); every mistake is a
    one-line :class:`~milegpo.usage.UsageError` that starts with ``prog``. from_config: the flags whose values
    came from the ``--config`` file ``config_path`` (:func:`config_flags`, placed first in ``argv``): a refusal
    of one of them names the file."""
    import re

    def error(message: str):
        field = re.match(r"(?:argument --([\w-]+)|(?:MileGPOConfig|JobArguments)\.(\w+)=)", message)
        name = next((g for g in field.groups() if g), "").split("/")[0].replace("-", "_") if field else ""
        where = f" (from --config {config_path})" if name in from_config else ""
        raise UsageError(f"{prog}: error: {message}{where}")

    parser.error = error  # argparse's own errors (a value of the wrong type, a flag without its value)
    try:
        job, cfg, extras = parser.parse_args_and_config(args=list(argv), return_remaining_strings=True)
    except UsageError:
        raise
    except OSError as e:  # --config FILE that is not there
        raise UsageError(f"{prog}: error: {e.filename or ''}: {e.strerror or e}") from None
    except ValueError as e:  # MileGPOConfig's ConfigError, JobArguments', TrainingArguments' and TRL's checks
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        error(first_line)
    if extras:
        raise unknown_arguments(prog, list(extras), parser, own_flags(parser))
    try:
        if prog == "milegpo eval" and not job.model_name_or_path:
            raise UsageError("give --model_name_or_path (e.g. milegpo_run/final): the policy to evaluate")
        check_model_path(job.model_name_or_path)
        check_job_arguments(job, cfg, train=prog == "milegpo train")
        if prog == "milegpo train":
            check_writable(cfg.output_dir, "--output_dir")
            if cfg.resume_from_checkpoint:
                if job.overwrite_output_dir:
                    raise UsageError("--overwrite_output_dir and --resume_from_checkpoint: give one (replace the "
                                     "earlier run, or go on with it)")
                step = checkpoint_step(cfg.resume_from_checkpoint)
                if step >= cfg.max_steps:
                    raise UsageError(f"--resume_from_checkpoint {cfg.resume_from_checkpoint}: saved at step {step}, "
                                     f"and --max_steps is {cfg.max_steps}: nothing left to train (raise --max_steps)")
        check_tasks(cfg, train=prog == "milegpo train" and cfg.max_steps > 0)
        check_user_anchor(cfg, train=prog == "milegpo train" and cfg.max_steps > 0)
        check_query_goals(cfg, train=prog == "milegpo train" and cfg.max_steps > 0)
    except UsageError as e:
        raise UsageError(f"{prog}: error: {e}") from None
    if prog == "milegpo train" and cfg.max_steps and cfg.num_train_tasks < cfg.groups_per_iteration:
        raise UsageError(f"{prog}: error: MileGPOConfig.num_train_tasks={cfg.num_train_tasks}: must be >= "
                         f"groups_per_iteration ({cfg.groups_per_iteration}) to fill an iteration")
    # a saved policy's task settings were the defaults of these flags: the trainer keeps what the flags decided
    cfg.task_settings_applied = job.model_name_or_path is not None
    return job, cfg


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _without_config(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """(``argv`` without its ``--config FILE``, FILE or None)."""
    rest, path, i = [], None, 0
    while i < len(argv):
        if argv[i] == "--config" and i + 1 < len(argv):
            path, i = argv[i + 1], i + 2
            continue
        if argv[i].startswith("--config="):
            path = argv[i].split("=", 1)[1]
        else:
            rest.append(argv[i])
        i += 1
    return rest, path


def _given(argv: Sequence[str], config: dict, name: str) -> Any:
    """The value of ``--name`` on the command line, else in the ``--config`` mapping (not TRL's ``env:``
    mapping of environment variables), else None."""
    value = _flag_value(argv, f"--{name}")
    if value is None:
        value = config.get(name)
    return None if name == "env" and isinstance(value, dict) else value


def _uses_vllm(value: Any) -> bool:
    """Whether a ``--use_vllm`` value given (a flag's string, a YAML value, None) asks for vLLM, as the parser
    reads it (a value it refuses is refused there)."""
    if isinstance(value, str):
        from transformers.hf_argparser import string_to_bool

        try:
            return string_to_bool(value)
        except Exception:  # noqa: BLE001 - not a boolean: the parser names it in one line
            return False
    return bool(value)


def build_parser(prog: str = "milegpo train", full_help: bool = False):
    from trl import TrlParser

    from ..trainer.config import MileGPOConfig

    parser = TrlParser((JobArguments, MileGPOConfig), prog=prog)
    _credit_method_help(parser)
    arrange_help(parser, prog, full_help)
    return parser


def _credit_method_help(parser) -> None:
    """``--credit_method``'s help lists the methods registered now (one registered after MileGPOConfig was
    defined too: the registry, :mod:`milegpo.credit.registry`, is the list)."""
    from ..credit import METHODS

    for action in parser._actions:
        if action.dest == "credit_method":
            action.help = f"Advantage estimator: {', '.join(METHODS)} (milegpo.credit.METHODS)."


def parse(argv: Sequence[str] | None = None, prog: str = "milegpo train"):
    """(JobArguments, MileGPOConfig) from command-line flags (``--config file.yaml`` works too)."""
    import torch

    argv = list(sys.argv[1:] if argv is None else argv)
    full_help = HELP_ALL in argv
    argv = ["--help" if a == HELP_ALL else a for a in argv]
    parser = build_parser(prog, full_help=full_help or not {"-h", "--help"} & set(argv))
    from ..usage import parser_flags

    # one spelling of every flag from here on: `--model-name-or-path` is `--model_name_or_path` (issue 44)
    argv = canonical_flags(argv, {name for name, _ in parser_flags(parser)})
    argv, config_path = _without_config(argv)
    if config_path is None and "--config" in argv:
        raise UsageError(f"{prog}: error: argument --config: expected one argument (a YAML file)")
    config = read_config(config_path, prog) if config_path is not None else {}
    model_path = _given(argv, config, "model_name_or_path")
    try:
        saved = saved_task_settings(model_path)
    except ValueError as e:
        raise UsageError(f"{prog}: error: {e}") from None
    env = _given(argv, config, "env") or saved.get("env") or "household"
    defaults = env_defaults(env, tiny=model_path is None)
    if saved.get("env", "household") == env:
        # a policy saved by `milegpo train` plays (and goes on training on) the games it was trained on
        defaults.update(saved)
    if defaults.get("constrained_sampling") == "sequence" and _uses_vllm(_given(argv, config, "use_vllm")):
        # vLLM draws token by token: a default's or a saved policy's `sequence` gives way (a `sequence` given is
        # refused); a saved policy's is said, since its own figures were drawn whole
        defaults["constrained_sampling"] = "token"
        if saved.get("constrained_sampling") == "sequence" and _given(argv, config, "constrained_sampling") is None:
            print(f"[milegpo] note: {model_path} was saved drawing each action whole (constrained_sampling "
                  "'sequence'); vLLM draws token by token, so this run does (--constrained_sampling token says so "
                  "and hides this note)", file=sys.stderr, flush=True)
    if not torch.cuda.is_available():  # GRPOConfig defaults to bf16 on an accelerator
        defaults.update(use_cpu=True, bf16=False)
    parser.set_defaults(**defaults)
    options = _given(argv, config, "env_options")
    if options is not None:  # given options merge into the defaults' (the tiny catalog's size stays)
        options = merged_env_options(defaults, options)
        argv = [a for i, a in enumerate(argv) if a != "--env_options" and (i == 0 or argv[i - 1] != "--env_options")
                and not a.startswith("--env_options=")]
        config.pop("env_options", None)
        argv += ["--env_options", options if isinstance(options, str) else json.dumps(options)]
    # the --config values become flags before the command line's (the same checks); a flag given wins, so the
    # file's value of that flag is not read at all
    given = {a.lstrip("-").split("=", 1)[0].replace("-", "_") for a in argv if a.startswith("--")}
    config = {k: v for k, v in config.items() if k not in given or (k == "env" and isinstance(v, dict))}
    tokens = config_flags(config, parser, prog, config_path)
    return parse_flags(parser, tokens + argv, prog, from_config=set(config), config_path=config_path)


__all__ = ["parse", "build_parser", "parse_flags", "check_model_path", "own_flags", "read_config", "config_flags",
           "checkpoint_step", "check_job_arguments", "check_tasks", "check_first_reset", "check_user_anchor", "check_query_goals",
           "check_run_environment", "TRAINER_STATE", "WEIGHT_FILES"]
