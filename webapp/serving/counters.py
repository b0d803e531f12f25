"""Per-token rate limit and per-agent / per-token call counters of the act endpoint, in Redis.

Rate limit (documented in docs/reference/serving.md): at most ``PADDOCK_SERVE_RATE_LIMIT`` act requests (600
by default) per token and calendar minute: ``INCR`` of a key per identity and minute plus its
``EXPIRE`` (two minutes), sent in the same pipeline as the agent lookup, so a request costs one
Redis round trip for both and every web process shares one count.

Call counters: each answered request adds to a Redis hash of its agent (``calls``,
``observations``, ``errors``, ``last``) and of its serve token (``calls``, ``last``) in one
pipeline, and marks them dirty. :func:`flush` (the ``flush-serve-counters`` beat entry in the
settings, every 30 s) moves them into ``AgentServeStats`` / ``ServeToken`` rows;
pages add what is still pending (:func:`pending_agent`, :func:`pending_tokens`), so they are
never behind. Hashes are named by the row's id *and* creation stamp: counts of a row that no
longer exists (or of an older row under a reused id) are dropped by the flush, never added to
another row.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F
from django.db.models.functions import Greatest

from webapp.runs.models import Agent
from webapp.serving import cache
from webapp.serving.models import AgentServeStats, ServeToken

logger = logging.getLogger(__name__)


def queue_rate_count(pipe: Any, identity: str, now: float) -> None:
    """Add this request's count of ``identity`` in the minute of ``now`` to a pipeline
    (its result is the count so far; see :func:`retry_after`)."""
    key = f"paddock:serve:rate:{identity}:{int(now // 60)}"
    pipe.incr(key)
    pipe.expire(key, 120)


def retry_after(count: int, now: float) -> int | None:
    """``None`` when the ``count``-th request of this minute is allowed, else seconds until
    the next minute (>= 1)."""
    if count <= settings.PADDOCK_SERVE_RATE_LIMIT:
        return None
    return max(1, int((int(now // 60) + 1) * 60 - now + 0.999))


def _dirty_key() -> str:
    return f"{cache.namespace()}:stats:dirty"


def _member_key(member: str) -> str:
    return f"{cache.namespace()}:stats:{member}"


def agent_member(agent_id: int, agent_stamp: int) -> str:
    return f"agent:{int(agent_id)}:{int(agent_stamp)}"


def token_member(token_id: int, token_stamp: int) -> str:
    return f"token:{int(token_id)}:{int(token_stamp)}"


def count(*, agent: str, token: str | None, calls: int, observations: int, errors: int) -> None:
    """Add one request to the counters of ``agent`` (:func:`agent_member`) and of ``token``
    (:func:`token_member`, serve tokens only) in one Redis round trip.

    A Redis error is logged, not raised: the answer was already computed and is sent.
    """
    now = time.time()
    try:
        pipe = cache.redis_client().pipeline(transaction=True)
        key = _member_key(agent)
        pipe.hincrby(key, "calls", calls)
        pipe.hincrby(key, "observations", observations)
        pipe.hincrby(key, "errors", errors)
        if calls:
            pipe.hset(key, "last", now)
        pipe.sadd(_dirty_key(), agent)
        if token is not None and calls:
            pipe.hincrby(_member_key(token), "calls", calls)
            pipe.hset(_member_key(token), "last", now)
            pipe.sadd(_dirty_key(), token)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("act call not counted: Redis unavailable (%s)", exc.__class__.__name__)


@dataclass(frozen=True)
class Pending:
    """Counts not yet flushed to the database (zeros when there are none)."""

    calls: int = 0
    observations: int = 0
    errors: int = 0
    last: datetime | None = None


def _pending(values: dict[bytes, bytes]) -> Pending:
    def number(name: str) -> int:
        return int(values.get(name.encode(), 0))

    last = values.get(b"last")
    return Pending(
        calls=number("calls"),
        observations=number("observations"),
        errors=number("errors"),
        last=None if last is None else datetime.fromtimestamp(float(last), tz=UTC),
    )


def pending_agent(agent_id: int, agent_stamp: int) -> Pending:
    """An agent's counts not yet in ``AgentServeStats`` (zeros when Redis is down)."""
    try:
        return _pending(cache.redis_client().hgetall(_member_key(agent_member(agent_id, agent_stamp))))
    except redis.RedisError:
        return Pending()


def pending_tokens(tokens: list[tuple[int, int]]) -> dict[int, Pending]:
    """``{token id: pending counts}`` of serve tokens given as ``(id, stamp)`` (one round trip)."""
    if not tokens:
        return {}
    try:
        pipe = cache.redis_client().pipeline(transaction=False)
        for token_id, token_stamp in tokens:
            pipe.hgetall(_member_key(token_member(token_id, token_stamp)))
        values = pipe.execute()
    except redis.RedisError:
        return {}
    return {token_id: _pending(v) for (token_id, _), v in zip(tokens, values, strict=True)}


def _take(client: redis.Redis, member: str) -> dict[bytes, bytes]:
    """Read and delete one member's hash and clear its dirty mark, atomically (MULTI/EXEC): a
    request counted after this starts a new hash and marks it dirty again."""
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(_member_key(member))
    pipe.delete(_member_key(member))
    pipe.srem(_dirty_key(), member)
    return pipe.execute()[0]


def _give_back(client: redis.Redis, member: str, values: dict[bytes, bytes]) -> None:
    pipe = client.pipeline(transaction=True)
    for name, value in values.items():
        if name == b"last":
            pipe.hset(_member_key(member), "last", value)
        else:
            pipe.hincrby(_member_key(member), name.decode(), int(value))
    pipe.sadd(_dirty_key(), member)
    pipe.execute()


def _write(member: str, pending: Pending) -> bool:
    """Add ``pending`` to the member's row; ``False`` when the row no longer exists (counts dropped)."""
    kind, row_id, row_stamp = member.split(":")
    if kind == "agent":
        agent = Agent.objects.filter(pk=int(row_id)).only("created_at").first()
        if agent is None or cache.stamp(agent.created_at) != int(row_stamp):
            return False
        AgentServeStats.objects.get_or_create(agent_id=agent.pk)
        changes: dict[str, Any] = {
            "calls": F("calls") + pending.calls,
            "observations": F("observations") + pending.observations,
            "errors": F("errors") + pending.errors,
        }
        if pending.last is not None:
            changes["last_called_at"] = Greatest(F("last_called_at"), pending.last)
            AgentServeStats.objects.filter(agent_id=agent.pk, last_called_at=None).update(last_called_at=pending.last)
        AgentServeStats.objects.filter(agent_id=agent.pk).update(**changes)
        return True
    token = ServeToken.objects.filter(pk=int(row_id)).only("created_at").first()
    if token is None or cache.stamp(token.created_at) != int(row_stamp):
        return False
    changes = {"calls": F("calls") + pending.calls}
    if pending.last is not None:
        changes["last_used_at"] = Greatest(F("last_used_at"), pending.last)
        ServeToken.objects.filter(pk=token.pk, last_used_at=None).update(last_used_at=pending.last)
    ServeToken.objects.filter(pk=token.pk).update(**changes)
    return True


def flush() -> int:
    """Move every pending counter into the database; returns the rows updated.

    Each member is taken out of Redis atomically and written in its own transaction; if the
    write fails, its counts are added back to Redis (and the error raised), so none is lost
    or counted twice.

    Raises:
        redis.RedisError: Redis cannot be reached.
        DatabaseError: a write failed (its counts were given back to Redis).
    """
    client = cache.redis_client()
    written = 0
    for raw in client.smembers(_dirty_key()):
        member = raw.decode()
        values = _take(client, member)
        if not values:
            continue
        try:
            with transaction.atomic():
                written += _write(member, _pending(values))
        except DatabaseError:
            _give_back(client, member, values)
            raise
    return written
