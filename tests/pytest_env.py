"""Loaded first (``-p tests.pytest_env`` in pyproject): test-run defaults for settings.

Tests use the development defaults (``DEBUG=1``: random persisted SECRET_KEY under var/)
unless the environment (CI) sets the variables itself.
"""

import os
import shutil

os.environ.setdefault("DEBUG", "1")
# Redis database 15 for tests, so a running dev stack (database 0) never sees test messages.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
if "PADDOCK_VAR_DIR" not in os.environ:
    os.environ["PADDOCK_VAR_DIR"] = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "var", "test"
    )
    # Each test session starts with empty stored files: its fresh test database numbers runs,
    # generations and agents from 1 again, so files an earlier session left under the same names
    # (checkpoints, bundles, uploads) would stand in for ones this session never wrote. The data
    # cache and the secret key stay (they do not depend on database ids).
    for _name in ("artifacts", "uploads", "worker-logs"):
        shutil.rmtree(os.path.join(os.environ["PADDOCK_VAR_DIR"], _name), ignore_errors=True)

# Two cores shared by the test process and the worker subprocesses it starts: multithreaded
# BLAS made the turbulence loop 20x slower here. Set before numpy is first imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
