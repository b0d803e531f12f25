"""Real server and Celery worker processes for tests that are about orchestration.

Used by the browser tests (``tests/e2e/conftest.py``: daphne and one worker for the session)
and the runs orchestration tests (``tests/webapp/runs/conftest.py``: several workers per module,
some killed with SIGKILL). Every process leads its own process group, so stopping or killing it
takes its children (a Celery pool) along, like a machine that disappears.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import redis

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = REPO_ROOT / "test-output" / "logs"
START_TIMEOUT_S = 90.0
DEADLINE_SCALE_ENV = "PADDOCK_TEST_DEADLINE_SCALE"


def deadline_scale() -> float:
    """How much longer than on an idle CI machine tests wait for real processes: the
    ``PADDOCK_TEST_DEADLINE_SCALE`` environment variable (default 1; e.g. 3 on a loaded 2-core
    machine). A value that is not a number > 0 fails the test run loudly."""
    raw = os.environ.get(DEADLINE_SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise pytest.UsageError(f"{DEADLINE_SCALE_ENV}={raw!r}: must be a number > 0 (e.g. 1, 2.5)")
    return value


def deadline_s(seconds: float) -> float:
    """``seconds`` of waiting for a worker, server or event, scaled by :func:`deadline_scale`."""
    return seconds * deadline_scale()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dies_with_us(argv: list[str]) -> list[str]:
    """``argv`` under util-linux's ``setpriv --pdeathsig KILL`` on Linux: the process is killed
    when this test process dies, even by SIGKILL (a pytest run killed by a timeout left Celery
    workers behind, which then took the next run's tasks). The signal follows the *thread* that
    started the process, so only processes started on the main thread get it."""
    setpriv = shutil.which("setpriv")
    if (
        not sys.platform.startswith("linux")
        or setpriv is None
        or threading.current_thread() is not threading.main_thread()
    ):
        return argv
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]


def start_process(name: str, argv: list[str], env: dict[str, str], *, log_dir: Path = LOG_DIR) -> subprocess.Popen:
    """Start ``argv`` in the repository as the leader of a new process group, appending its
    output to ``<log_dir>/<name>.log``; it dies with this process (:func:`_dies_with_us`)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            _dies_with_us(argv),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc.log_path = log_path  # type: ignore[attr-defined]
    return proc


def signal_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to a process group that may already be gone."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it (e.g. a Celery pool)."""
    signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def log_tail(proc: subprocess.Popen, lines: int = 30) -> str:
    path = getattr(proc, "log_path", None)
    if path is None or not Path(path).exists():
        return ""
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen, what: str, timeout: float = START_TIMEOUT_S) -> None:
    """Poll ``ready()`` until true; fail with the process log when it exits or time runs out
    (``timeout`` is scaled by :func:`deadline_scale`)."""
    timeout = deadline_s(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with status {proc.returncode}:\n{log_tail(proc)}")
        if ready():
            return
        time.sleep(0.25)
    pytest.fail(f"{what} not ready after {timeout:.0f} s:\n{log_tail(proc)}")


def wait_for(
    ready: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    pending: Callable[[], str] | None = None,
    step: float = 0.25,
) -> None:
    """Poll ``ready()`` until true for ``timeout`` seconds scaled by :func:`deadline_scale`;
    on timeout fail saying what was awaited, the deadline and what ``pending()`` reports as
    still pending (e.g. the generations not done and the worker's last log lines)."""
    limit = deadline_s(timeout)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(step)
    detail = f"; still pending: {pending()}" if pending is not None else ""
    scale = f" ({timeout:g} s x {DEADLINE_SCALE_ENV}={deadline_scale():g})" if deadline_scale() != 1 else ""
    pytest.fail(f"timed out after {limit:.0f} s{scale} waiting for {what}{detail}")


def http_status(url: str) -> int | None:
    """HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def database_url(db: dict) -> str:
    """A ``DATABASE_URL`` for a Django ``settings_dict`` (the test database after set-up), so
    child processes share the test's database."""
    if db["ENGINE"].endswith("sqlite3"):
        name = str(db["NAME"])
        if name in ("", ":memory:") or name.startswith("file:"):
            raise RuntimeError("tests with server processes need a file SQLite test database (DATABASES TEST NAME)")
        return f"sqlite:///{name}"
    quote = urllib.parse.quote
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{'@' if auth else ''}{host}{port}/{quote(db['NAME'], safe='')}"


def celery_worker_argv(node: str, *, queues: Iterable[str] = ("gpu", "cpu")) -> list[str]:
    """A project Celery worker with one prefork child, named ``node``. Gossip, mingle and
    heartbeats are off: test workers start faster and do not wait for each other."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "webapp.config.celery",
        "worker",
        "-Q",
        ",".join(queues),
        "-c",
        "1",
        "--pool=prefork",
        "-n",
        node,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        "INFO",
    ]


class Workers:
    """Celery worker processes started on demand and stopped together.

    Args:
        env: environment of every worker (database, Redis, data folder, thread count).
        log_dir: where ``<name>.log`` of each worker goes.
    """

    def __init__(self, env: dict[str, str], log_dir: Path = LOG_DIR) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> str:
        """Start worker ``name`` (it does not wait for it to be ready); return its node name."""
        node = f"{name}@paddock-test"
        self.procs[node] = start_process(name, celery_worker_argv(node), self.env, log_dir=self.log_dir)
        return node

    def kill9(self, node: str) -> None:
        """SIGKILL a worker and its pool child at once, like a machine that disappears."""
        proc = self.procs.pop(node)
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every worker at once, then SIGKILL any still running after ``grace_s``."""
        for proc in self.procs.values():
            signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs.values():
            stop_process(proc, grace_s=max(0.1, deadline - time.monotonic()))
        self.procs.clear()


class PrivateRedis:
    """A ``redis-server`` of this test alone on a free port; nothing is persisted, so a
    restart comes back empty."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.workdir), "--protected-mode", "no"]
        self.proc = start_process(f"redis-{self.port}", argv, dict(os.environ))
        wait_until(self.answers, self.proc, "private redis-server", timeout=15)

    def answers(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    MARKER = "paddock-test:before-crash"

    def mark(self) -> None:
        """Write a key that only a Redis which kept its data would still hold after a restart."""
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)
        try:
            client.set(self.MARKER, "1")
        finally:
            client.close()

    def lost_everything(self) -> bool:
        """The marker written before the crash is gone: the restart kept nothing (queued and
        unacknowledged messages included). Queue keys themselves are no evidence: workers that
        reconnect re-send lost generations at once, so a fresh queue may already exist."""
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)
        try:
            return client.exists(self.MARKER) == 0
        finally:
            client.close()

    def crash(self) -> None:
        """SIGKILL, like a machine that loses power: no shutdown, no save."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, grace_s=5)
            self.proc = None
