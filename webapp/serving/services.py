"""Writes and rules of policy serving: serve tokens, the per-token rate limit, act calls.

Rate limit (documented in the README): at most ``PADDOCK_SERVE_RATE_LIMIT`` act requests (600
by default) per token and calendar minute, counted in Redis (``INCR`` of a key per token and
minute, expiring after two minutes), so every web process shares one count. A serve token is
counted by its own id; a session or account token by its user. Over the limit the endpoint
answers 429 with ``Retry-After`` (seconds to the next minute).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import selectors
from webapp.runs import services as runs_services
from webapp.runs.models import Agent
from webapp.serving.models import AgentServeStats, ServeToken


@transaction.atomic
def serve_token_create(*, owner, name: str, agent_id: int | None = None) -> ServeToken:
    """Create a serve token, optionally limited to one of the owner's agents.

    Raises:
        AppError: empty or too long ``name``; ``agent_id`` is not one of the owner's agents.
    """
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise AppError("a token needs a name of 1 to 100 characters", fields={"name": "1 to 100 characters"})
    agent = None
    if agent_id is not None:
        agent = selectors.agent_get(user=owner, agent_id=agent_id)
        if agent is None:
            raise AppError(f"agent #{agent_id} is not one of your agents", fields={"agent": "not one of your agents"})
    return ServeToken.objects.create(owner=owner, name=name, agent=agent)


def serve_token_revoke(*, owner, token_id: int) -> None:
    """Delete one of the owner's serve tokens (no error when it is already gone)."""
    ServeToken.objects.filter(owner=owner, pk=token_id).delete()


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def rate_limit_check(identity: str) -> int | None:
    """Count one request of ``identity``; ``None`` when allowed, else seconds until the next window.

    Raises:
        AppError: 503 when Redis cannot be reached (the limit cannot be enforced).
    """
    now = time.time()
    minute = int(now // 60)
    key = f"paddock:serve:rate:{identity}:{minute}"
    try:
        pipe = _redis().pipeline()
        pipe.incr(key)
        pipe.expire(key, 120)
        count = pipe.execute()[0]
    except redis.RedisError as exc:
        raise AppError(f"the rate limiter is unavailable ({exc.__class__.__name__}); try again", status=503) from None
    if count > settings.PADDOCK_SERVE_RATE_LIMIT:
        return max(1, int((minute + 1) * 60 - now + 0.999))
    return None


def _bundle_path(agent: Agent) -> Path:
    bundle = runs_services.agent_bundle(agent)
    return Path(default_storage.path(bundle.name))


def agent_act(*, agent: Agent, body: Any, token: ServeToken | None) -> dict[str, Any]:
    """Answer an act request for ``agent`` and count it.

    The agent's bundle is exported on first use (as for downloads); inference runs in the
    engine's onnxruntime session cache.

    Raises:
        AppError: a bad body (400 naming the field; counted as an error of the agent).
    """
    try:
        out = engine.serve_act(
            agent.id,
            _bundle_path(agent),
            body,
            cache_size=settings.PADDOCK_SERVE_CACHE_SIZE,
            data_dir=str(settings.PADDOCK_DATA_DIR),
            cache_dir=str(settings.PADDOCK_CACHE_DIR),
        )
    except engine.TrainerError as exc:
        _count(agent.id, calls=0, observations=0, errors=1)
        raise AppError.from_trainer(exc) from None
    rows = len(out["actions"]) if "actions" in out else 1
    if token is None:
        _count(agent.id, calls=1, observations=rows, errors=0)
        return out
    with transaction.atomic():  # one commit for both counters
        _count(agent.id, calls=1, observations=rows, errors=0)
        ServeToken.objects.filter(pk=token.pk).update(calls=F("calls") + 1, last_used_at=timezone.now())
    return out


def _count(agent_id: int, *, calls: int, observations: int, errors: int) -> None:
    """Add to the agent's call counters (one UPDATE; the row is created on the first call)."""
    changes = {
        "calls": F("calls") + calls,
        "observations": F("observations") + observations,
        "errors": F("errors") + errors,
    }
    if calls:
        changes["last_called_at"] = timezone.now()
    if not AgentServeStats.objects.filter(agent_id=agent_id).update(**changes):
        AgentServeStats.objects.get_or_create(agent_id=agent_id)
        AgentServeStats.objects.filter(agent_id=agent_id).update(**changes)
