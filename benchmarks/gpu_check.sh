#!/usr/bin/env bash
# The device check on a lent accelerator machine (docs/gpu.md): one call, under 8 minutes, no
# network, no services, the machine's own python3 and torch.
#
#   here:   .venv/bin/python benchmarks/gpu_check.py prepare   # .devicecheck/: data slice + wheels
#   there:  bash benchmarks/gpu_check.sh                       # with .devicecheck carried along
#   any:    bash benchmarks/gpu_check.sh --dry-run             # every phase tiny, on the CPU
#
# The wheels in .devicecheck/wheels (packages the accelerator image lacks) are installed with
# `pip install --no-index --no-deps --target` into a temporary folder put first on PYTHONPATH.
# Each phase prints one JSON line as soon as it finishes. Exit status: 0 when every phase
# passed (or was skipped), 1 otherwise, 2 without CUDA and without --dry-run.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${TMPDIR:-/tmp}/paddock-devicecheck-site
if ls .devicecheck/wheels/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .devicecheck/wheels/*.whl || exit 1
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
exec "$PY" benchmarks/gpu_check.py run "$@"
