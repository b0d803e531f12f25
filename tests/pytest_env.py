"""Loaded first (``-p tests.pytest_env`` in pyproject): test-run defaults for settings.

Tests use the development defaults (``DEBUG=1``: random persisted SECRET_KEY under var/)
unless the environment (CI) sets the variables itself.
"""

import os
import shutil

os.environ.setdefault("DEBUG", "1")
# Redis database 15 for tests, so a running dev stack (database 0) never sees test messages.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

# Under pytest-xdist (``./paddock test`` runs one worker per core, up to 4) each worker is a test
# session of its own: worker ``gwK`` takes Redis database ``D - K`` (``D`` from REDIS_URL, 15 by
# default) and a files folder below the controller's, so one worker's flush or run numbers never
# reach the other. pytest-django gives each worker its own test database. pytest_configure below
# refuses a REDIS_URL and worker count that cannot give each worker databases of its own.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_INDEX = int(WORKER[2:]) if WORKER.startswith("gw") and WORKER[2:].isdigit() else 0
WORKER_COUNT = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
# A process this worker starts (a child pytest) inherits PYTEST_XDIST_WORKER and the adjusted
# variables; PADDOCK_TEST_WORKER says they are adjusted already.
_ADJUST = bool(WORKER) and os.environ.get("PADDOCK_TEST_WORKER") != WORKER
# whether REDIS_URL's database is D - K here (shifted by this worker or the one that started us)
_SHIFTED = bool(WORKER) and not _ADJUST
if _ADJUST:
    os.environ["PADDOCK_TEST_WORKER"] = WORKER
    _base_url, _, _db = os.environ["REDIS_URL"].rpartition("/")
    if _db.isdigit() and int(_db) - WORKER_INDEX >= 0:
        os.environ["REDIS_URL"] = f"{_base_url}/{int(_db) - WORKER_INDEX}"
        _SHIFTED = True
if "PADDOCK_VAR_DIR" not in os.environ:
    # Each test session keeps its files (checkpoints, bundles, uploads, caches) in a folder of its
    # own: its fresh test database numbers runs, generations and agents from 1 again, so files an
    # earlier session left under the same names would stand in for ones this session never
    # wrote, and two sessions at once must not share them. Folders of sessions whose process has
    # ended are removed. Child processes (workers, servers, a child pytest) inherit the variable.
    _base = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "var", "test")
    os.makedirs(_base, exist_ok=True)
    for _name in os.listdir(_base):
        if _name.startswith("session-") and _name[8:].isdigit():
            try:
                os.kill(int(_name[8:]), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(_base, _name), ignore_errors=True)
            except PermissionError:
                pass  # another user's live process
    os.environ["PADDOCK_VAR_DIR"] = os.path.join(_base, f"session-{os.getpid()}")
elif _ADJUST:
    # Inherited from the xdist controller: this worker keeps its files in a folder of its own.
    os.environ["PADDOCK_VAR_DIR"] = os.path.join(os.environ["PADDOCK_VAR_DIR"], WORKER)

# Two cores shared by the test process and the worker subprocesses it starts: multithreaded
# BLAS made the turbulence loop 20x slower here. Set before numpy is first imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def isolated_databases(own: str, index: int = WORKER_INDEX, count: int = WORKER_COUNT) -> list[int]:
    """The Redis databases a module of this session may take for itself (``own``: the session's
    database number): any but a session's own, whose flush would drop that session's other
    messages. Under pytest-xdist, worker K takes those congruent to K modulo the worker count, so
    two workers never share one (their own databases: ``own + K - k``)."""
    sessions = {int(own) + index - k for k in range(count)} if own.isdigit() else set()
    return [db for db in range(2, 16) if db not in sessions and db % count == index]


def pytest_configure(config) -> None:
    """Under xdist, refuse a setup whose workers would share or lose Redis databases: in the
    controller before any worker starts (``-n N``), and in each worker (``-n auto``).

    Each worker's own database ``D - K`` must be a number of at least 2 (0 and 1 stay for a dev
    stack), and each worker must keep some database of its own for modules that take one
    (:func:`isolated_databases`: at most 7 workers at ``D`` 15).

    Raises:
        pytest.UsageError: REDIS_URL's path is not a database number, or the workers are too many.
    """
    import pytest

    count = WORKER_COUNT if WORKER else getattr(config.option, "numprocesses", None)
    if not isinstance(count, int) or count < 2:
        return
    base, _, db = os.environ["REDIS_URL"].rpartition("/")
    given = int(db) + (WORKER_INDEX if _SHIFTED else 0) if db.isdigit() else None
    fits = given is not None and given - (count - 1) >= 2
    if fits and all(isolated_databases(str(given - k), k, count) for k in range(count)):
        return
    url = f"{base}/{given}" if given is not None else os.environ["REDIS_URL"]
    raise pytest.UsageError(
        f"{count} xdist workers cannot each have Redis databases of their own with REDIS_URL={url!r}: "
        f"use a database number D (redis://host:port/D) with D - {count - 1} >= 2, and at most 7 workers"
    )
