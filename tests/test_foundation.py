"""The foundation: settings that fail loudly, the Celery set-up, the launcher, the deployment files.

Every process is real: ``manage.py``, daphne, Celery and ``./paddock`` run as subprocesses
with their own environment, so what is tested is what a person starting Paddock sees.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib import resources
from pathlib import Path

import jsonschema
import psutil
import pytest
import yaml

from tests.harness import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
SETTINGS_VARS = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DATABASE_URL",
    "REDIS_URL",
    "PADDOCK_VAR_DIR",
    "PADDOCK_ARTIFACTS_DIR",
    "PADDOCK_TORCH_THREADS",
    "PADDOCK_GENERATION_TIME_LIMIT",
    "PADDOCK_LOG_LEVEL",
    "DJANGO_SETTINGS_MODULE",
)


def clean_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """The caller's environment without Paddock settings, with a private var/ folder."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARS}
    env["PADDOCK_VAR_DIR"] = str(tmp_path / "var")
    env.update(overrides)
    return env


def run(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def django_eval(expression: str, env: dict[str, str]) -> str:
    """Evaluate ``expression`` in a fresh process with Django set up; its ``repr`` as text."""
    code = (
        "import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'webapp.config.settings'); "
        f"django.setup(); from django.conf import settings; print(repr({expression}))"
    )
    result = run([sys.executable, "-c", code], env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --- trainer stays free of the web stack -------------------------------------------------------


def test_importing_trainer_does_not_import_django():
    code = "import trainer, sys; assert 'django' not in sys.modules and 'celery' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- settings fail loudly, in one line ----------------------------------------------------------

BAD_SETTINGS = [
    ({"DEBUG": "maybe"}, "DEBUG"),
    ({"DEBUG": "0", "SECRET_KEY": "s" * 50, "ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS"),
    ({"DEBUG": "1", "CSRF_TRUSTED_ORIGINS": "example.com"}, "CSRF_TRUSTED_ORIGINS"),
    ({"DEBUG": "1", "DATABASE_URL": "mysql://root@localhost/paddock"}, "DATABASE_URL"),
    ({"DEBUG": "1", "REDIS_URL": "http://127.0.0.1:6379"}, "REDIS_URL"),
    ({"DEBUG": "1", "PADDOCK_TORCH_THREADS": "0"}, "PADDOCK_TORCH_THREADS"),
    ({"DEBUG": "1", "PADDOCK_GENERATION_TIME_LIMIT": "an hour"}, "PADDOCK_GENERATION_TIME_LIMIT"),
    ({"DEBUG": "1", "PADDOCK_LOG_LEVEL": "LOUD"}, "PADDOCK_LOG_LEVEL"),
]


def assert_one_line_naming(result: subprocess.CompletedProcess, variable: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0
    assert len(lines) == 1, result.stderr
    assert variable in lines[0] and ("expected" in lines[0] or "required" in lines[0])


@pytest.mark.parametrize(("overrides", "variable"), BAD_SETTINGS, ids=[v for _o, v in BAD_SETTINGS])
def test_manage_py_stops_with_one_line_naming_the_bad_variable(tmp_path, overrides, variable):
    result = run([sys.executable, "manage.py", "check"], clean_env(tmp_path, **overrides))

    assert_one_line_naming(result, variable)
    assert result.returncode == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "celery", "-A", "webapp.config.celery", "worker", "-Q", "cpu"],
        ["-m", "celery", "-A", "webapp.config.celery", "beat"],
        ["-m", "daphne", "-p", "1", "webapp.config.asgi:application"],
    ],
    ids=["celery-worker", "celery-beat", "daphne"],
)
def test_servers_stop_with_one_line_naming_the_bad_variable(tmp_path, argv):
    result = run([sys.executable, *argv], clean_env(tmp_path, DEBUG="maybe"))

    assert_one_line_naming(result, "DEBUG")


def test_launcher_stops_with_one_line_naming_the_bad_variable(tmp_path):
    env = clean_env(tmp_path, DEBUG="maybe")

    result = run([str(REPO_ROOT / "paddock"), "serve", "--port", str(free_port())], env)

    assert_one_line_naming(result, "DEBUG")


def test_without_any_setting_debug_is_off_and_a_secret_key_is_made_once_under_var(tmp_path):
    env = clean_env(tmp_path)

    assert django_eval("settings.DEBUG", env) == "False"
    first = django_eval("settings.SECRET_KEY", env)
    assert django_eval("settings.SECRET_KEY", env) == first and len(eval(first)) >= 50
    key_file = tmp_path / "var" / "secret_key"
    assert key_file.read_text().strip() == eval(first)
    assert key_file.stat().st_mode & 0o077 == 0, "the key is readable by its owner only"
    assert not list((tmp_path / "var").glob("secret_key.*.tmp"))


def test_with_debug_off_a_404_lists_no_url_patterns_and_static_files_are_served(tmp_path):
    code = (
        "import os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'webapp.config.settings'; django.setup(); "
        "from django.test import Client; c = Client(HTTP_HOST='127.0.0.1'); "
        "missing = c.get('/no-such-page/'); css = c.get('/static/css/paddock.css'); "
        "print(missing.status_code, 'admin/' in missing.content.decode(), css.status_code, "
        "css['Content-Type'].split(';')[0])"
    )
    result = run([sys.executable, "-c", code], clean_env(tmp_path))

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["404", "False", "200", "text/css"], result.stdout


def test_the_launcher_runs_with_debug_off_unless_asked(monkeypatch):
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("paddock_launcher", str(REPO_ROOT / "paddock"))
    launcher = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(launcher)
    monkeypatch.delenv("DEBUG", raising=False)

    assert launcher.child_env(launcher.parse_args(["serve"])[0])["DEBUG"] == "0"
    assert launcher.child_env(launcher.parse_args(["demo", "--debug"])[0])["DEBUG"] == "1"


def test_development_secret_key_is_random_and_kept_under_var(tmp_path):
    env = clean_env(tmp_path, DEBUG="1")

    first = django_eval("settings.SECRET_KEY", env)
    second = django_eval("settings.SECRET_KEY", env)
    other = django_eval("settings.SECRET_KEY", clean_env(tmp_path / "elsewhere", DEBUG="1"))

    assert first == second != other
    assert len(eval(first)) >= 50
    assert (tmp_path / "var" / "secret_key").read_text().strip() == eval(first)


def test_database_defaults_to_sqlite_under_var_and_uses_postgres_when_set(tmp_path):
    sqlite = eval(django_eval("settings.DATABASES['default']", clean_env(tmp_path, DEBUG="1")))
    postgres_env = clean_env(tmp_path, DEBUG="1", DATABASE_URL="postgres://paddock:pw@db.internal:5433/paddock")
    postgres = eval(django_eval("settings.DATABASES['default']", postgres_env))

    assert sqlite["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(sqlite["NAME"]) == (tmp_path / "var" / "paddock.sqlite3").resolve()
    assert postgres["ENGINE"] == "django.db.backends.postgresql"
    assert (postgres["HOST"], postgres["PORT"], postgres["NAME"]) == ("db.internal", 5433, "paddock")


def test_artifacts_are_written_through_the_storage_api_into_the_artifacts_dir(tmp_path):
    artifacts = tmp_path / "artifacts"
    env = clean_env(tmp_path, DEBUG="1", PADDOCK_ARTIFACTS_DIR=str(artifacts))

    name = django_eval(
        "__import__('django.core.files.storage', fromlist=['x']).default_storage.save("
        "'runs/1/agent.zip', __import__('django.core.files.base', fromlist=['x']).ContentFile(b'zip'))",
        env,
    )

    assert (artifacts / eval(name)).read_bytes() == b"zip"


# --- Celery ----------------------------------------------------------------------------------


def test_celery_speaks_json_only_prefetches_one_task_and_routes_training_to_gpu():
    from webapp.config.celery import app

    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.worker_prefetch_multiplier == 1 and conf.task_acks_late
    assert conf.task_soft_time_limit and conf.task_time_limit > conf.task_soft_time_limit
    assert {q.name for q in conf.task_queues} == {"gpu", "cpu"}
    assert conf.task_default_queue == "cpu"
    assert conf.task_routes["webapp.runs.tasks.run_generation"] == {"queue": "gpu"}
    reaper = conf.beat_schedule["reap-stale-generations"]
    assert reaper["task"] == "webapp.runs.tasks.reap_stale_generations" and reaper["schedule"] == 30.0


# --- the launcher ------------------------------------------------------------------------------


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _health(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        return None


@pytest.mark.slow
def test_launcher_starts_redis_and_the_stack_and_ctrl_c_leaves_no_process_behind(tmp_path):
    port, redis_port = free_port(), free_port()
    env = clean_env(tmp_path, REDIS_URL=f"redis://127.0.0.1:{redis_port}/0")
    launcher = subprocess.Popen(
        [str(REPO_ROOT / "paddock"), "serve", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    try:
        for line in launcher.stdout:  # the launcher prints the URL once /healthz is ok
            output.append(line)
            if "is running at" in line:
                break
        assert launcher.poll() is None, "".join(output)
        assert _health(f"http://127.0.0.1:{port}/healthz") == 200
        children = _descendants(launcher.pid)
        names = " ".join(" ".join(p.cmdline()) for p in children)
        assert "redis-server" in names and "daphne" in names and "beat" in names
        assert names.count(" worker ") >= 2  # training worker + cpu-queue worker (+ their pools)

        launcher.send_signal(signal.SIGINT)
        output.append(launcher.communicate(timeout=60)[0])
    finally:
        if launcher.poll() is None:
            launcher.kill()

    assert launcher.returncode == 0, "".join(output)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_gone(p) for p in children):
        time.sleep(0.2)
    assert [p.pid for p in children if not _gone(p)] == []
    assert _health(f"http://127.0.0.1:{port}/healthz") is None


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_launcher_demo_prints_the_login_once_last_with_the_run_page(tmp_path, data_dir):
    port, redis_port = free_port(), free_port()
    env = clean_env(tmp_path, REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", PADDOCK_DATA_DIR=str(data_dir))
    env.pop("PADDOCK_LOG_LEVEL", None)
    env.pop("PADDOCK_BASE_URL", None)
    launcher = subprocess.Popen(
        [str(REPO_ROOT / "paddock"), "demo", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    try:
        for line in launcher.stdout:  # demo_setup's last line is the login
            output.append(line)
            if line.startswith("demo: login:"):
                break
        assert launcher.poll() is None, "".join(output)
        children = _descendants(launcher.pid)
        launcher.send_signal(signal.SIGINT)
        output.append(launcher.communicate(timeout=60)[0])
    finally:
        if launcher.poll() is None:
            launcher.kill()

    text = "".join(output)
    password = (tmp_path / "var" / "demo_password").read_text().strip()
    assert text.count(password) == 1 and text.count("password") == 1, text
    shown = [line for line in text.splitlines() if line.startswith(("demo: ", "paddock: "))]
    before_ctrl_c = shown[: shown.index(f"demo: login: username demo  password {password}") + 1]
    assert before_ctrl_c[-2].startswith(f"demo: live run page: http://127.0.0.1:{port}/runs/"), text
    assert "level=INFO" not in text, "log lines do not interrupt the demo's progress lines"
    assert launcher.returncode == 0, text
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_gone(p) for p in children):
        time.sleep(0.2)
    assert [p.pid for p in children if not _gone(p)] == []


def test_try_it_says_a_clone_elsewhere_must_set_the_data_dir():
    readme = (REPO_ROOT / "README.md").read_text()
    guide = (REPO_ROOT / "docs" / "guide" / "demo.md").read_text()
    readme_try_it = readme[readme.index("## Try it") : readme.index("## Run the tests")]
    guide_try_it = guide[guide.index("## Try it") : guide.index("## The demo")]

    assert "PADDOCK_DATA_DIR=/path/to/shared/data ./paddock demo" in readme_try_it
    assert "PADDOCK_DATA_DIR=/path/to/shared/data ./paddock demo" in guide_try_it


def test_launcher_says_how_to_start_redis_when_it_cannot_start_one_itself(tmp_path):
    # 127.0.0.2 is not a name the launcher starts a server for: it must explain instead.
    env = clean_env(tmp_path, REDIS_URL=f"redis://127.0.0.2:{free_port()}/0")

    result = run([str(REPO_ROOT / "paddock"), "serve", "--port", str(free_port())], env)

    assert result.returncode != 0
    assert "Redis does not answer" in result.stderr and "redis-server --port" in result.stderr


def test_paddock_test_turns_no_collected_tests_into_a_failure(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}

    result = run(
        [
            str(REPO_ROOT / "paddock"),
            "test",
            "--no-lint",
            "tests/test_foundation.py",
            "-k",
            "no_test_is_named_like_this",
        ],
        env,
    )

    assert result.returncode == 1
    assert "collected no tests" in result.stderr


def _launcher():
    """The ``paddock`` launcher as a module (it has no ``.py`` suffix)."""
    loader = importlib.machinery.SourceFileLoader("paddock_launcher", str(REPO_ROOT / "paddock"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_a_full_paddock_test_runs_the_query_path_tests_again_on_the_other_database(tmp_path):
    launcher = _launcher()
    postgres = os.environ.get("DATABASE_URL", "")
    base = {"PATH": os.environ["PATH"], "REDIS_URL": "redis://127.0.0.1:6379/15"}
    # CI: PostgreSQL first, then SQLite, the default database, without DATABASE_URL.
    label, env = launcher.other_database_pass({**base, "DATABASE_URL": "postgres://u@h:5432/p"}, [])
    assert label.startswith("SQLite") and "DATABASE_URL" not in env and env["REDIS_URL"] == base["REDIS_URL"]
    # A chosen selection runs as asked, once.
    assert launcher.other_database_pass({**base, "DATABASE_URL": "postgres://u@h:5432/p"}, ["tests/trainer"]) is None
    # SQLite first: PostgreSQL when one accepts the connection, else no second pass.
    nobody = f"postgres://postgres@127.0.0.1:{free_port()}/postgres"
    assert launcher.other_database_pass({**base, "PADDOCK_TEST_POSTGRES_URL": nobody}, []) is None
    if postgres.startswith("postgres"):
        label, env = launcher.other_database_pass({**base, "PADDOCK_TEST_POSTGRES_URL": postgres}, [])
        assert label.startswith("PostgreSQL") and env["DATABASE_URL"] == postgres
    # The second pass selects tests that exist and are marked.
    result = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *launcher.OTHER_DATABASE_ARGS,
        ],
        {**os.environ, "PADDOCK_VAR_DIR": str(tmp_path / "var")},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    assert any("test_the_tag_filter_matches_whole_tags_on_every_database" in line for line in collected)
    assert not any(line.startswith("tests/e2e/") for line in collected)


# --- deployment files ------------------------------------------------------------------------


def compose_errors(document: dict) -> list[str]:
    """Where ``document`` breaks the Compose specification (its JSON schema, as shipped pinned in
    the check-jsonschema package: no network), one ``path: message`` line per error."""
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(document)]


def test_docker_compose_file_follows_the_compose_specification():
    # yaml.safe_load resolves the file's anchors and merge keys (<<: *paddock) as Compose does.
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())

    assert compose_errors(compose) == []
    services = compose["services"]
    assert set(services) == {"redis", "postgres", "web", "worker-gpu0", "cpu-worker", "beat"}
    gpu = services["worker-gpu0"]["deploy"]["resources"]["reservations"]["devices"]
    assert gpu == [{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}]
    assert "gpu" in services["worker-gpu0"]["command"] and "cpu" in services["cpu-worker"]["command"]
    assert "beat" in services["beat"]["command"]
    assert services["web"]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgres://")
    assert services["worker-gpu0"]["environment"]["SECRET_KEY"] == "${SECRET_KEY:?set SECRET_KEY}"


def _gpu_reservations(compose: dict) -> dict[str, list]:
    return {
        name: service["deploy"]["resources"]["reservations"]["devices"]
        for name, service in compose["services"].items()
        if "deploy" in service
    }


def test_compose_gpus_gives_every_gpu_its_own_worker_service_reserving_it_by_id():
    # `--scale worker=N` with a `count: 1` reservation put every replica on GPU 0.
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "paddock"), "compose-gpus", "4"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    compose = yaml.safe_load(result.stdout)

    assert compose_errors(compose) == []
    reservations = _gpu_reservations(compose)
    assert sorted(reservations) == [f"worker-gpu{i}" for i in range(4)]
    for i in range(4):
        service = compose["services"][f"worker-gpu{i}"]
        assert reservations[f"worker-gpu{i}"] == [{"driver": "nvidia", "device_ids": [str(i)], "capabilities": ["gpu"]}]
        assert service["environment"]["PADDOCK_WORKER_GPU"] == str(i)
        assert service["environment"]["PADDOCK_WORKER_DEVICE"] == "cuda"
        assert f"gpu{i}@%h" in service["command"]
    base = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    others = {k: v for k, v in compose["services"].items() if not k.startswith("worker-gpu")}
    assert others == {k: v for k, v in base["services"].items() if not k.startswith("worker-gpu")}


def test_compose_gpus_refuses_zero_gpus_with_exit_2():
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "paddock"), "compose-gpus", "0"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr == "paddock: compose-gpus: the number of GPUs must be at least 1\n"


def test_compose_validation_rejects_a_misspelt_gpu_reservation():
    text = (REPO_ROOT / "docker-compose.yml").read_text()
    broken = yaml.safe_load(text.replace("capabilities: [gpu]", "capabilites: [gpu]"))

    errors = compose_errors(broken)

    assert any(e.startswith("services.worker-gpu0.deploy.resources.reservations.devices.0") for e in errors), errors
    assert any("capabilites" in e for e in errors), errors


# --- the launcher provides the tests' system packages ----------------------------------------


def _bin_dir(folder: Path, scripts: dict[str, str]) -> str:
    """A PATH of one folder: python3 (for the launcher's ``#!/usr/bin/env python3``),
    redis-server when this machine has it, and ``scripts`` (name -> shell script); no chromium."""
    folder.mkdir(mode=0o755, parents=True)
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    (folder / "python3").symlink_to(python)
    if shutil.which("redis-server"):
        (folder / "redis-server").symlink_to(shutil.which("redis-server"))
    for name, body in scripts.items():
        (folder / name).write_text("#!/bin/sh\n" + body)
        (folder / name).chmod(0o755)
    return str(folder)


def _as_nobody() -> None:
    os.setgid(65534)
    os.setgroups([])
    os.setuid(65534)


def test_paddock_test_without_chromium_and_without_root_stops_before_pytest_with_the_command():
    # A user who may not install packages: not root (as root, the launcher runs as nobody from
    # a world-readable copy) and no sudo on PATH.
    place = Path(tempfile.mkdtemp(prefix="paddock-launcher-"))
    try:
        place.chmod(0o755)
        launcher = place / "paddock"
        shutil.copy(REPO_ROOT / "paddock", launcher)
        launcher.chmod(0o755)
        env = {"PATH": _bin_dir(place / "bin", {}), "HOME": str(place), "LANG": "C.UTF-8"}
        result = subprocess.run(
            [str(launcher), "test", "tests/test_foundation.py"],
            cwd=place,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            preexec_fn=_as_nobody if os.geteuid() == 0 else None,
        )
    finally:
        shutil.rmtree(place)

    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == "", "nothing ran: no pip, no ruff, no pytest"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "the tests need chromium" in lines[0]
    assert "`sudo apt-get update && sudo apt-get install -y chromium`" in lines[0]


def test_paddock_test_as_a_user_who_may_install_runs_apt_get_for_chromium(tmp_path):
    # apt-get here records what it was asked (it installs nothing, so the launcher then says that
    # chromium is still missing and stops before pytest). A non-root test run gets a sudo that
    # lets it through, as passwordless sudo would.
    record = tmp_path / "apt-get.log"
    scripts = {"apt-get": f'echo "$@" >> {record}\necho "apt-get output"\n'}
    if os.geteuid() != 0:
        scripts["sudo"] = '[ "$1" = -n ] && shift\nexec "$@"\n'
    env = {**os.environ, "PATH": _bin_dir(tmp_path / "bin", scripts)}
    env.pop("PADDOCK_CHROMIUM", None)

    result = run([str(REPO_ROOT / "paddock"), "test", "tests/test_foundation.py"], env)

    assert result.returncode == 1, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if line.startswith("paddock:")]
    assert said == [
        f"paddock: installing chromium with apt-get{'' if os.geteuid() == 0 else ' (sudo)'}, needed by the tests"
    ]
    assert "apt-get output" not in result.stdout, "apt-get's own output is not shown"
    assert record.read_text().splitlines() == ["update -q", "install -y -q chromium"]
    assert "chromium is still not found" in result.stderr


def test_the_launcher_finds_chromium_on_path_and_hands_it_to_the_browser_tests(tmp_path):
    chromium = tmp_path / "bin" / "chromium"
    env = {**os.environ, "PATH": _bin_dir(tmp_path / "bin", {"chromium": "exit 0\n"})}
    env.pop("PADDOCK_CHROMIUM", None)
    probe = tmp_path / "test_probe.py"
    probe.write_text("import os\n\ndef test_probe():\n    print('CHROMIUM=' + os.environ['PADDOCK_CHROMIUM'])\n")

    result = run([str(REPO_ROOT / "paddock"), "test", "--no-lint", str(probe), "-s", "-p", "no:cacheprovider"], env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"CHROMIUM={chromium}" in result.stdout
