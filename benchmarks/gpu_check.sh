#!/usr/bin/env bash
# The GPU check: run it on a machine with CUDA (and put its table in the README).
#
#   benchmarks/gpu_check.sh            # CUDA: CUDA-only tests, one generation on a Celery GPU
#                                      # worker, env/PPO throughput at 4,096 and 65,536 envs
#   benchmarks/gpu_check.sh --dry-run  # any machine: the same steps on the CPU, small sizes
#
# Steps 1 and 2 go through `./paddock test` (it starts Redis when none runs; set DATABASE_URL
# for PostgreSQL as for the test suite). A failing step is reported in the table; the script
# still runs the rest. Exit status: 0 when every step passed, 1 otherwise, 2 without CUDA and
# without --dry-run.
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
DRY=""
if [ "${1:-}" = "--dry-run" ]; then
  DRY="--dry-run"
elif ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: no CUDA device; run benchmarks/gpu_check.sh --dry-run" >&2
  exit 2
fi
export OMP_NUM_THREADS=1 PADDOCK_TORCH_THREADS=1
LOGS=$(mktemp -d)

echo "gpu_check: 1/3 CUDA-only tests (log: $LOGS/tests.log)"
./paddock test --no-lint -q -rs -p no:cacheprovider -k "cuda or gpu" \
  tests/trainer/test_device.py tests/trainer/test_device_portability.py tests/trainer/test_task_limits.py \
  tests/trainer/test_bundle.py tests/trainer/envs/test_device_paths.py tests/trainer/envs/test_stock_trading.py \
  > "$LOGS/tests.log" 2>&1
TESTS=$?

echo "gpu_check: 2/3 one generation through a real Celery worker (log: $LOGS/worker.log)"
./paddock test --no-lint -q -rs -p no:cacheprovider tests/webapp/runs/test_worker_device.py > "$LOGS/worker.log" 2>&1
WORKER=$?

echo "gpu_check: 3/3 env and PPO throughput"
"$PY" benchmarks/gpu_check.py $DRY --tests-log "$LOGS/tests.log" --worker-log "$LOGS/worker.log"
BENCH=$?

[ "$TESTS" = 0 ] && [ "$WORKER" = 0 ] && [ "$BENCH" = 0 ]
