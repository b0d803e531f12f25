#!/usr/bin/env bash
# The GPU check: run it on a machine with CUDA (and put its table in the README).
#
#   benchmarks/gpu_check.sh            # CUDA: CUDA-only tests, one generation on a Celery GPU
#                                      # worker, env/PPO throughput at 4,096 and 65,536 envs,
#                                      # intraday env throughput (5-minute file, paper shape)
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

echo "gpu_check: 1/4 CUDA-only tests (log: $LOGS/tests.log)"
./paddock test --no-lint -q -rs -p no:cacheprovider -k "cuda or gpu" \
  tests/trainer/test_device.py tests/trainer/test_device_portability.py tests/trainer/test_task_limits.py \
  tests/trainer/test_bundle.py tests/trainer/envs/test_device_paths.py tests/trainer/envs/test_stock_trading.py \
  > "$LOGS/tests.log" 2>&1
TESTS=$?

echo "gpu_check: 2/4 one generation through a real Celery worker (log: $LOGS/worker.log)"
./paddock test --no-lint -q -rs -p no:cacheprovider tests/webapp/runs/test_worker_device.py > "$LOGS/worker.log" 2>&1
WORKER=$?

echo "gpu_check: 3/4 env and PPO throughput"
"$PY" benchmarks/gpu_check.py $DRY --tests-log "$LOGS/tests.log" --worker-log "$LOGS/worker.log"
BENCH=$?

# Intraday bars: the real 5-minute file and the paper's synthetic shape (100 stocks x 390
# one-minute bars x 252 days); env_throughput.py adds cuda rows when a GPU is present.
echo "gpu_check: 4/4 intraday env throughput (5-minute file, synthetic 100 x 390 x 252)"
if [ -n "$DRY" ]; then
  INTRADAY_ARGS="--sizes 64 --threads 1 --seconds 0.3"
  DAYS=5
else
  INTRADAY_ARGS="--sizes 1024 4096 --threads 1 --seconds 2"
  DAYS=252
fi
"$PY" benchmarks/env_throughput.py --data 5min $INTRADAY_ARGS && \
  "$PY" benchmarks/env_throughput.py --data synthetic --synthetic-days "$DAYS" $INTRADAY_ARGS
INTRADAY=$?

[ "$TESTS" = 0 ] && [ "$WORKER" = 0 ] && [ "$BENCH" = 0 ] && [ "$INTRADAY" = 0 ]
