"""Fixtures of the serving tests: the bundle an agent's page downloads, loaded with
``trainer.load_agent`` (the reference the REST answers are checked against)."""

from __future__ import annotations

import pytest

from trainer.artifacts.bundle_reader import load_agent


@pytest.fixture
def bundle(agent, api_client, tmp_path):
    """The test's ``agent`` fixture's bundle, downloaded through the API and loaded."""
    response = api_client.get(f"/api/agents/{agent.id}/bundle/")
    path = tmp_path / "agent.zip"
    path.write_bytes(b"".join(response.streaming_content))
    return load_agent(path)
