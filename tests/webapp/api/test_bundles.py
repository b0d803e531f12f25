"""Agent bundle downloads: exported once, SHA-256 ETag, resumable with Range and If-Range."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

pytestmark = pytest.mark.django_db


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


@pytest.fixture
def bundle(world, api_client):
    agent = world.agents[1]
    response = api_client.get(f"/api/agents/{agent.id}/bundle/")
    assert response.status_code == 200
    return agent, response, _body(response)


def test_bundle_download_is_a_zip_whose_sha256_is_the_etag(bundle):
    agent, response, body = bundle
    assert response["Content-Type"] == "application/zip"
    assert int(response["Content-Length"]) == len(body)
    assert response["ETag"] == f'"{hashlib.sha256(body).hexdigest()}"'
    assert response["Accept-Ranges"] == "bytes"
    assert f"paddock-agent-{agent.id}.zip" in response["Content-Disposition"]
    names = set(zipfile.ZipFile(io.BytesIO(body)).namelist())
    assert {"policy.safetensors", "config.json", "policy.onnx", "README.md", "SHA256SUMS"} <= names


def test_the_bundle_is_exported_once_and_served_again_from_storage(bundle, api_client):
    agent, first, body = bundle
    again = api_client.get(f"/api/agents/{agent.id}/bundle/")
    assert again["ETag"] == first["ETag"]
    assert _body(again) == body


def test_a_broken_download_resumes_with_range_and_if_range(bundle, api_client):
    agent, first, body = bundle
    cut = len(body) // 3
    rest = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_RANGE=f"bytes={cut}-", HTTP_IF_RANGE=first["ETag"])
    assert rest.status_code == 206
    assert rest["Content-Range"] == f"bytes {cut}-{len(body) - 1}/{len(body)}"
    assert int(rest["Content-Length"]) == len(body) - cut
    assert body[:cut] + _body(rest) == body


def test_suffix_and_bounded_ranges(bundle, api_client):
    agent, _, body = bundle
    tail = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_RANGE="bytes=-100")
    assert tail.status_code == 206 and _body(tail) == body[-100:]
    middle = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_RANGE="bytes=10-19")
    assert middle.status_code == 206 and _body(middle) == body[10:20]


def test_a_range_past_the_end_is_416(bundle, api_client):
    agent, _, body = bundle
    response = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_RANGE=f"bytes={len(body)}-")
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{len(body)}"
    assert response.json()["fields"] == {"Range": "unsatisfiable"}  # the API's error format, not an empty body
    assert f"{len(body):,} bytes" in response.json()["error"]


def test_a_stale_if_range_gets_the_whole_new_file(bundle, api_client):
    agent, _, body = bundle
    response = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_RANGE="bytes=5-", HTTP_IF_RANGE='"0000"')
    assert response.status_code == 200 and _body(response) == body


def test_a_malformed_or_multi_range_header_gets_the_whole_file(bundle, api_client):
    agent, _, body = bundle
    for header in ("bytes=9-3", "items=0-5", "bytes=0-1,5-6"):
        response = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_RANGE=header)
        assert response.status_code == 200, header
        assert _body(response) == body


def test_if_none_match_with_the_etag_is_304(bundle, api_client):
    agent, first, _ = bundle
    response = api_client.get(f"/api/agents/{agent.id}/bundle/", HTTP_IF_NONE_MATCH=first["ETag"])
    assert response.status_code == 304


def test_the_page_download_link_serves_the_same_bundle(bundle, client, user):
    agent, first, body = bundle
    client.force_login(user)
    response = client.get(f"/agents/{agent.id}/bundle/")
    assert response.status_code == 200 and response["ETag"] == first["ETag"]
    assert b"".join(response.streaming_content) == body


def test_head_on_a_bundle_gives_the_download_headers_without_a_body(bundle, api_client, client, user):
    agent, first, body = bundle
    client.force_login(user)
    for c, url in ((api_client, f"/api/agents/{agent.id}/bundle/"), (client, f"/agents/{agent.id}/bundle/")):
        head = c.head(url)
        assert head.status_code == 200, url
        assert head["ETag"] == first["ETag"] and int(head["Content-Length"]) == len(body)
        assert head["Content-Type"] == "application/zip"
        content = b"".join(head.streaming_content) if head.streaming else head.content
        assert content == b""


def test_a_sidecar_of_another_checkpoint_is_not_served(bundle, api_client):
    """Agent ids restart in a new database while the storage folder stays: a bundle exported for
    an older agent #N must not be served for the new agent #N."""
    import json

    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from webapp.runs import services

    agent, first, _ = bundle
    old = services.agent_bundle(agent)
    # the sidecar an older agent under the same id left: another checkpoint's digest
    sidecar = f"bundles/run-{agent.run_id}/agent-{agent.id}.json"
    with default_storage.open(sidecar, "rb") as fh:
        info = json.loads(fh.read())
    default_storage.delete(sidecar)
    default_storage.save(sidecar, ContentFile(json.dumps({**info, "checkpoint_sha256": "f" * 64}).encode()))
    fresh = services.agent_bundle(agent)
    assert fresh.name != old.name
    assert services.agent_bundle(agent) == fresh  # exported once, then served from storage again


def test_a_gpu_trained_agent_downloads_from_a_cpu_server(user, trained_checkpoint, api_client, tmp_path):
    # A GPU worker's checkpoint holds a CUDA generator's 16-byte state; the bundle used to be a
    # 400 ("Expected a CPUGeneratorImplState of size 5056").
    import torch

    from tests.webapp.conftest import make_world
    from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint

    state = load_checkpoint(trained_checkpoint["path"])
    state["agent"]["generator"] = torch.arange(16, dtype=torch.uint8)
    state["agent"]["generator_device"] = "cuda"
    path = tmp_path / "gpu.pt"
    sha256 = save_checkpoint(state, path)
    world = make_world(
        user, "gpu-data", checkpoint={**trained_checkpoint, "path": path, "sha256": sha256}, scores=[1.0]
    )
    response = api_client.get(f"/api/agents/{world.agents[0].id}/bundle/")
    assert response.status_code == 200
    assert "policy.onnx" in zipfile.ZipFile(io.BytesIO(_body(response))).namelist()
