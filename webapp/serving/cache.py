"""Redis-cached reads of the act endpoint, so a steady stream of act requests touches no database.

Two lookups are cached, each a small JSON value under a key of its own:

* **credentials**: a token key (serve token ``srv_...`` or account token) -> who it
  authenticates (user id, name, join time, active), the serve token's id and agent limit.
  The key name holds the SHA-256 of the token, never the token itself.
* **agent entries**: an agent id -> its owner (id and join time), run, creation time and the
  local path of its exported bundle.

Invalidation (``webapp/serving/signals.py``): revoking or changing a serve token, deleting an
account token, saving a user (deactivation) and saving or deleting an agent or its run delete
the entries at once and again after the transaction commits (a request that read the old rows
between the two would otherwise store them again). Every entry also expires after
:data:`TTL_S`, so an entry missed by a signal (a queryset ``update()`` sends none) lives at
most that long.

A database recreated while Redis keeps its keys restarts ids at 1. Keys carry a hash of the
database's name, and an agent entry is used only for the user whose id *and* join time match
its owner's; any other caller falls back to the database (so a stale entry can never open
another user's agent, only cost one query).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import connection, transaction

logger = logging.getLogger(__name__)

#: Seconds an entry lives without being invalidated.
TTL_S = 300


@functools.cache
def redis_client() -> redis.Redis:
    """The process's Redis client (``REDIS_URL``) for serving: its pool is shared by every request."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def stamp(moment: datetime) -> int:
    """A row's creation time as integer microseconds since the epoch (tells apart rows that
    reuse an id after the database was recreated); exact, no float rounding."""
    return (moment - _EPOCH) // _MICROSECOND


def from_stamp(value: int) -> datetime:
    """The inverse of :func:`stamp` (an aware UTC datetime)."""
    return _EPOCH + timedelta(microseconds=int(value))


@functools.lru_cache(maxsize=8)
def _namespace_of(database_name: str) -> str:
    return "paddock:serve:" + hashlib.sha1(database_name.encode()).hexdigest()[:10]


def namespace() -> str:
    """``paddock:serve:<hash of the database name>``: the prefix of every serving key but the
    rate limit's (tests' databases and the development database never share entries)."""
    return _namespace_of(str(connection.settings_dict.get("NAME")))


def _credential_key(token_key: str) -> str:
    return f"{namespace()}:cred:{hashlib.sha256(token_key.encode()).hexdigest()}"


def _agent_key(agent_id: int) -> str:
    return f"{namespace()}:agent:{int(agent_id)}"


@dataclass(frozen=True)
class Credential:
    """Who a token authenticates, as cached (``request.auth`` of the act endpoint).

    Attributes:
        kind: ``"serve"`` (a ``srv_`` serve token) or ``"account"`` (the account API token).
        user_id, username, date_joined_us, is_active: the token's owner (join time in
            microseconds since the epoch, :func:`stamp`).
        token_id, token_stamp: the serve token's id and creation stamp (0 for account tokens).
        agent_id: the one agent a serve token may call; ``None`` = any of the owner's.
        key_hash: SHA-256 of the token key, hex (rate-limit identity; never the key itself).
    """

    kind: str
    user_id: int
    username: str
    date_joined_us: int
    is_active: bool
    key_hash: str
    token_id: int = 0
    token_stamp: int = 0
    agent_id: int | None = None

    @property
    def is_serve_token(self) -> bool:
        return self.kind == "serve"


def queue_credential_get(pipe: Any, token_key: str) -> None:
    """Add the GET of ``token_key``'s credential to a Redis pipeline (decode with
    :func:`credential_from_raw`)."""
    pipe.get(_credential_key(token_key))


def credential_from_raw(raw: bytes | None) -> Credential | None:
    """Decode a cached credential (``None`` for a miss or an unreadable value)."""
    if raw is None:
        return None
    try:
        return Credential(**json.loads(raw))
    except (ValueError, TypeError):
        return None


def credential_store(token_key: str, credential: Credential) -> None:
    """Cache ``credential`` for ``token_key`` for :data:`TTL_S` (a Redis error is logged only)."""
    try:
        redis_client().set(_credential_key(token_key), json.dumps(asdict(credential)), ex=TTL_S)
    except redis.RedisError as exc:
        logger.warning("serving cache unavailable (%s); not cached", exc.__class__.__name__)


@dataclass(frozen=True)
class AgentEntry:
    """What the act endpoint needs of an agent, as cached.

    Attributes:
        agent_id, agent_stamp: the agent's id and creation stamp (:func:`stamp`).
        owner_id, owner_joined_us: the owner of its run (id and join stamp).
        bundle_path: local path of its exported bundle zip.
    """

    agent_id: int
    agent_stamp: int
    owner_id: int
    owner_joined_us: int
    bundle_path: str

    def belongs_to(self, user_id: int, joined_us: int) -> bool:
        return self.owner_id == user_id and self.owner_joined_us == joined_us

    def usable(self) -> bool:
        """The bundle file is still there (a removed file sends the caller to the database,
        which exports it again)."""
        return os.path.exists(self.bundle_path)


def agent_entry_from_raw(raw: bytes | None) -> AgentEntry | None:
    """Decode a cached agent entry (``None`` for a miss or an unreadable value)."""
    if raw is None:
        return None
    try:
        return AgentEntry(**json.loads(raw))
    except (ValueError, TypeError):
        return None


def queue_agent_get(pipe: Any, agent_id: int) -> None:
    """Add the GET of ``agent_id``'s entry to a Redis pipeline (decode with :func:`agent_entry_from_raw`)."""
    pipe.get(_agent_key(agent_id))


def agent_entry_store(entry: AgentEntry) -> None:
    """Cache ``entry`` for :data:`TTL_S` (a Redis error is logged only)."""
    try:
        redis_client().set(_agent_key(entry.agent_id), json.dumps(asdict(entry)), ex=TTL_S)
    except redis.RedisError as exc:
        logger.warning("serving cache unavailable (%s); not cached", exc.__class__.__name__)


def _delete(keys: list[str]) -> None:
    if not keys:
        return
    try:
        redis_client().delete(*keys)
    except redis.RedisError as exc:  # the entries still expire after TTL_S
        logger.error("serving cache: could not invalidate %d entries (%s)", len(keys), exc.__class__.__name__)


def _delete_now_and_on_commit(keys: list[str]) -> None:
    _delete(keys)
    transaction.on_commit(lambda: _delete(keys))


def invalidate_credentials(token_keys: list[str]) -> None:
    """Forget the cached credentials of these token keys (revoked, changed, owner changed)."""
    _delete_now_and_on_commit([_credential_key(k) for k in token_keys])


def invalidate_agents(agent_ids: list[int]) -> None:
    """Forget the cached entries of these agents (deleted, changed, run changed)."""
    _delete_now_and_on_commit([_agent_key(a) for a in agent_ids])
