"""MileGPOTrainer.close: the trainer stops the workers of the pool it made, and leaves a pool passed in open."""

import torch

from milegpo.envs import EnvPool
from milegpo.trainer import MileGPOTrainer
from test_trainer import make_args, tasks

torch.set_num_threads(1)


def test_close_stops_the_workers_of_the_trainers_own_pool(tmp_path, warm_checkpoint):
    train, evals = tasks()
    trainer = MileGPOTrainer(warm_checkpoint, args=make_args(tmp_path, num_env_workers=2), train_tasks=train,
                             eval_tasks=evals)
    pool = trainer.runner.pool
    assert isinstance(pool, EnvPool) and all(p.is_alive() for p in pool._procs)
    trainer.close()
    # each worker read "close" and exited by itself (a killed one has a negative exit code)
    assert [p.exitcode for p in pool._procs] == [0, 0]
    trainer.close()  # twice is fine


def test_close_leaves_a_pool_passed_in_open(tmp_path, warm_checkpoint):
    train, evals = tasks()
    with EnvPool(8, num_workers=1) as pool:
        trainer = MileGPOTrainer(warm_checkpoint, args=make_args(tmp_path), train_tasks=train, eval_tasks=evals,
                                 pool=pool)
        trainer.close()
        assert pool._procs[0].is_alive()
        assert len(trainer.play(evals["id"][:1], 2).episodes) == 2  # the caller's pool still plays
