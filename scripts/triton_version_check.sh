#!/usr/bin/env bash
# The kernels under another Triton, on CPU: the kernel and credit tests under that Triton's
# interpreter, and every kernel variant compiled by it for sm_90. The GPU machine's image has
# Triton 3.6.0 (torch 2.11's pin) where CI has the newest; this shows, without a GPU, what the
# older front end makes of the kernels.
#
#   bash scripts/triton_version_check.sh [VERSION] [VENV]    # 3.6.0, /tmp/triton-VERSION
#
# A side virtual environment (made once; ~2 min from the package registry) with torch 2.13.0
# (CPU), triton==VERSION and the test tools. Exit status: non-zero on any failure.
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
echo "== triton $have: compile every kernel variant for sm_90"
TRITON_INTERPRET=1 "$py" scripts/compile_kernels.py --record "$launches"
"$py" scripts/compile_kernels.py --compile "$launches"
echo "== triton $have: kernel and credit tests under the interpreter"
TRITON_INTERPRET=1 "$py" -m pytest -q -p no:cacheprovider tests/kernels tests/credit -m "not slow"
