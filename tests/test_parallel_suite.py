"""``./paddock test`` runs the whole suite on pytest-xdist workers, each a test session of its own.

Worker ``gwK`` takes Redis database ``15 - K`` (of ``REDIS_URL``'s), a files folder below the
controller's and (pytest-django) a test database of its own, so that one worker's flush, run
numbers or files never reach another's (tests/pytest_env.py); a REDIS_URL that cannot give them that is refused. A chosen selection of tests runs
in one process, as asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_foundation import REPO_ROOT, _launcher

PROBE = """
import json, os, pathlib

def test_where_this_worker_keeps_its_state():
    from tests.pytest_env import isolated_databases

    out = pathlib.Path(os.environ["PROBE_OUT"]) / (os.environ.get("PYTEST_XDIST_WORKER") or "main")
    out.write_text(json.dumps({
        "redis": os.environ["REDIS_URL"],
        "var": os.environ["PADDOCK_VAR_DIR"],
        "isolated": sorted(isolated_databases(os.environ["REDIS_URL"].rsplit("/", 1)[1])),
    }))

def test_a_second_file_for_the_other_worker():
    test_where_this_worker_keeps_its_state()
"""


def test_the_whole_suite_runs_on_one_worker_per_core_and_a_selection_in_one_process():
    launcher = _launcher()
    assert launcher.suite_args(["tests/trainer", "-x"], {}) == ["tests/trainer", "-x"]
    two = ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
    assert launcher.suite_args([], {"PADDOCK_TEST_WORKERS": "2"}) == two
    assert launcher.suite_args([], {"PADDOCK_TEST_WORKERS": "1"}) == []
    assert 1 <= launcher.test_workers({}) <= min(launcher.MAX_TEST_WORKERS, os.cpu_count() or 1)
    for bad in ("0", "5", "two", "-1"):
        with pytest.raises(launcher.LaunchError, match="PADDOCK_TEST_WORKERS must be an integer from 1 to 4"):
            launcher.suite_args([], {"PADDOCK_TEST_WORKERS": bad})


def test_two_workers_keep_their_redis_databases_and_files_apart(tmp_path):
    (tmp_path / "test_probe_a.py").write_text(PROBE)
    (tmp_path / "test_probe_b.py").write_text(PROBE)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PADDOCK_TEST_WORKER"))}
    env.update(PROBE_OUT=str(out), REDIS_URL="redis://127.0.0.1:6379/15", PYTHONPATH=str(REPO_ROOT))
    env.pop("PADDOCK_VAR_DIR", None)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    argv += ["--rootdir", str(REPO_ROOT), "-c", str(REPO_ROOT / "pyproject.toml"), str(tmp_path)]
    result = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    seen = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert sorted(seen) == ["gw0", "gw1"]
    assert [seen[w]["redis"] for w in ("gw0", "gw1")] == ["redis://127.0.0.1:6379/15", "redis://127.0.0.1:6379/14"]
    # the files folder of each worker lies below the controller's session folder
    first, second = (seen[w]["var"] for w in ("gw0", "gw1"))
    assert first != second and os.path.dirname(first) == os.path.dirname(second)
    assert os.path.basename(first) == "gw0" and os.path.basename(os.path.dirname(first)).startswith("session-")
    # a module's own Redis databases (isolated_redis): never a worker's session database, never shared
    pools = [set(seen[w]["isolated"]) for w in ("gw0", "gw1")]
    assert pools[0] and pools[1] and not pools[0] & pools[1]
    assert not (pools[0] | pools[1]) & {14, 15}


def test_each_fuzzed_api_operation_is_a_test_with_a_node_id_of_its_own():
    # Schemathesis gives all its operations' tests one node id; xdist's loadfile ran one of 44
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    argv.append("tests/webapp/api/test_fuzz_schema.py")
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    ids = [line for line in result.stdout.splitlines() if "::test_no_operation_answers_500" in line]
    assert len(ids) >= 40 and len(set(ids)) == len(ids), ids[:3]
    assert any(i.endswith("[GET /api/agents/]") for i in ids) and any(i.endswith("[POST /api/tasks/]") for i in ids)


def test_a_redis_database_too_low_for_two_workers_is_refused_by_name(tmp_path):
    (tmp_path / "test_probe_a.py").write_text("def test_nothing():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PADDOCK_TEST_WORKER"))}
    env.update(REDIS_URL="redis://127.0.0.1:6379/2", PYTHONPATH=str(REPO_ROOT))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    argv += ["--rootdir", str(REPO_ROOT), "-c", str(REPO_ROOT / "pyproject.toml"), str(tmp_path)]
    result = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "node down" not in result.stdout + result.stderr  # refused before any worker
    assert (
        "2 xdist workers cannot each have Redis databases of their own with REDIS_URL='redis://127.0.0.1:6379/2'"
        in (result.stdout + result.stderr)
    ), result.stdout[-2000:] + result.stderr[-2000:]
