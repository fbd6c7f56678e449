"""Command-line mistakes as one line: :class:`UsageError`, the closest flag to a mistyped one, a parser that
raises instead of printing its usage.

``milegpo`` ends every usage mistake (an unknown flag, a bad value, a model path that is not there) with one
line on stderr and exit status 2, never a traceback or a screen of usage: the parsers raise
:class:`UsageError`, :func:`milegpo.cli.main` prints it. :func:`closest_flag` suggests the flag a mistyped one
meant, by the flag names and the words of their help (``--iteratons`` -> ``--max_steps``, "Training
iterations").

This module imports nothing heavy: the ``milegpo`` command imports it before anything else.
"""

from __future__ import annotations

import argparse
import difflib
import re
from typing import Collection, Iterable

#: a mistyped flag whose similarity to a flag's name (difflib's ratio, 0..1) reaches this is a typo of that name
NAME_CUTOFF = 0.85
#: else a flag is suggested only when its name and help words match the typed one this well (:func:`word_match`)
SUGGEST_CUTOFF = 0.6
_WORD = re.compile(r"[a-z][a-z0-9]+")


class UsageError(ValueError):
    """A command-line mistake; its message is the one line ``milegpo`` prints before exiting with status 2."""


class RunError(RuntimeError):
    """A run that cannot go on for a reason its message says in one line (a user's state anchor that raised at a
    step, an admissible action the policy's tokenizer cannot spell): ``milegpo`` prints it and exits 1, no
    traceback. Where it can be told before any model is built, the flags refuse it instead (:class:`UsageError`)."""


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _flag_words(name: str, help_text: str) -> list[str]:
    return name.split("_") + _WORD.findall(help_text.lower())


def word_match(typed: str, name: str, help_text: str) -> tuple[float, int]:
    """How well the words of the mistyped flag ``typed`` match the words of flag ``name`` and of its help
    ``help_text``: (the mean over the typed words of their best difflib similarity to a word of the name or
    the help, in [0, 1]; the sum of those best words' positions, name first: a word early in the help says
    what the flag is, a late one what it is about). ``iteratons`` matches ``max_steps``, "Training iterations"."""
    words = _flag_words(name, help_text)
    typed_words = [w for w in typed.split("_") if w]
    if not typed_words or not words:
        return 0.0, 0
    total, positions = 0.0, 0
    for typed_word in typed_words:
        similarity, position = max((_similarity(typed_word, w), -i) for i, w in enumerate(words))
        total, positions = total + similarity, positions - position
    return total / len(typed_words), positions


def closest_flag(typed: str, flags: Iterable[tuple[str, str]], own: Collection[str] = ()) -> str | None:
    """The flag name of ``flags`` ((name, help) pairs) that the mistyped ``typed`` most likely meant, or None.

    A typo of a name comes first: the name most similar to ``typed`` (difflib's ratio, 2 decimals) when it
    reaches :data:`NAME_CUTOFF`. Else the flag whose name and help words match best (:func:`word_match`) when
    that reaches :data:`SUGGEST_CUTOFF`. Ties go to a name in ``own`` (the program's own flags rather than
    those it inherits), then to the earlier-placed words, then to the earlier flag."""
    typed = typed.lower().replace("-", "_")
    flags = list(flags)
    by_name = [round(_similarity(typed, name), 2) for name, _ in flags]
    if not flags:
        return None
    best_by_name = max(range(len(flags)), key=lambda i: (by_name[i], flags[i][0] in own, -i))
    if by_name[best_by_name] >= NAME_CUTOFF:
        return flags[best_by_name][0]
    ranked = []
    for i, (name, help_text) in enumerate(flags):
        match, positions = word_match(typed, name, help_text)
        ranked.append(((max(round(match, 2), by_name[i]), name in own, -positions, by_name[i], -i), name))
    key, name = max(ranked)
    return name if key[0] >= SUGGEST_CUTOFF else None


def parser_flags(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(name, help) of every ``--flag`` of ``parser`` (names without dashes, each once)."""
    out, seen = [], set()
    for action in parser._actions:  # argparse keeps no public list of its actions
        for option in action.option_strings:
            name = option.lstrip("-").replace("-", "_")
            if option.startswith("--") and name not in seen:
                seen.add(name)
                out.append((name, action.help if isinstance(action.help, str) else ""))
    return out


def unknown_arguments(prog: str, extras: list[str], parser: argparse.ArgumentParser,
                      own: Collection[str] = ()) -> UsageError:
    """The one-line error for the arguments ``extras`` that ``parser`` did not take, with the closest flag to
    the first unknown one."""
    flags = [a for a in extras if a.startswith("-")]
    if not flags:
        return UsageError(f"{prog}: error: unexpected argument(s) {' '.join(extras)} (see {prog} --help)")
    typed = flags[0].split("=", 1)[0]
    known = parser_flags(parser)
    guess = closest_flag(typed.lstrip("-"), known, own)
    hint = ""
    if guess is not None:
        first_sentence = dict(known)[guess].split(". ")[0].strip().rstrip(".")
        hint = f"; did you mean --{guess}" + (f" ({first_sentence[:70]})" if first_sentence else "") + "?"
    more = f" (and {', '.join(flags[1:])})" if len(flags) > 1 else ""
    return UsageError(f"{prog}: error: unknown flag {typed}{more}{hint} ({prog} --help lists them)")


def check_writable(path, flag: str, kind: str = "dir") -> None:
    """Refuse, before any work starts, an output path the command could not write: ``kind`` ``"dir"`` (a folder
    that is made if missing) that is a regular file, ``"file"`` that is a folder, or a path whose nearest existing
    folder (itself, or the closest parent) is not writable (a temporary file cannot be made there). A :class:`UsageError` naming ``flag`` and the path."""
    import os
    from pathlib import Path

    target = Path(os.path.expanduser(str(path)))
    if kind == "dir" and target.exists() and not target.is_dir():
        raise UsageError(f"{flag} {path}: a file, not a folder")
    if kind == "file" and target.is_dir():
        raise UsageError(f"{flag} {path}: a folder, not a file")
    existing = target if target.is_dir() else target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a folder")
    import tempfile

    try:  # a file made and removed: os.access says yes to root even where the file system is read-only
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {path}: {existing} is not writable ({e.strerror or e})") from None
    if kind == "file" and target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{flag} {path}: the file is not writable")


def check_range(flag: str, value, low=None, high=None, low_open: bool = False, high_open: bool = False) -> None:
    """Refuse ``value`` of ``flag`` outside [low, high] (``low_open`` / ``high_open``: the end excluded; None: no
    end) with a one-line :class:`UsageError` that names the flag, the value and the range."""
    import math

    bad = isinstance(value, float) and math.isnan(value)
    if low is not None:
        bad = bad or (value <= low if low_open else value < low)
    if high is not None:
        bad = bad or (value >= high if high_open else value > high)
    if bad:
        def number(end) -> str:
            return f"{end:g}" if isinstance(end, float) else str(end)

        ends = []
        if low is not None:
            ends.append(f"{'>' if low_open else '>='} {number(low)}")
        if high is not None:
            ends.append(f"{'<' if high_open else '<='} {number(high)}")
        raise UsageError(f"{flag} {value!r}: must be {' and '.join(ends)}")


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` whose errors raise :class:`UsageError` (one line) instead of printing the
    usage and exiting; an unknown flag comes with the closest known one."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")

    def add_argument(self, *args, **kwargs):
        """As argparse's, with every ``--x-y`` flag also taken as ``--x_y`` (and ``--x_y`` as ``--x-y``), as
        ``milegpo train`` takes both (issue 44: ``credit-quality --env_options`` was an unknown flag whose closest
        flag was "--env_options")."""
        names = list(args)
        for name in args:
            body = name[2:] if isinstance(name, str) and name.startswith("--") else ""
            if "-" in body or "_" in body:
                other = "--" + (body.replace("-", "_") if "-" in body else body.replace("_", "-"))
                if other not in names:
                    names.append(other)
        return super().add_argument(*names, **kwargs)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            raise unknown_arguments(f"{self.prog} {command}" if command else self.prog, extras,
                                    self._subparser(command) or self)
        return parsed

    def _subparser(self, command: str | None) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                return action.choices[command]
        return None


#: a dotted path to an object: ``"package.module:name"`` (the name may be dotted, ``"module:Class.attr"``) or
#: ``"package.module.name"``
DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?$")


def resolve_dotted(path: str):
    """The object a dotted path names (:func:`pkgutil.resolve_name`, which imports what it must). A path of another
    form (a bare module, a relative path), a module that is missing or raises while it is imported, or a name
    the module lacks is a ValueError, one line saying which (the caller names what the path was for)."""
    import pkgutil

    if not isinstance(path, str) or not DOTTED_PATH.match(path) or (":" not in path and "." not in path):
        relative = " (a relative path names no package)" if isinstance(path, str) and path.startswith(".") else ""
        raise ValueError(f"not a dotted path{relative}")
    try:
        return pkgutil.resolve_name(path)
    except ModuleNotFoundError as e:
        raise ValueError(f"cannot import it (no module named {e.name!r})") from None
    except AttributeError as e:
        raise ValueError(str(e).splitlines()[0]) from None
    except Exception as e:  # noqa: BLE001 - a module may raise anything while it is imported
        raise ValueError(f"cannot import it ({type(e).__name__}{': ' + str(e).splitlines()[0] if str(e) else ''})"
                         ) from None


__all__ = ["UsageError", "RunError", "OneLineParser", "check_writable", "check_range", "closest_flag", "word_match",
           "parser_flags", "unknown_arguments", "resolve_dotted", "DOTTED_PATH", "NAME_CUTOFF", "SUGGEST_CUTOFF"]
