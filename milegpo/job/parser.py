"""TRL's argument parser, with ``env:`` in a ``--config`` recipe read as :attr:`MileGPOConfig.env`.

``TrlParser`` reserves the YAML key ``env`` for a mapping of environment variables to set (``env: {VAR: 1}``)
and refuses anything else (``ValueError: `env` field should be a dict``), but ``env`` is also MileGPOConfig's
environment kind, the first line of every recipe (``examples/recipes/*.yaml``). :class:`MileGPOParser` reads
a string ``env`` as the field (a default the command line can override, like every other key of the file)
and leaves a mapping to TRL, which sets the variables as before. The example scripts use it; ``milegpo train``
reads its ``--config`` file itself, the same way (:func:`milegpo.job.flags.read_config`).

    >>> parser = MileGPOParser((ScriptArguments, MileGPOConfig))
    >>> script_args, cfg = parser.parse_args_and_config(["--config", "examples/recipes/webshop/gigpo.yaml"])
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

from trl import TrlParser


class MileGPOParser(TrlParser):
    """``TrlParser`` whose ``--config`` file may name the environment kind (``env: alfworld``)."""

    def parse_args_and_config(self, args: Iterable[str] | None = None, return_remaining_strings: bool = False,
                              fail_with_unknown_args: bool = True, separate_remaining_strings: bool = False):
        """As ``TrlParser.parse_args_and_config``; a ``--config`` file whose ``env`` is a string gives its keys
        as defaults itself (so TRL never sees that ``env``), with TRL's handling of keys no field takes. The file is
        read by :func:`~milegpo.job.flags.read_config` first, whatever its ``env``: a key given twice (which
        ``yaml.safe_load``, TRL's reader, settles silently by keeping the last) or a syntax error is a
        :class:`~milegpo.usage.UsageError` (a ``ValueError``) naming the file and the key."""
        from .flags import read_config

        args = list(sys.argv[1:] if args is None else args)
        if "--config" not in args or args.index("--config") + 1 >= len(args):
            return super().parse_args_and_config(args, return_remaining_strings, fail_with_unknown_args,
                                                 separate_remaining_strings)
        at = args.index("--config")
        config = read_config(args[at + 1], prog=Path(sys.argv[0]).name or "milegpo")
        if not (isinstance(config, dict) and isinstance(config.get("env"), str)):
            return super().parse_args_and_config(args, return_remaining_strings, fail_with_unknown_args,
                                                 separate_remaining_strings)
        del args[at:at + 2]
        config_remaining = self.set_defaults_with_config(**config)
        output = super().parse_args_and_config(args, return_remaining_strings=True)
        args_remaining = output[-1]
        if return_remaining_strings:
            if separate_remaining_strings:
                return output[:-1] + (config_remaining, args_remaining)
            return output[:-1] + (config_remaining + args_remaining,)
        if fail_with_unknown_args and config_remaining:
            raise ValueError(f"Unknown arguments from config file: {config_remaining}. Please remove them, add them "
                             "to the dataclass, or set `fail_with_unknown_args=False`.")
        if args_remaining:  # what parse_args_into_dataclasses does with unknown command-line flags
            raise ValueError(f"Some specified arguments are not used by the HfArgumentParser: {args_remaining}")
        return output[:-1]


__all__ = ["MileGPOParser"]
