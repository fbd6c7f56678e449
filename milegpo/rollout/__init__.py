"""Rollouts of text-game agents: the step prompt (``prompt.py``), action parsing (``parse.py``), the batched
episode loop (``loop.py``) and the task sets of a run (``tasks.py``).

>>> from milegpo.rollout import EpisodeRunner, render_prompt, parse_action
>>> rollout = EpisodeRunner(history_length=2).run(tasks, group_size=8, generate=fn)
>>> rollout.step_batch()   # the credit module's StepBatch, one row per step
"""

from .loop import Episode, EpisodeRunner, GenerateFn, Rollout, StepRow, episode_metrics, final_score
from .parse import ParsedAction, parse_action
from .prompt import TEMPLATE, as_model_input, render_prompt
from .tasks import make_tasks

__all__ = ["Episode", "EpisodeRunner", "GenerateFn", "Rollout", "StepRow", "episode_metrics", "final_score",
           "ParsedAction", "parse_action", "TEMPLATE", "as_model_input", "render_prompt", "make_tasks"]
