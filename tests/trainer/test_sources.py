"""The rollout sources (milegpo.trainer.sources): a script that builds the trainer at its top level, without
``if __name__ == "__main__":``, while the environment pool needs worker processes, is refused in one line
before any worker starts (each worker would import the script again and build the trainer again)."""

import runpy
import textwrap

import pytest

from milegpo.trainer.sources import MainGuardError

SETUP = """
from milegpo.trainer.config import MileGPOConfig
from milegpo.trainer.sources import WorldSource

args = MileGPOConfig(output_dir={out!r}, report_to="none", num_env_workers={workers}, groups_per_iteration=2,
                     group_size=2, num_train_tasks=2, num_eval_tasks=0)
"""


def _script(tmp_path, body: str, workers: int = 1):
    path = tmp_path / "train.py"
    path.write_text(SETUP.format(out=str(tmp_path / "out"), workers=workers) + textwrap.dedent(body))
    return str(path)


@pytest.mark.parametrize("body", ["source = WorldSource(args)\n",
                                  "def main():\n    return WorldSource(args)\n\n\nsource = main()\n"])
def test_a_script_without_main_guard_is_refused_in_one_line(tmp_path, body):
    path = _script(tmp_path, body)
    with pytest.raises(MainGuardError) as info:
        runpy.run_path(path, run_name="__main__")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}:")
    assert ("builds the trainer at the script's top level, and its environment pool starts 1 worker process(es) by "
            "importing the script again: put the script's code under `if __name__ == \"__main__\":` (or set "
            "num_env_workers=0: no workers)") in message


@pytest.mark.parametrize("body, workers", [
    ("if __name__ == '__main__':\n    source = WorldSource(args)\n", 1),
    ("def main():\n    return WorldSource(args)\n\n\nif '__main__' == __name__:\n    main()\n", 1),
    ("import os\n\nif __name__ == '__main__' and os.sep:\n    try:\n        WorldSource(args)\n    finally:\n"
     "        pass\n", 1),
    ("source = WorldSource(args)\n", 0),  # no workers: nothing imports the script again
])
def test_a_guarded_script_or_no_workers_passes(tmp_path, body, workers):
    runpy.run_path(_script(tmp_path, body, workers), run_name="__main__")
