#!/usr/bin/env bash
# The text-game engines behind milegpo.envs: TextWorld and ALFWorld 0.4.2, lean.
# `pip install alfworld` would also pull spacy (126 MB) through jericho; nothing here
# imports it, so the engines are installed without their declared dependencies and
# the few that are used are added by name. jericho and fast-downward-textworld build
# from source (cmake, g++, make): about 2-5 minutes the first time, seconds from pip's cache.
set -euo pipefail
pip install --no-deps alfworld==0.4.2 textworld==1.7.0 fast-downward-textworld==20.6.4 jericho==3.3.1 tatsu==5.8.3
pip install numpy tqdm networkx more_itertools hashids mementos termcolor prompt_toolkit wcwidth pyyaml
