"""An output folder belongs to one run (issue 36): an earlier run is refused unless resumed or overwritten, a
second live run is refused by a lock that a crashed run does not leave stuck, a resumed run's log and batches are
cut back to its checkpoint, and batches, log lines and the task file are written whole or not at all."""

import json
import os
import signal
import subprocess
import sys
import time

from pathlib import Path

import numpy as np
import pytest

from milegpo.cli import main
from milegpo.job.rundir import LOCK_FILE, claim_output_dir, truncate_run

from ..usage_errors import one_line_error

#: the checkout these tests run from: the subprocesses import milegpo from it
ROOT = str(Path(__file__).resolve().parents[2])

#: flags of a tiny run that the folder rules refuse before any model is built
FAST = ["--sft_epochs", "0", "--max_steps", "1", "--groups_per_iteration", "2", "--group_size", "2",
        "--num_train_tasks", "4", "--num_eval_tasks", "2"]


def _earlier_run(folder):
    (folder / "batches").mkdir(parents=True)
    for step in range(1, 6):
        (folder / "batches" / f"iter_{step:04d}.npz").write_bytes(b"batch")
    rows = [{"phase": "sft", "step": s, "loss": 1.0} for s in (1, 2)]
    rows += [{"phase": "rl", "step": 0, "eval_id_success_rate": 0.5}]
    rows += [{"phase": "rl", "step": s, "episode/success_rate": 0.1 * s} for s in range(1, 6)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "checkpoint-2").mkdir()
    (folder / "notes.txt").write_text("the user's own file")


def test_a_folder_holding_an_earlier_run_is_refused_in_one_line(capsys, tmp_path):
    run = tmp_path / "run"
    _earlier_run(run)
    before = sorted(p.name for p in run.rglob("*"))
    line = one_line_error(capsys, ["train", "--output_dir", str(run), *FAST])
    assert line == (f"milegpo train: error: --output_dir {run} holds an earlier run (batches, checkpoint-2, "
                    "metrics.jsonl): give another folder, --resume_from_checkpoint <its checkpoint-N> to go on with "
                    "it, or --overwrite_output_dir to replace it")
    assert sorted(p.name for p in run.rglob("*") if p.name != LOCK_FILE) == before  # nothing touched
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 8


def test_a_run_without_warm_start_writes_nothing_before_rl(monkeypatch, tmp_path):
    """--sft_epochs 0: the policy goes to the trainer as loaded, so a run that fails before RL leaves no sft/ behind
    and the next run on the folder is not refused as an earlier run."""
    import milegpo.job.pipeline as pipeline
    from milegpo.usage import RunError

    built = []

    def failing_trainer(policy, tok, cfg, callbacks=()):
        built.append(policy)
        raise RunError("the environment failed")

    monkeypatch.setattr(pipeline, "make_trainer", failing_trainer)
    run = tmp_path / "run"
    assert main(["train", "--output_dir", str(run), *FAST]) == 1
    assert not isinstance(built[0], str)  # the model itself, not a folder written for it
    assert not (run / "sft").exists()
    claim_output_dir(run).release()  # the next run takes the folder


def test_a_folder_with_other_files_only_is_a_new_runs(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    claim_output_dir(tmp_path).release()
    claim_output_dir(tmp_path / "new" / "run").release()  # made, with its parents


def test_overwrite_output_dir_removes_the_earlier_run_whole(tmp_path):
    _earlier_run(tmp_path)
    lock = claim_output_dir(tmp_path, overwrite=True)
    lock.release()
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE, "notes.txt"]  # the user's file stays
    from milegpo.job import parse

    job, _ = parse(["--output_dir", str(tmp_path), "--overwrite_output_dir"])
    assert job.overwrite_output_dir is True


def test_a_second_live_run_is_refused_and_a_killed_one_leaves_no_stuck_lock(capsys, tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from milegpo.job.rundir import claim_output_dir; "
                               f"claim_output_dir({str(run)!r}); print('held', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert holder.stdout.readline().strip() == "held"
        line = one_line_error(capsys, ["train", "--output_dir", str(run), *FAST])
        assert line == (f"milegpo train: error: --output_dir {run}: another milegpo train (pid {holder.pid}) is "
                        "writing to it; wait for it to end or give another folder")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    lock = claim_output_dir(run)  # the kernel dropped the killed run's lock
    try:
        with pytest.raises(ValueError, match="another milegpo train"):  # in this process too
            claim_output_dir(run)
    finally:
        lock.release()
    claim_output_dir(run).release()


def test_resuming_cuts_the_log_and_batches_back_to_the_checkpoint(tmp_path):
    _earlier_run(tmp_path)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"phase": "rl", "step": 6, "episode/succ')  # a torn last line
    assert truncate_run(tmp_path, 2) == {"lines": 4, "batches": 3}
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["phase"], r["step"]) for r in rows] == [("sft", 1), ("sft", 2), ("rl", 0), ("rl", 1), ("rl", 2)]
    assert sorted(p.name for p in (tmp_path / "batches").iterdir()) == ["iter_0001.npz", "iter_0002.npz"]


def test_writes_are_whole_or_absent(tmp_path, monkeypatch):
    from milegpo.credit.synthetic import random_batch
    from milegpo.credit import StepBatch
    from milegpo.files import append_line, atomic_write, write_text

    target = tmp_path / "task.json"
    write_text(target, "old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as f:
            f.write("new, half writ")
            raise RuntimeError("killed")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["task.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes a file, not mkstemp's 0600
    log = tmp_path / "metrics.jsonl"
    append_line(log, '{"step": 1}')
    with open(log, "a") as f:
        f.write('{"step": 2, "lo')  # a writer killed mid-line
    append_line(log, '{"step": 3}')
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 3]
    batch = random_batch(n_groups=2, group_size=2, horizon=3, seed=0)
    path = batch.save(tmp_path / "iter_0001")
    good = path.read_bytes()

    def torn_savez(file, **arrays):
        file.write(b"PK\x03\x04 half a zip")
        raise OSError("No space left on device")

    monkeypatch.setattr(np, "savez_compressed", torn_savez)
    with pytest.raises(OSError, match="No space"):
        batch.save(path)
    assert path.read_bytes() == good and len(StepBatch.load(path)) == len(batch)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_0001.npz", "metrics.jsonl", "task.json"]


SIGKILL_RUN = ["--sft_epochs", "0", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2",
               "--groups_per_iteration", "2", "--group_size", "2", "--horizon", "4", "--num_train_tasks", "4",
               "--num_eval_tasks", "2", "--max_completion_length", "10", "--tiny_hidden", "32", "--plots", "false",
               "--threads", "1"]


@pytest.mark.slow
def test_a_run_killed_mid_way_resumes_from_its_checkpoint_with_every_step_logged_once(tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "milegpo.cli", "train", "--output_dir", str(run), *SIGKILL_RUN]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 600
        while not (run / "checkpoint-4").is_dir() or not (run / "batches" / "iter_0004.npz").exists():
            assert first.poll() is None and time.monotonic() < deadline, "the first run ended before iteration 4"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) >= 4
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 2 and "holds an earlier run" in again.stderr  # no silent mix
    resumed = subprocess.run([*command, "--resume_from_checkpoint", str(run / "checkpoint-2")], capture_output=True,
                             text=True, env=env, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout and "before RL (logged by the run it resumes)" in resumed.stdout
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    iterations = [r["step"] for r in rows if "episode/success_rate" in r]
    assert iterations == [1, 2, 3, 4, 5, 6]  # each step logged once
    assert sum(1 for r in rows if r["step"] == 0 and "eval_id_success_rate" in r) == 1  # evaluated before RL once
    assert sorted(p.name for p in (run / "batches").iterdir()) == [f"iter_{i:04d}.npz" for i in range(1, 7)]
    summary = json.loads((run / "summary.json").read_text())
    assert len(summary["batches"]) == 6 and summary["before"]["id_success_rate"] >= 0
    assert main(["replay", str(run / "batches"), "--rows", "0"]) == 0


def test_a_killed_writes_temporary_files_are_removed_when_the_folder_is_claimed(tmp_path):
    (tmp_path / "batches").mkdir()
    torn = [tmp_path / "batches" / ".iter_0003.npz.k2j4.tmp", tmp_path / ".metrics.jsonl.x1.tmp"]
    for file in torn:
        file.write_bytes(b"half")
    (tmp_path / "metrics.jsonl").write_text('{"phase": "rl", "step": 3}\n')
    claim_output_dir(tmp_path, overwrite=True).release()
    assert not any(file.exists() for file in torn)
