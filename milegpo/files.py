"""Files written whole or not at all: a crash (SIGKILL, a full disk, a power cut) leaves the old file or the new
one, never a torn one. :func:`atomic_write` writes a temporary file beside the target and renames it over the
target (``os.replace``: atomic on POSIX within one file system); :func:`append_line` appends one line to a
JSON-lines log the same way, so a reader never sees half a line.

This module imports nothing heavy (the StepBatch, the job and the environments use it).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: the permissions of a file made here (mkstemp makes 0600; a file the run writes is as open() would make it)
_FILE_MODE = 0o666 & ~_umask()

@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); when the block ends
    without an exception it is flushed, synced and renamed over ``path``; else it is removed and ``path`` is
    left as it was."""
    target = Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """``path`` holds ``text``, written whole (:func:`atomic_write`)."""
    with atomic_write(path) as f:
        f.write(text)
    return Path(path)


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append ``line`` (a newline is added) to the text file ``path``: the file with the line is written beside it
    and renamed over it, so the file holds the line whole or not at all (the log of a run is small: a few MB)."""
    target = Path(path)
    old = target.read_bytes() if target.exists() else b""
    if old and not old.endswith(b"\n"):  # a torn last line of a writer that was not this one: dropped
        old = old[: old.rfind(b"\n") + 1]
    with atomic_write(target, "wb") as f:
        f.write(old + line.rstrip("\n").encode("utf-8") + b"\n")


__all__ = ["atomic_write", "write_text", "append_line"]
