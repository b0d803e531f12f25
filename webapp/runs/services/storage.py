"""Files in the default storage: local copies of checkpoints for workers, and agent bundles
(exported from a checkpoint on first download, then served from the storage)."""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from webapp import engine
from webapp.core import artifacts
from webapp.core.errors import AppError
from webapp.runs.models import Agent

logger = logging.getLogger(__name__)


def local_copy_of_checkpoint(name: str, dest: Path, *, expected_sha256: str | None = None) -> Path:
    """Copy a checkpoint from the default storage (a local folder or a bucket) to a local file:
    workers train, backtest and export from local files. With ``expected_sha256`` (the agent's
    recorded digest) the copy is checked before ``dest`` appears.

    Raises:
        AppError: the copy's SHA-256 is not ``expected_sha256``.
    """
    return artifacts.local_copy(name, Path(dest), expected_sha256=expected_sha256)


@dataclass(frozen=True)
class Bundle:
    """A finished bundle file in the default storage.

    Attributes:
        name: storage name of the zip.
        sha256: hex digest of the whole file (the download's ETag).
        size: bytes.
    """

    name: str
    sha256: str
    size: int


#: Bumped when the bundle's content for the same checkpoint changes (2: an ensemble's members,
#: generation and env steps; the task kind in the model card), so older bundles are exported again.
EXPORT_VERSION = 2


def _sidecar_name(agent: Agent) -> str:
    return f"bundles/run-{agent.run_id}/agent-{agent.id}.json"


def _read_sidecar(agent: Agent) -> Bundle | None:
    name = _sidecar_name(agent)
    if not default_storage.exists(name):
        return None
    try:
        with default_storage.open(name, "rb") as fh:
            info = json.loads(fh.read().decode())
        bundle = Bundle(name=info["name"], sha256=info["sha256"], size=int(info["size"]))
        # a sidecar of another checkpoint (an older agent under the same id, e.g. a reused
        # storage folder after the database was recreated) is stale: export again
        if info["checkpoint_sha256"] != agent.sha256:
            return None
        if info.get("export") != EXPORT_VERSION:  # exported by an older Paddock: card or config changed
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return bundle if default_storage.exists(bundle.name) else None


def agent_bundle(agent: Agent) -> Bundle:
    """The agent's downloadable bundle, exported from its checkpoint on first use.

    The zip is written to a local temporary file by the trainer, copied to the default storage,
    and only then is the sidecar ``agent-<id>.json`` (name, sha256, size) written: a reader
    trusts a bundle only through its sidecar, so a half-copied file is never served. Two first
    downloads racing both export; the second to finish keeps the first one's file.

    Raises:
        AppError: the agent has no checkpoint (404) or the checkpoint is unreadable (400).
    """
    found = _read_sidecar(agent)
    if found is not None:
        return found
    if default_storage.exists(_sidecar_name(agent)):  # stale or unreadable: replaced below
        default_storage.delete(_sidecar_name(agent))
    if not agent.checkpoint or not default_storage.exists(agent.checkpoint):
        raise AppError("this agent has no checkpoint to export", status=404)
    with tempfile.TemporaryDirectory(prefix="paddock-bundle-") as tmp:
        local = local_copy_of_checkpoint(agent.checkpoint, Path(tmp) / "agent.pt", expected_sha256=agent.sha256)
        out = Path(tmp) / f"agent-{agent.id}.zip"
        if agent.kind == Agent.Kind.ENSEMBLE:
            depth = dict(Agent.objects.filter(pk__in=agent.members).values_list("id", "depth"))
            members = [{"id": pk, "generation": depth.get(pk)} for pk in agent.members]
            sha256 = engine.export_bundle(local, out, ensemble_members=members, total_env_steps=agent.total_env_steps)
        else:
            sha256 = engine.export_bundle(local, out)
        size = out.stat().st_size
        with open(out, "rb") as fh:
            stored = default_storage.save(f"bundles/run-{agent.run_id}/agent-{agent.id}.zip", File(fh))
    again = _read_sidecar(agent)
    if again is not None:  # lost a race: keep the first finished bundle
        default_storage.delete(stored)
        return again
    bundle = Bundle(name=stored, sha256=sha256, size=size)
    payload = json.dumps(
        {"name": stored, "sha256": sha256, "size": size, "checkpoint_sha256": agent.sha256, "export": EXPORT_VERSION}
    ).encode()
    default_storage.save(_sidecar_name(agent), ContentFile(payload))
    logger.info("exported bundle of agent %s (%d bytes)", agent.id, size, extra={"run": agent.run_id})
    return bundle
