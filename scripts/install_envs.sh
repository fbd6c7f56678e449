#!/usr/bin/env bash
# The text-game engines behind milegpo.envs: TextWorld and ALFWorld 0.4.2, lean; ScienceWorld 1.2.3.
# `pip install alfworld` would also pull spacy (126 MB) through jericho; nothing here
# imports it, so the engines are installed without their declared dependencies and
# the few that are used are added by name. jericho and fast-downward-textworld build
# from source (cmake, g++, make): about 2-5 minutes the first time, seconds from pip's cache.
set -euo pipefail
pip install --no-deps alfworld==0.4.2 textworld==1.7.0 fast-downward-textworld==20.6.4 jericho==3.3.1 tatsu==5.8.3
pip install numpy tqdm networkx more_itertools hashids mementos termcolor prompt_toolkit wcwidth pyyaml
# ScienceWorld: the package bundles its engine (a jar, 7.8 MB; py4j); the engine needs a Java runtime (8+)
pip install scienceworld==1.2.3
# (Debian's headless OpenJDK 17 when there is none and this runs as root with apt; else it says what to install)
if ! command -v java >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless
    else
        echo "install_envs.sh: ScienceWorld needs a Java runtime (java not found on PATH): apt install openjdk-17-jre-headless" >&2
    fi
fi
