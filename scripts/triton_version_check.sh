#!/usr/bin/env bash
# The kernels under another Triton, on CPU: the kernel and credit tests under that Triton's
# interpreter, and every kernel variant compiled by it for sm_90. The GPU machine's image has
# Triton 3.6.0 (torch 2.11's pin) where CI has the newest; this shows, without a GPU, what the
# older front end makes of the kernels.
#
#   bash scripts/triton_version_check.sh [VERSION] [VENV]    # 3.6.0, /tmp/triton-VERSION
#
# A side virtual environment (made once; ~2 min from the package registry) with torch 2.13.0
# (CPU), triton==VERSION and the test tools. Exit status: non-zero on any failure. Every kernel
# variant compiled with 3.1.0, 3.2.0, 3.3.1, 3.4.0, 3.5.1, 3.6.0, 3.7.1, 3.8.0 and 3.9.0; the
# interpreter runs them from 3.4 (the tests passed under 3.4.0 and 3.6.0).
set -euo pipefail
version=${1:-3.6.0}
venv=${2:-/tmp/triton-$version}
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch==2.13.0 "triton==$version" numpy "trl>=1.16" transformers accelerate \
    pytest pytest-timeout pytest-benchmark hypothesis
fi
py="$venv/bin/python"
have=$("$py" -c "import triton; print(triton.__version__)")
[ "$have" = "$version" ] || { echo "$venv has triton $have, not $version" >&2; exit 2; }
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
launches="$venv/launches.json"
# an interpreter older than milegpo_kernels._backend.MIN_INTERPRETER_TRITON cannot run the kernels:
# then the launches are recorded with this checkout's own Python (python3) and the tests are skipped
if "$py" -c "import sys, triton; from milegpo_kernels._backend import MIN_INTERPRETER_TRITON as m, version_tuple
sys.exit(version_tuple(triton.__version__) < m)"; then recorder=$py; else recorder=python3; fi
echo "== triton $have: compile every kernel variant for sm_90 (launches recorded by $recorder)"
TRITON_INTERPRET=1 "$recorder" scripts/compile_kernels.py --record "$launches"
"$py" scripts/compile_kernels.py --compile "$launches"
if [ "$recorder" != "$py" ]; then
  echo "== triton $have: its interpreter cannot run the kernels (backend='triton' on CPU needs a newer one): no tests"
  exit 0
fi
echo "== triton $have: kernel and credit tests under the interpreter"
TRITON_INTERPRET=1 "$py" -m pytest -q -p no:cacheprovider tests/kernels tests/credit -m "not slow"
