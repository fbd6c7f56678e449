"""One training iteration on ALFWorld generated games, split into generation / environment / credit / training,
at 0, 1 and 2 pool workers with the overlap of generation and environment steps on and off.

Each setting builds a :class:`~milegpo.trainer.MileGPOTrainer` of the tiny policy (``milegpo.job.policy``, a
2-layer Qwen2 built from a config, untrained: it samples ``max_completion_length`` tokens every step) on one
generated game (``GROUP_SIZE`` episodes of ``HORIZON`` steps, ``rollout_parts=2``) and times one iteration
(``trainer.train()`` with ``max_steps=1``): the step's wall time, the rollout's ``generate_s`` and ``env_s``
(the time the loop waited on the pool: resets, and the steps generation did not hide), the trainer's
``time/credit_s``, and training = the rest (chunk building, forward, backward, optimizer step). The pool's
slots first play another game, so that each iteration's resets load their game, as a new iteration's tasks do.

Every setting gives the same rollout (asserted: same rows, actions, rewards, state keys): the trainer's seed
fixes the sampling and the runner's parts fix the generation batches. Recorded (``extra_info`` and the
ratio table): per setting ``wall_s``, ``generate_s``, ``env_s``, ``reset_s``, ``credit_s``, ``train_s``, the
main process's CPU seconds and each worker's, and the load average; across settings (in the last one):

- ``env_0w_over_2w``: environment time without workers / with 2 (overlap off): the pool's speed-up;
- ``env_cpu_0w_over_2w_critical``: the same from CPU time: the CPU seconds the in-process run spent inside
  the pool's calls (the environments' own work) over the busiest worker's (what the wall ratio would be
  if each worker had a core of its own, whatever the machine's load);
- ``hidden_share_<w>w``: (wall off - wall on) / min(generation, environment steps) with w workers: how much
  of the shorter of the two the overlap hid (1 = all of it; resets come before a wave's first generation,
  so they are not counted);
- ``wall_0w_off_over_2w_on``: the whole iteration, default before this change over default after.

Games: ``$ALFWORLD_DATA`` when it holds two or more train games, else two written into a temporary folder
(``milegpo.envs.alfworld.generate``, as ``milegpo generate-games alfworld DIR --train 2`` does; ~1 min).
"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("alfworld")

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from milegpo.trainer.config import MileGPOConfig  # noqa: E402
from milegpo.envs import EnvError  # noqa: E402
from milegpo.envs.alfworld import alfworld_tasks, generate  # noqa: E402
from milegpo.envs.pool import EnvPool, SequentialPool  # noqa: E402
from milegpo.job.policy import make_model, make_tokenizer  # noqa: E402
from milegpo.trainer import MileGPOTrainer  # noqa: E402

GROUP_SIZE = 4
HORIZON = 15
COMPLETION_TOKENS = 24
#: (workers, overlap); the last one computes the cross-setting ratios
SETTINGS = [(0, False), (0, True), (1, False), (1, True), (2, False), (2, True)]
_RESULTS: dict[tuple[int, bool], dict] = {}


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    try:
        tasks = alfworld_tasks("train", n=2)
    except EnvError:
        tasks = []
    if len(tasks) < 2:
        root = tmp_path_factory.mktemp("alfworld")
        generate(root, 2, seed=1, split="train", task_types=["pick_and_place_simple"])
        tasks = alfworld_tasks("train", n=2, data_dir=root)
    return tasks


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    tok = make_tokenizer()
    path = str(tmp_path_factory.mktemp("tiny-policy"))
    make_model(tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path, tok


class _CpuTimed:
    """A pool that adds up the CPU seconds its caller spends in it (in-process: the environments' own)."""

    env_cpu_s = 0.0

    def _timed(self, call, *args):
        c0 = time.process_time()
        try:
            return call(*args)
        finally:
            self.env_cpu_s += time.process_time() - c0

    def _send(self, *args):
        return self._timed(super()._send, *args)

    def _collect(self, *args):
        return self._timed(super()._collect, *args)


class _TimedSequentialPool(_CpuTimed, SequentialPool):
    pass


class _TimedEnvPool(_CpuTimed, EnvPool):
    pass


class _StepTimer(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def on_step_end(self, args, state, control, **kw):
        self.wall, self.cpu = time.perf_counter() - self.t0, time.process_time() - self.c0


def _trainer(policy, task, pool, overlap: bool, out_dir: str):
    path, tok = policy
    args = MileGPOConfig(output_dir=out_dir, report_to="none", bf16=False, use_cpu=True, max_steps=1, seed=0,
                         env="alfworld", groups_per_iteration=1, group_size=GROUP_SIZE, horizon=HORIZON,
                         num_train_tasks=1, num_eval_tasks=0, max_completion_length=COMPLETION_TOKENS,
                         per_device_train_batch_size=GROUP_SIZE * HORIZON, temperature=1.0, logging_steps=1,
                         save_strategy="no", dataloader_num_workers=0, gradient_checkpointing=False,
                         rollout_parts=2)
    timer = _StepTimer()
    trainer = MileGPOTrainer(path, args=args, processing_class=tok, train_tasks=[task], eval_tasks={}, pool=pool,
                             callbacks=[timer])
    trainer.runner.overlap = overlap
    return trainer, timer


def _rollout_signature(rollout):
    return [(r.traj, r.t, r.state, r.next_state, r.reward, r.invalid, r.action, tuple(r.completion_ids))
            for r in rollout.rows]


@pytest.mark.parametrize("workers, overlap", SETTINGS, ids=[f"{w}w-{'on' if o else 'off'}" for w, o in SETTINGS])
def test_alfworld_iteration_split(benchmark, record_ratio, cpu_s, games, policy, tmp_path, workers, overlap):
    torch.set_num_threads(1)  # the policy on one core; the other is the workers'
    warm_task, task = games
    pool = _TimedSequentialPool(GROUP_SIZE) if workers == 0 else _TimedEnvPool(
        GROUP_SIZE, workers, step_timeout=600, reset_timeout=900)
    try:
        pool.reset_group(warm_task, GROUP_SIZE)  # engine imported, another game loaded in every slot
        trainer, timer = _trainer(policy, task, pool, overlap, str(tmp_path / "out"))
        pids = pool.pids if workers else []
        worker_cpu0 = [cpu_s(p) for p in pids]
        pool.env_cpu_s = 0.0
        load_before = os.getloadavg()[0]
        benchmark.pedantic(trainer.train, rounds=1, iterations=1)
        worker_cpu = [cpu_s(p) - c for p, c in zip(pids, worker_cpu0)]
    finally:
        pool.close()
    rollout = trainer.last_iteration["rollout"]
    log = next(h for h in trainer.state.log_history if "time/credit_s" in h)
    rollout_s, credit_s = log["time/rollout_s"], log["time/credit_s"]
    res = {"wall_s": timer.wall, "generate_s": rollout.generate_s, "env_s": rollout.env_s,
           "reset_s": rollout.reset_s, "credit_s": credit_s, "train_s": timer.wall - rollout_s - credit_s,
           "main_cpu_s": timer.cpu, "pool_call_cpu_s": pool.env_cpu_s, "worker_cpu_s": worker_cpu,
           "load_before": load_before,
           "load_after": os.getloadavg()[0], "rows": len(rollout.rows), "generate_calls": rollout.generate_calls,
           "signature": _rollout_signature(rollout)}
    first = next(iter(_RESULTS.values()), None)
    if first is not None:  # the same iteration in every setting
        assert res["signature"] == first["signature"], f"{workers} workers, overlap {overlap}: another rollout"
    _RESULTS[(workers, overlap)] = res
    benchmark.extra_info.update(workers=workers, overlap=overlap, group_size=GROUP_SIZE, horizon=HORIZON,
                                **{k: v for k, v in res.items() if k != "signature"})
    for k in ("wall_s", "generate_s", "env_s", "reset_s", "credit_s", "train_s", "main_cpu_s", "pool_call_cpu_s",
              "load_before"):
        record_ratio(benchmark, k, res[k])
    if workers:
        record_ratio(benchmark, "busiest_worker_cpu_s", max(worker_cpu))
    if (workers, overlap) != SETTINGS[-1] or len(_RESULTS) < len(SETTINGS):
        return
    r = _RESULTS
    record_ratio(benchmark, "env_0w_over_2w", r[0, False]["env_s"] / r[2, False]["env_s"])
    record_ratio(benchmark, "reset_0w_over_2w", r[0, False]["reset_s"] / r[2, False]["reset_s"])
    # CPU: the environments' CPU seconds in-process (spent inside the pool's calls) over the busiest worker's
    record_ratio(benchmark, "env_cpu_0w_over_2w_critical",
                 r[0, False]["pool_call_cpu_s"] / max(r[2, False]["worker_cpu_s"]))
    for w in (1, 2):
        off, on = r[w, False], r[w, True]
        # resets come before a wave's first generation: only the steps can hide behind generation
        shorter = min(off["generate_s"], off["env_s"] - off["reset_s"])
        record_ratio(benchmark, f"hidden_share_{w}w", (off["wall_s"] - on["wall_s"]) / shorter)
    record_ratio(benchmark, "wall_0w_off_over_2w_on", r[0, False]["wall_s"] / r[2, True]["wall_s"])
