"""Train an LLM agent on WebShop with MileGPO credit assignment: ``examples/train_alfworld.py`` with WebShop's
defaults (``milegpo.job.ENV_DEFAULTS["webshop"]``: its credit preset, paper table 5; verl-agent's WebShop prompt;
horizon 30; the ``test`` split evaluated).

    # one process; the embedded 3,000-product catalog unless WEBSHOP_DATA names WebShop's files
    python examples/train_webshop.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --output_dir runs/webshop

    # the paper's recipe (README.md, "Reproduce the paper"), on the paper's 2 GPUs
    accelerate launch --config_file examples/accelerate/2gpu.yaml examples/train_webshop.py \
        --config examples/recipes/webshop/milegpo_full.yaml --output_dir runs/webshop_milegpo_full

Every MileGPOConfig / GRPOConfig field is a flag (``--help``); ``--config recipe.yaml`` reads them from a file.
"""

from typing import Sequence

import train_alfworld  # the script beside this one (its folder is on sys.path)

from milegpo.job import env_defaults

#: the WebShop defaults this script starts from (a --config recipe and flags given win over them)
WEBSHOP_DEFAULTS = {"env": "webshop", **env_defaults("webshop", tiny=False)}


def parse_args(argv: Sequence[str] | None = None):
    """(ScriptArguments, MileGPOConfig) of the command line ``argv`` (default ``sys.argv[1:]``) on WebShop's
    defaults."""
    return train_alfworld.parse_args(argv, WEBSHOP_DEFAULTS)


def main(argv: Sequence[str] | None = None) -> None:
    train_alfworld.main(argv, WEBSHOP_DEFAULTS)


if __name__ == "__main__":
    main()
