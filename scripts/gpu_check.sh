#!/usr/bin/env bash
# GPU check: compiled Triton kernels' tests and the benchmarks, within ~8 minutes.
#
# Usage (from anywhere, on a CUDA machine with the project's deps installed; no network):
#   OUT=/some/dir bash scripts/gpu_check.sh
# Writes to $OUT (default ./gpu_out):
#   gpu_results.md       summary: device, test outcomes, benchmark tables with ratios
#   gpu_info.txt         nvidia-smi / torch / triton versions
#   tests_*.log|xml      pytest output and junit xml of each test run
#   bench_<name>.json    pytest-benchmark json of each benchmark run (credit, policy loss,
#                        kernels up to 64,000 rows, kernels at 640,000 rows)
#   bench_<name>.log     its pytest output
#   credit_profile.log   scripts/credit_profile.py: kernels per credit call, eager vs CUDA graph
#   kernel_variants.md   scripts/kernel_variants.py: the grouping / relaxation kernels' tuning variants
#   credit_compile.log   scripts/credit_compile.py: torch.compile of the pipeline vs the CUDA-graph replay
#   vllm_server.log      scripts/vllm_server_check.py: two MileGPO iterations against a local `trl vllm-serve`
#                        and whether the weights reached it (server/: its log, the tiny model); needs 2 GPUs
# With ARCHIVE=/path/x.tgz, all of $OUT is also packed into that one file after every
# step (for transports that bring back few files, or a run cut short).
# STEPS=credit,profile,variants,loss,kernels,gpu,ops,ops640k,server,compile (the default: all) runs a subset,
# in that order (compile: scripts/credit_compile.py, torch.compile of the credit pipeline, an experiment;
# server: vLLM server mode, which needs vLLM and two GPUs, since TRL 1.16 sends the weights to the server over
# NCCL and NCCL takes no two ranks on one GPU: skipped, and said so, with one).
# Every step has its own timeout and the script keeps a total budget, so one slow or
# hanging step cannot eat the others; the exit status is non-zero if a test run failed.
set -u

cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
BUDGET_S="${BUDGET_S:-470}"            # whole script, seconds (< 8 minutes)
PY="${PYTHON:-$(command -v python3 || command -v python)}"   # GPU images may have python3 only
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  export TRITON_INTERPRET=0            # compiled kernels, not the interpreter (tests/conftest.py defaults it to 1)
else
  echo "WARNING: no CUDA device: dry run with Triton's interpreter, GPU-only columns skipped"
  export TRITON_INTERPRET=1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # the working tree, installed or not
export PYTHONDONTWRITEBYTECODE=1
PYTEST=("$PY" -m pytest -p no:cacheprovider -q -rfEs)
status=0

STEPS="${STEPS:-credit,profile,variants,loss,kernels,gpu,ops,ops640k,server,compile}"
want() { [[ ",$STEPS," == *",$1,"* ]]; }

left() { echo $(( BUDGET_S - SECONDS )); }
step_timeout() {  # min(wanted, time left - 20 s reserve), at least 10
  local want=$1 l; l=$(( $(left) - 20 ))
  (( l < want )) && want=$l
  (( want < 10 )) && want=10
  echo "$want"
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "nvidia-smi unavailable"
  "$PY" - <<'EOF' 2>&1
import torch, triton
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("triton", triton.__version__)
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0))
EOF
} > "$OUT/gpu_info.txt"
cat "$OUT/gpu_info.txt"

run_tests() {  # name, timeout, pytest args...
  local name=$1 t; t=$(step_timeout "$2"); shift 2
  echo "== tests: $name (timeout ${t}s)"
  timeout --kill-after=10 "$t" "${PYTEST[@]}" --junitxml="$OUT/tests_$name.xml" "$@" > "$OUT/tests_$name.log" 2>&1
  local rc=$?
  tail -n 5 "$OUT/tests_$name.log"
  # 5 = nothing collected (e.g. no test marked gpu outside tests/kernels): not a failure
  if (( rc != 0 && rc != 5 )); then status=1; fi
  echo "$name rc=$rc" >> "$OUT/tests_rc.txt"
}

pack() {  # ARCHIVE=path.tgz: everything so far in one file, refreshed after each step
  [ -n "${ARCHIVE:-}" ] && tar czf "$ARCHIVE" -C "$OUT" . 2>/dev/null
  return 0
}

run_bench() {  # name, timeout, pytest args... (pytest-benchmark writes its json only at the end of a run)
  local name=$1 want=$2 t rc; shift 2
  if (( $(left) < 40 )); then echo "$name: skipped, budget spent" | tee -a "$OUT/bench_skipped.txt"; return; fi
  t=$(step_timeout "$want")
  echo "== bench: $name (timeout ${t}s)"
  timeout --kill-after=10 "$t" "${PYTEST[@]}" "$@" --benchmark-only --benchmark-json="$OUT/bench_$name.json" \
    --benchmark-columns=median,min,rounds > "$OUT/bench_$name.log" 2>&1
  rc=$?
  tail -n 3 "$OUT/bench_$name.log"
  echo "$name rc=$rc" >> "$OUT/bench_rc.txt"
  pack
}

: > "$OUT/tests_rc.txt"
# The headline figures first (each bench checks its results against the reference or
# the torch twin before timing, so a wrong kernel fails there too), then the tests, then
# the per-op tables, so that a slow step leaves the most important results behind.
# 1. end-to-end credit (reference / torch CPU / torch CUDA / Triton) and the fused loss
want credit && run_bench test_credit 110 bench/test_credit.py
if want profile; then
  t=$(step_timeout 60); echo "== credit profile (timeout ${t}s)"
  timeout --kill-after=10 "$t" "$PY" scripts/credit_profile.py --dump "$OUT" > "$OUT/credit_profile.log" 2>&1; grep -v -i warn "$OUT/credit_profile.log" | tail -n 44; pack
fi
if want variants; then
  t=$(step_timeout 90); echo "== kernel variants (timeout ${t}s)"
  timeout --kill-after=10 "$t" "$PY" scripts/kernel_variants.py --reps 20 > "$OUT/kernel_variants.md" 2>&1
  tail -n 3 "$OUT/kernel_variants.md"; pack
fi
want loss && run_bench test_policy_loss 110 bench/test_policy_loss.py
# 2. kernel tests: every file in tests/kernels (credit ops, policy loss, ...) on CUDA
want kernels && run_tests kernels 170 tests/kernels
pack
# 3. anything else marked gpu: estimate(..., backend="triton") with no host sync, the trainer's GPU
#    defaults end to end (tiny policy on CUDA, Triton credit, fused loss; builds the warm start: ~1 min)
want gpu && run_tests gpu_marked 150 tests -m gpu --ignore=tests/kernels
pack
# 4. per-op tables: up to 64,000 rows (with plain Python), then 640,000 rows
want ops && run_bench test_kernels 120 bench/test_kernels.py -k "not 640000"
want ops640k && run_bench test_kernels_640k 60 bench/test_kernels.py -k 640000
# 5. vLLM server mode: the trainer on the first visible GPU, `trl vllm-serve` on the second
if want server; then
  IFS=, read -r -a visible <<< "${CUDA_VISIBLE_DEVICES:-}"
  n_gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
  if ! "$PY" -c "import vllm" > /dev/null 2>&1; then
    echo "server: skipped, vLLM does not import here" | tee "$OUT/vllm_server.log"
  elif (( n_gpus < 2 )); then
    echo "server: skipped, ${n_gpus} CUDA device(s): the server and the trainer need one GPU each (NCCL)" \
      | tee "$OUT/vllm_server.log"
  elif (( $(left) < 120 )); then
    echo "server: skipped, budget spent" | tee "$OUT/vllm_server.log"
  else
    trainer_gpu="${visible[0]:-0}"; server_gpu="${visible[1]:-1}"
    t=$(step_timeout 300); echo "== vLLM server mode (timeout ${t}s; trainer GPU $trainer_gpu, server GPU $server_gpu)"
    CUDA_VISIBLE_DEVICES="$trainer_gpu" timeout --kill-after=10 "$t" "$PY" -u scripts/vllm_server_check.py \
      --server-gpu "$server_gpu" --out "$OUT/server" > "$OUT/vllm_server.log" 2>&1
    rc=$?
    grep '^SERVER_' "$OUT/vllm_server.log"
    echo "server rc=$rc" >> "$OUT/tests_rc.txt"
    if (( rc != 0 )); then status=1; fi
  fi
  rm -rf "$OUT/server/model" "$OUT/server/run"  # the tiny model and its run: not worth bringing back
  pack
fi
if want compile && (( $(left) > 60 )); then
  t=$(step_timeout 150); echo "== torch.compile experiment (timeout ${t}s)"
  timeout --kill-after=10 "$t" "$PY" -u scripts/credit_compile.py > "$OUT/credit_compile.log" 2>&1
  grep -v -i warn "$OUT/credit_compile.log" | tail -n 20; pack
fi

# 4. the summary
{
  echo "# GPU check"
  echo
  echo '```'
  cat "$OUT/gpu_info.txt"
  echo '```'
  echo
  echo "## Tests"
  echo
  echo "exit codes (124 = timed out, 5 = nothing collected): $(tr '\n' ' ' < "$OUT/tests_rc.txt")"
  echo
  for x in "$OUT"/tests_*.log; do
    [ -e "$x" ] || continue
    echo "- \`$(basename "$x" .log)\`: $(grep -E '(passed|failed|error|deselected|no tests ran)' "$x" | tail -n 1)"
    grep -E '^(FAILED|ERROR) ' "$x" | head -n 20 | sed 's/^/    - /'
  done
  echo
  echo "## Where a GPU credit call's time goes (scripts/credit_profile.py)"
  echo
  echo '```'
  [ -e "$OUT/credit_profile.log" ] && grep -v -i warn "$OUT/credit_profile.log" | tail -n 44
  echo '```'
  echo
  echo "## torch.compile experiment (scripts/credit_compile.py)"
  echo
  echo '```'
  [ -e "$OUT/credit_compile.log" ] && grep -v -i warn "$OUT/credit_compile.log" | tail -n 30
  echo '```'
  echo
  echo "## The trainer on the GPU (per iteration, seconds; the first iteration compiles the kernels)"
  echo
  if [ -e "$OUT/tests_gpu_marked.xml" ]; then
    "$PY" - "$OUT/tests_gpu_marked.xml" <<'EOF' 2>&1
import sys
import xml.etree.ElementTree as ET

for case in ET.parse(sys.argv[1]).iter("testcase"):
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    if props:
        print(f"- {case.get('name')}: " + "; ".join(f"{k} {v}" for k, v in props.items()))
EOF
  fi
  echo
  echo "## vLLM server mode (scripts/vllm_server_check.py)"
  echo
  echo '```'
  [ -e "$OUT/vllm_server.log" ] && grep -E '^(SERVER_|server:|Traceback|[A-Za-z]*Error)' "$OUT/vllm_server.log" | tail -n 20
  echo '```'
  echo
  echo "## Kernel variants (scripts/kernel_variants.py)"
  echo
  [ -e "$OUT/kernel_variants.md" ] && grep -v -i warn "$OUT/kernel_variants.md" | grep -v "^# "
  echo
  echo "## Benchmarks"
  echo
  [ -e "$OUT/bench_rc.txt" ] && sed 's/^/- /' "$OUT/bench_rc.txt" && echo
  [ -e "$OUT/bench_skipped.txt" ] && sed 's/^/- /' "$OUT/bench_skipped.txt" && echo
  shopt -s nullglob
  jsons=("$OUT"/bench_*.json)
  if (( ${#jsons[@]} )); then "$PY" scripts/bench_table.py "${jsons[@]}"; else echo "_no benchmark json_"; fi
  echo
  echo "_total ${SECONDS}s_"
} > "$OUT/gpu_results.md"
pack
echo "wrote $OUT/gpu_results.md (${SECONDS}s)"
exit $status
