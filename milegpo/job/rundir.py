"""An output folder belongs to one run.

:func:`claim_output_dir` is the first thing ``milegpo train`` does with ``--output_dir``, before any model is
built:

- a second live run on the same folder is refused: the run holds an exclusive ``fcntl.flock`` on
  ``<output_dir>/.milegpo.lock`` while it lives (the kernel drops it when the process ends, however it ends,
  so a crashed run leaves nothing stuck; ``filelock`` 4 falls back to a marker file a crash would leave);
- a folder that holds an earlier run (:data:`RUN_ENTRIES`) is refused, unless the run resumes
  (``--resume_from_checkpoint``: the log and the saved batches are cut back to the checkpoint's step,
  :func:`truncate_run`, so every step is logged once) or ``--overwrite_output_dir`` is given (the earlier run's
  entries are removed whole first, never mixed with the new ones, and so are its model card ``README.md`` and
  TensorBoard ``runs/``, :func:`stale_outputs`). Other files in the folder are left alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from pathlib import Path

from ..files import atomic_write
from ..usage import UsageError
from .console import METRICS_FILE

#: the lock file of a live run (its pid inside, for the message of a refused second run)
LOCK_FILE = ".milegpo.lock"
#: what a run writes into its output folder: a folder holding any of these holds a run
RUN_ENTRIES = (METRICS_FILE, "summary.json", "batches", "final", "sft", "plots")
CHECKPOINT = re.compile(r"^checkpoint-\d+$")
BATCH = re.compile(r"^iter_(\d+)\.npz$")

_held: dict[str, "RunLock"] = {}  # the folders this process holds: a second claim in-process is refused too


class RunLock:
    """The exclusive hold of a run on its output folder; :meth:`release` (or the process's end) lets it go."""

    def __init__(self, folder: Path, handle):
        self.folder = folder
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            _held.pop(str(self.folder), None)
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def _lock(folder: Path) -> RunLock:
    key = str(folder.resolve())
    handle = open(folder / LOCK_FILE, "a+")
    try:
        if key in _held:
            raise BlockingIOError
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip()
        handle.close()
        raise UsageError(f"--output_dir {folder}: another milegpo train{f' (pid {owner})' if owner else ''} is "
                         "writing to it; wait for it to end or give another folder") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    lock = RunLock(Path(key), handle)
    _held[key] = lock
    return lock


#: what else a run leaves in its output folder, removed with its entries by ``--overwrite_output_dir`` when it is
#: the run's (:func:`stale_outputs`): TRL's model card (``README.md``, written beside every checkpoint) and
#: TensorBoard's event files (``runs/``, transformers' default ``logging_dir``)
STALE_OUTPUTS = ("README.md", "runs")


def stale_outputs(folder: Path) -> list[str]:
    """The entries of :data:`STALE_OUTPUTS` in ``folder`` that a run wrote: ``README.md`` when it is a model card
    of a trainer (its tags say ``generated_from_trainer``), ``runs`` when it holds TensorBoard event files only. A
    user's own README or ``runs`` folder is not one of them."""
    out = []
    card = folder / "README.md"
    if card.is_file() and not card.is_symlink():
        try:
            if "generated_from_trainer" in card.read_text(errors="replace")[:4000]:
                out.append("README.md")
        except OSError:
            pass
    runs = folder / "runs"
    if runs.is_dir() and not runs.is_symlink():
        files = [p for p in runs.rglob("*") if p.is_file()]
        if files and all(p.name.startswith("events.out.tfevents") for p in files):
            out.append("runs")
    return out


def run_entries(folder: Path) -> list[str]:
    """The entries of ``folder`` that an earlier run wrote (:data:`RUN_ENTRIES` and its ``checkpoint-N``)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name in RUN_ENTRIES or CHECKPOINT.match(p.name))


def claim_output_dir(output_dir, resume_from_checkpoint: str | None = None, overwrite: bool = False) -> RunLock:
    """Make ``output_dir`` this run's (see the module docstring); returns its :class:`RunLock`. A folder held by a
    live run, or holding an earlier run without ``resume_from_checkpoint`` or ``overwrite``, is a one-line
    :class:`~milegpo.usage.UsageError`."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    lock = _lock(folder)
    try:
        earlier = run_entries(folder)
        if earlier and resume_from_checkpoint:
            from .flags import checkpoint_step

            truncate_run(folder, checkpoint_step(resume_from_checkpoint))
        elif earlier and overwrite:
            for name in earlier + stale_outputs(folder):
                path = folder / name
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        elif earlier:
            raise UsageError(f"--output_dir {folder} holds an earlier run ({', '.join(earlier)}): give another "
                             "folder, --resume_from_checkpoint <its checkpoint-N> to go on with it, or "
                             "--overwrite_output_dir to replace it")
        _remove_torn_writes(folder)
    except BaseException:
        lock.release()
        raise
    return lock


def _remove_torn_writes(folder: Path) -> None:
    """Remove the temporary files of :func:`milegpo.files.atomic_write` that a killed run left (never renamed:
    a torn write) in the folder and its batches."""
    for directory in (folder, folder / "batches", folder / "final"):
        if directory.is_dir():
            for temporary in directory.glob(".*.tmp"):
                temporary.unlink(missing_ok=True)


def truncate_run(folder: Path, step: int) -> dict[str, int]:
    """Cut the run in ``folder`` back to training step ``step`` (a checkpoint's): the RL lines of ``metrics.jsonl``
    logged after it (and a torn last line) are dropped, the warm start's kept; the saved batches
    ``batches/iter_N.npz`` with N > step are removed. Returns how many lines and batches were dropped."""
    dropped = {"lines": 0, "batches": 0}
    log = folder / METRICS_FILE
    if log.exists():
        kept = []
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                dropped["lines"] += 1
                continue
            if isinstance(row, dict) and row.get("phase") == "rl" and row.get("step", 0) > step:
                dropped["lines"] += 1
                continue
            kept.append(line)
        with atomic_write(log) as f:
            f.write("".join(line + "\n" for line in kept))
    batches = folder / "batches"
    if batches.is_dir():
        for file in batches.iterdir():
            match = BATCH.match(file.name)
            if match and int(match.group(1)) > step:
                file.unlink()
                dropped["batches"] += 1
    return dropped


def logged_evaluation_before(folder: Path) -> dict | None:
    """The evaluation a run logged before its first iteration (the RL line at step 0 with ``eval_`` metrics), or
    None: a resumed run reports it instead of evaluating again."""
    log = folder / METRICS_FILE
    if not log.exists():
        return None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("phase") == "rl" and row.get("step") == 0 and \
                any(k.startswith("eval_") for k in row):
            return row
    return None


__all__ = ["STALE_OUTPUTS", "stale_outputs", "claim_output_dir", "truncate_run", "run_entries", "logged_evaluation_before", "RunLock", "LOCK_FILE",
           "RUN_ENTRIES"]
