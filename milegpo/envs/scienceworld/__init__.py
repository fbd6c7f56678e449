"""ScienceWorld (Wang et al., 2022) on its own engine as a :class:`~milegpo.envs.TextEnv` (env kind ``"scienceworld"``).

Needs the optional ``scienceworld`` package (``pip install 'milegpo[scienceworld]'``: scienceworld 1.2.3, its engine
bundled as a jar) and a Java runtime (8 or later; ``apt install openjdk-17-jre-headless``). Importing this package
imports neither: the engine starts when the first environment resets.

- :func:`scienceworld_tasks`: the Tasks of the engine's variation splits (``train``, ``dev``, ``test``) of its 30
  task types, or of BEACON's levels (``level="L0" | "L1" | "L2"``), with the engine's simplifications
  (``simplifications="easy"``) (:mod:`.tasks`);
- :class:`ScienceWorldEnv`: plays one (:mod:`.env`): the engine's valid actions as the admissible ones, templates and
  objects for the prompt, done is not won, ``info["milestone"]`` on a step that completed a subgoal, the gold
  expert;
- :mod:`.engine`: one JVM per process (heap capped by ``$MILEGPO_SCIENCEWORLD_HEAP``, default 1g), one
  simulation per environment in it.

    >>> from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks
    >>> task = scienceworld_tasks("train", 1, task_type="find-animal")[0]
    >>> env = ScienceWorldEnv(); obs, actions, info = env.reset(task)
    >>> while not env.done: obs, r, terminated, truncated, info = env.step(env.expert_action())
    >>> env.won, info["score"]
    (True, 1.0)
"""

from .env import ScienceWorldEnv, completed_subgoals, goal_text
from .tasks import (DEFAULT_SCIENCEWORLD_HORIZON, EVAL_SPLITS, LEVELS, SIMPLIFICATIONS, SPLITS, TASK_TYPES,
                    VARIATIONS, scienceworld_tasks)

__all__ = ["ScienceWorldEnv", "scienceworld_tasks", "completed_subgoals", "goal_text", "SPLITS", "EVAL_SPLITS",
           "TASK_TYPES", "VARIATIONS", "LEVELS", "SIMPLIFICATIONS", "DEFAULT_SCIENCEWORLD_HORIZON"]
