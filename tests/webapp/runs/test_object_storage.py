"""Artifacts in an S3-compatible bucket only (``PADDOCK_STORAGE=s3``), against a real S3 server.

The server is moto's standalone S3 server (HTTP on a free localhost port, in a thread of the
test process). The web server (daphne) and the worker are separate processes, each with a
``PADDOCK_VAR_DIR`` and ``PADDOCK_ARTIFACTS_DIR`` of its own: a checkpoint the worker trains is
read back by the worker's next generation and backtests, and the web's bundle download reads
it, only because the bucket carries it; so does the data file a user uploaded.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from tests.harness import Workers, free_port, http_status, start_process, stop_process, wait_until
from tests.webapp.runs.conftest import worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BUCKET = "paddock-artifacts"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "paddock-test", "AWS_SECRET_ACCESS_KEY": "paddock-test-secret"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a free port with an empty bucket :data:`BUCKET`; its URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        _client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        server.stop()


def _client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}),
    )


def s3_settings(endpoint: str) -> dict[str, str]:
    """The environment that puts a process's artifacts in the test bucket."""
    return {
        "PADDOCK_STORAGE": "s3",
        "PADDOCK_S3_BUCKET": BUCKET,
        "PADDOCK_S3_ENDPOINT_URL": endpoint,
        "PADDOCK_S3_REGION": "us-east-1",
        "PADDOCK_S3_ADDRESSING_STYLE": "path",
        **CREDENTIALS,
    }


def _bucket_keys(endpoint: str) -> list[str]:
    pages = _client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _wait(predicate, *, timeout: float, what: str, procs=()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"{what}: a process exited with {proc.returncode}, log {proc.log_path}")
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def split_machines(transactional_db, isolated_redis, data_dir, s3_endpoint, tmp_path) -> Iterator[dict]:
    """A web process and a worker process that share the database, Redis and the bucket, and no
    folder: ``{"web": base URL, "web_artifacts": Path, "worker_artifacts": Path, "procs": [...]}``.
    Started after the transactional database (and so stopped before its flush)."""
    from django.conf import settings

    web_var, worker_var = tmp_path / "web-var", tmp_path / "worker-var"
    common = {**s3_settings(s3_endpoint), "SECRET_KEY": settings.SECRET_KEY}
    web_env = worker_env(
        isolated_redis,
        data_dir,
        PADDOCK_VAR_DIR=str(web_var),
        PADDOCK_ARTIFACTS_DIR=str(web_var / "artifacts"),
        **common,
    )
    work_env = worker_env(
        isolated_redis,
        data_dir,
        PADDOCK_VAR_DIR=str(worker_var),
        PADDOCK_ARTIFACTS_DIR=str(worker_var / "artifacts"),
        PADDOCK_WORKER_DEVICE="cpu",
        CUDA_VISIBLE_DEVICES="",
        **common,
    )
    log_dir = Path(settings.VAR_DIR) / "worker-logs"
    port = free_port()
    daphne = start_process(
        "s3-daphne",
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.config.asgi:application"],
        web_env,
        log_dir=log_dir,
    )
    workers = Workers(work_env, log_dir)
    try:
        workers.start("s3-worker")
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_status(base + "/accounts/login/") == 200, daphne, "daphne (s3)")
        yield {
            "web": base,
            "web_artifacts": web_var / "artifacts",
            "web_cache": web_var / "cache",
            "worker_cache": worker_var / "cache",
            "worker_artifacts": worker_var / "artifacts",
            "procs": [daphne, *workers.procs.values()],
        }
    finally:
        workers.stop_all()
        stop_process(daphne)


def _get(url: str, token: str, **headers: str):
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}", **headers})
    return urllib.request.urlopen(request, timeout=60)


def _uploaded_file(data_dir: Path) -> bytes:
    """The three test tickers of the real Dow-30 file, 2017-2020, as the CSV a user uploads."""
    import pandas as pd

    from tests.conftest import DOW30_FILE
    from tests.webapp.conftest import TICKERS

    frame = pd.read_csv(data_dir / DOW30_FILE)
    frame = frame[frame["tic"].isin(TICKERS) & (frame["date"] >= "2017-01-01") & (frame["date"] <= "2020-12-31")]
    return frame.to_csv(index=False).encode()


@pytest.fixture
def uploaded_task(s3_endpoint, settings, monkeypatch, user, data_dir):
    """A task on a dataset uploaded by ``user``, stored in the bucket: this process (the side
    that takes the upload) uses the bucket too, for both artifacts and uploads."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.webapp.conftest import create_task
    from webapp.config.storage import storages
    from webapp.market import services as market_services

    for name, value in s3_settings(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    settings.STORAGES = storages(artifacts_dir=Path("/nonexistent"), uploads_dir=Path("/nonexistent"))
    # the field's storage was resolved when the model loaded, with this process's settings
    from django.core.files.storage import storages as configured

    from webapp.market.models import Dataset

    monkeypatch.setattr(Dataset._meta.get_field("upload"), "storage", configured["uploads"])
    settings.PADDOCK_DATA_DIR = data_dir
    upload = SimpleUploadedFile("dow3.csv", _uploaded_file(data_dir), content_type="text/csv")
    dataset = market_services.dataset_create_from_upload(owner=user, name="dow3 upload", upload=upload)
    return create_task(user, dataset)


def test_a_run_trains_backtests_and_downloads_with_artifacts_only_in_the_bucket(
    uploaded_task, split_machines, s3_endpoint, user, make_budget, tmp_path
):
    import json

    from rest_framework.authtoken.models import Token

    from webapp.reports.models import Backtest
    from webapp.runs import services
    from webapp.runs.models import Agent, Run

    token = Token.objects.create(user=user).key
    budget = make_budget(max_concurrent_pods=1, env_step_cap=2 * 256)
    run = services.run_create(
        owner=user,
        task=uploaded_task,
        budget=budget,
        num_pods=1,
        generation_steps=256,
        leaderboard_size=2,
        mutation={"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 1.25]},
        device="cpu",
    )
    run = services.run_start(run=run)
    procs = split_machines["procs"]

    # train: the second generation starts from the first one's checkpoint, read from the bucket
    _wait(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.FINISHED,
        timeout=90,
        what="the run to finish",
        procs=procs,
    )
    trained = list(Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED).order_by("id"))
    assert len(trained) == 2
    assert trained[1].parent_id == trained[0].pk

    # leaderboard, through the web process
    with _get(f"{split_machines['web']}/api/runs/{run.pk}/leaderboard/", token) as response:
        board = json.loads(response.read())["results"]
    assert {a["id"] for a in board} <= {a.pk for a in trained} and board

    # backtest: the end-of-run backtests of the best agents, run by the worker
    _wait(
        lambda: (
            Backtest.objects.filter(run=run, status=Backtest.Status.DONE).exists()
            and not Backtest.objects.filter(run=run).exclude(status__in=[Backtest.Status.DONE, Backtest.Status.FAILED])
        ),
        timeout=60,
        what="the end-of-run backtests",
        procs=procs,
    )
    done = Backtest.objects.filter(run=run, status=Backtest.Status.DONE).first()
    with _get(f"{split_machines['web']}/api/backtests/{done.pk}/daily.csv/", token) as response:
        assert response.status == 200
        assert response.read().decode().startswith("date,")

    # bundle download in two ranges, as a resumed download would fetch it
    best = board[0]["id"]
    url = f"{split_machines['web']}/api/agents/{best}/bundle/"
    with _get(url, token, Range="bytes=0-999") as first:
        assert first.status == 206
        etag = first.headers["ETag"]
        size = int(first.headers["Content-Range"].rsplit("/", 1)[1])
        head = first.read()
    assert len(head) == 1000 and size > 1000
    with _get(url, token, Range="bytes=1000-", **{"If-Range": etag}) as rest:
        assert rest.status == 206
        assert rest.headers["Content-Range"] == f"bytes 1000-{size - 1}/{size}"
        tail = rest.read()
    zip_path = tmp_path / "agent.zip"
    zip_path.write_bytes(head + tail)
    sha256 = hashlib.sha256(head + tail).hexdigest()
    assert etag == f'"{sha256}"'
    (tmp_path / "agent.zip.sha256").write_text(f"{sha256}  agent.zip\n")
    check = subprocess.run(["sha256sum", "-c", "agent.zip.sha256"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0 and "agent.zip: OK" in check.stdout

    # policy serving: the web process runs the bundle from a local copy checked against its digest
    act = urllib.request.Request(
        f"{split_machines['web']}/api/agents/{best}/act",
        data=json.dumps({"date": "2020-12-31"}).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(act, timeout=60) as response:
        assert response.status == 200
        assert len(json.loads(response.read())["action"]) == 3
    assert (split_machines["web_cache"] / "artifacts" / f"{sha256}.zip").exists()

    # every artifact is in the bucket; neither machine's artifacts folder holds a file
    keys = _bucket_keys(s3_endpoint)
    assert {a.checkpoint for a in trained} <= set(keys)
    assert done.daily_csv in keys
    assert f"bundles/run-{run.pk}/agent-{best}.zip" in keys
    assert _files_under(split_machines["web_artifacts"]) == []
    assert _files_under(split_machines["worker_artifacts"]) == []
    # the uploaded data file too: the worker trained on its own copy, fetched from the bucket
    upload = uploaded_task.dataset.upload.name
    assert f"uploads/{upload}" in keys
    assert [p.split("/", 1)[1] for p in _files_under(split_machines["worker_cache"] / "uploads")] == [upload]
    assert _files_under(split_machines["worker_artifacts"].parent / "uploads") == []


# --- the storage seam on its own, against the same server ----------------------------------------


@pytest.fixture
def bucket_storage(s3_endpoint, monkeypatch):
    """An S3 default-storage backend built from the settings module's own reading of the
    environment (as ``STORAGES["default"]`` would be), on a prefix of its own."""
    from storages.backends.s3 import S3Storage

    from webapp.config.storage import storages

    for name, value in {**s3_settings(s3_endpoint), "PADDOCK_S3_PREFIX": "unit"}.items():
        monkeypatch.setenv(name, value)
    config = storages(artifacts_dir=Path("/nonexistent"), uploads_dir=Path("/nonexistent"))["default"]
    assert config["BACKEND"] == "storages.backends.s3.S3Storage"
    return S3Storage(**config["OPTIONS"])


def test_a_ranged_read_from_the_bucket_returns_exactly_those_bytes(bucket_storage, s3_endpoint):
    from django.core.files.base import ContentFile

    from webapp.core import artifacts

    data = bytes(range(256)) * 9000  # 2.2 MiB: more than one read chunk
    name = bucket_storage.save("ranges/blob.bin", ContentFile(data))

    assert "unit/ranges/blob.bin" in _bucket_keys(s3_endpoint)
    for start, length in [(0, 10), (1_000_000, 1_500_000), (len(data) - 7, 7), (5, 0)]:
        assert (
            b"".join(artifacts.read_range(name, start, length, storage=bucket_storage)) == data[start : start + length]
        )


def test_a_name_taken_in_the_bucket_is_never_overwritten(bucket_storage):
    from django.core.files.base import ContentFile

    first = bucket_storage.save("taken/agent.zip", ContentFile(b"first"))
    second = bucket_storage.save("taken/agent.zip", ContentFile(b"second"))

    assert first != second
    assert bucket_storage.open(first).read() == b"first"


def test_a_corrupt_object_never_becomes_a_local_copy(bucket_storage, tmp_path):
    from django.core.files.base import ContentFile

    from webapp.core import artifacts
    from webapp.core.errors import AppError

    name = bucket_storage.save("corrupt/agent.pt", ContentFile(b"bytes that were changed"))
    good = hashlib.sha256(b"the bytes that were stored").hexdigest()

    with pytest.raises(AppError, match="SHA-256"):
        artifacts.local_copy(name, tmp_path / "agent.pt", expected_sha256=good, storage=bucket_storage)
    assert list(tmp_path.iterdir()) == []
    ok = artifacts.local_copy(
        name,
        tmp_path / "agent.pt",
        expected_sha256=hashlib.sha256(b"bytes that were changed").hexdigest(),
        storage=bucket_storage,
    )
    assert ok.read_bytes() == b"bytes that were changed"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PADDOCK_STORAGE": "gcs"}, "PADDOCK_STORAGE"),
        ({"PADDOCK_STORAGE": "s3"}, "PADDOCK_S3_BUCKET"),
        (
            {"PADDOCK_STORAGE": "s3", "PADDOCK_S3_BUCKET": "b", "PADDOCK_S3_ENDPOINT_URL": "ftp://x"},
            "PADDOCK_S3_ENDPOINT_URL",
        ),
        (
            {"PADDOCK_STORAGE": "s3", "PADDOCK_S3_BUCKET": "b", "PADDOCK_S3_ADDRESSING_STYLE": "dns"},
            "PADDOCK_S3_ADDRESSING_STYLE",
        ),
    ],
)
def test_a_bad_storage_setting_stops_start_up_naming_the_variable(env, named, monkeypatch):
    from webapp.config.env import SettingsError
    from webapp.config.storage import storages

    for name in ("PADDOCK_S3_BUCKET", "PADDOCK_S3_ENDPOINT_URL", "PADDOCK_S3_ADDRESSING_STYLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(SettingsError, match=f"^{named}:"):
        storages(artifacts_dir=Path("/nonexistent"), uploads_dir=Path("/nonexistent"))


def test_local_files_remain_the_default(monkeypatch, tmp_path):
    from webapp.config.storage import storages

    monkeypatch.delenv("PADDOCK_STORAGE", raising=False)

    configured = storages(artifacts_dir=tmp_path / "artifacts", uploads_dir=tmp_path / "uploads")

    local = "django.core.files.storage.FileSystemStorage"
    assert configured["default"] == {"BACKEND": local, "OPTIONS": {"location": str(tmp_path / "artifacts")}}
    assert configured["uploads"] == {"BACKEND": local, "OPTIONS": {"location": str(tmp_path / "uploads")}}


def test_an_upload_replaced_under_the_same_name_is_fetched_again(bucket_storage, settings, tmp_path):
    from django.core.files.base import ContentFile

    from webapp.market.models import upload_local_path

    settings.PADDOCK_CACHE_DIR = tmp_path / "cache"
    name = bucket_storage.save("datasets/2026/12/prices.csv", ContentFile(b"date,tic,close\nold\n"))
    first = upload_local_path(name, bucket_storage)
    bucket_storage.delete(name)
    assert bucket_storage.save(name, ContentFile(b"date,tic,close\nnew\n")) == name
    second = upload_local_path(name, bucket_storage)

    assert first.read_bytes().endswith(b"old\n") and second.read_bytes().endswith(b"new\n")
    assert upload_local_path(name, bucket_storage) == second  # fetched once per version
