"""Writes and rules of policy serving: serve tokens and act calls.

An act request costs one Redis round trip for the rate limit, the agent's cached entry and the
token's cached credential (:func:`act_preflight`, called by the token authentication classes
of ``auth.py``), the inference, and one round trip for the call counters (``counters.py``);
the database is read only on a cache miss.
Over the rate limit the endpoint answers 429 with ``Retry-After`` (seconds to the next minute).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from webapp import engine
from webapp.core import artifacts
from webapp.core.errors import AppError, fields_message
from webapp.runs import services as runs_services
from webapp.runs.selectors.runs import agent_get
from webapp.serving import cache, counters
from webapp.serving.models import ServeToken

#: The longest token name (``ServeToken.name``'s column).
MAX_TOKEN_NAME = ServeToken._meta.get_field("name").max_length


@transaction.atomic
def serve_token_create(*, owner, name: str, agent: str | int | None = None) -> ServeToken:
    """Create a serve token, optionally limited to one of the owner's agents.

    Args:
        name: what the token is for, 1 to :data:`MAX_TOKEN_NAME` characters once stripped.
        agent: the agent's number as typed (``"12"``, ``"#12"``) or an int; empty or ``None``:
            any of the owner's agents.

    Raises:
        AppError: every problem at once: ``name`` blank or too long (its limit named), ``agent``
            not a whole number >= 1 or not one of the owner's agents.
    """
    fields: dict[str, str] = {}
    name = (name or "").strip()
    if not name:
        fields["name"] = f"required: a name of 1 to {MAX_TOKEN_NAME} characters"
    elif len(name) > MAX_TOKEN_NAME:
        fields["name"] = f"at most {MAX_TOKEN_NAME} characters, got {len(name):,}"
    text = str(agent if agent is not None else "").strip().lstrip("#")
    found = None
    if text:
        number = int(text) if text.isdecimal() and len(text) <= 18 else 0
        if number < 1:
            fields["agent"] = f"an agent number, e.g. 12, got {text[:40]!r}"
        else:
            found = agent_get(user=owner, agent_id=number)
            if found is None:
                fields["agent"] = f"agent #{number} is not one of your agents"
    if fields:
        raise AppError(fields_message(fields), fields=fields)
    return ServeToken.objects.create(owner=owner, name=name, agent=found)


def serve_token_revoke(*, owner, token_id: int) -> None:
    """Delete one of the owner's serve tokens (no error when it is already gone)."""
    ServeToken.objects.filter(owner=owner, pk=token_id).delete()


def token_identity(token_key: str) -> str:
    """Whose rate-limit count a token request adds to: the token's own (its key's hash)."""
    return "token-" + hashlib.sha256(token_key.encode()).hexdigest()[:32]


def user_identity(user) -> str:
    """Whose count a session request adds to: the user, with their join time (ids restart in a
    fresh database while Redis keeps counting)."""
    return f"user-{user.pk}-{user.date_joined.timestamp():.0f}"


@dataclass(frozen=True)
class Preflight:
    """What one Redis round trip says about an act request before it is served.

    Attributes:
        retry_after: seconds until the next rate-limit window when over the limit, else ``None``.
        entry: the agent's cached entry (``None`` on a miss; check its owner before use).
        credential: the token's cached credential (``None`` on a miss or without a token).
    """

    retry_after: int | None
    entry: cache.AgentEntry | None
    credential: cache.Credential | None = None


def act_preflight(*, identity: str, agent_id: int, token_key: str | None = None) -> Preflight:
    """Count the request against ``identity``'s rate limit and read ``agent_id``'s cached entry
    (and ``token_key``'s cached credential), in one Redis round trip.

    Raises:
        AppError: 503 when Redis cannot be reached (the limit cannot be enforced).
    """
    now = time.time()
    try:
        pipe = cache.redis_client().pipeline(transaction=False)
        counters.queue_rate_count(pipe, identity, now)
        cache.queue_agent_get(pipe, agent_id)
        if token_key is not None:
            cache.queue_credential_get(pipe, token_key)
        count, _, raw_entry, *raw_credential = pipe.execute()
    except redis.RedisError as exc:
        raise AppError(f"the rate limiter is unavailable ({exc.__class__.__name__}); try again", status=503) from None
    return Preflight(
        retry_after=counters.retry_after(count, now),
        entry=cache.agent_entry_from_raw(raw_entry),
        credential=cache.credential_from_raw(raw_credential[0]) if raw_credential else None,
    )


def agent_entry(*, user, agent_id: int, cached: cache.AgentEntry | None) -> cache.AgentEntry | None:
    """What the act endpoint needs of one of ``user``'s agents: the cached entry when it is the
    user's and its bundle is there, else read from the database (exporting the bundle on first
    use, as downloads do) and cached. ``None`` when the agent is not one of the user's.

    Raises:
        AppError: the agent has no checkpoint (404) or it cannot be exported (400).
    """
    joined = cache.stamp(user.date_joined)
    if cached is not None and cached.belongs_to(user.pk, joined) and cached.usable():
        return cached
    agent = agent_get(user=user, agent_id=agent_id)
    if agent is None:
        return None
    bundle = runs_services.agent_bundle(agent)
    entry = cache.AgentEntry(
        agent_id=agent.pk,
        agent_stamp=cache.stamp(agent.created_at),
        owner_id=user.pk,
        owner_joined_us=joined,
        bundle_path=str(artifacts.local_path(bundle.name, sha256=bundle.sha256, cache_dir=settings.PADDOCK_CACHE_DIR)),
    )
    cache.agent_entry_store(entry)
    return entry


def agent_act(*, entry: cache.AgentEntry, body: Any, credential: cache.Credential | None) -> dict[str, Any]:
    """Answer an act request for the agent of ``entry`` and count it (in Redis, see
    ``webapp/serving/counters.py``).

    Inference runs in the engine's onnxruntime session cache.

    Raises:
        AppError: a bad body (400 naming the field; counted as an error of the agent).
    """
    agent = counters.agent_member(entry.agent_id, entry.agent_stamp)
    token = None
    if credential is not None and credential.is_serve_token:
        token = counters.token_member(credential.token_id, credential.token_stamp)
    try:
        out = engine.serve_act(
            entry.agent_id,
            entry.bundle_path,
            body,
            cache_size=settings.PADDOCK_SERVE_CACHE_SIZE,
            data_dir=str(settings.PADDOCK_DATA_DIR),
            cache_dir=str(settings.PADDOCK_CACHE_DIR),
        )
    except engine.TrainerError as exc:
        counters.count(agent=agent, token=None, calls=0, observations=0, errors=1)
        raise AppError.from_trainer(exc) from None
    rows = len(out["actions"]) if "actions" in out else 1
    counters.count(agent=agent, token=token, calls=1, observations=rows, errors=0)
    return out
