"""What the broker holds: which generations have a task message waiting in a queue or
delivered to a worker and not yet acknowledged.

The sweep (``runs_ensure_work``) sends a queued generation's message again only when it is
really lost (a Redis restart without persistence drops every message), never while it is
only waiting for a free worker: each ``run_generation`` message carries the task id
``paddock-gen-<generation id>-<random>`` and this module finds those ids in the Redis
transport's queue lists and its hash of unacknowledged (delivered) messages.

Both are read in one MULTI/EXEC, twice, 50 ms apart: a message that a worker is taking moves
from the list to the hash in two steps, and is seen in at least one of the two reads. A message
delivered longer ago than ``delivered_within_s`` whose generation is still waiting to be claimed
went to a worker that died before it claimed it (the Redis transport would hand it out again
only after the visibility timeout, hours later): it does not count as present.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

import redis
from kombu.transport.redis import PRIORITY_STEPS

logger = logging.getLogger(__name__)

TASK_ID_PREFIX = "paddock-gen-"
_TASK_ID = re.compile(rb"paddock-gen-(\d+)-")
#: Queues that carry generation messages (settings.CELERY_TASK_ROUTES).
GENERATION_QUEUES = ("gpu",)


def generation_task_id(generation_id: int) -> str:
    """A new task id for one message of generation ``generation_id``."""
    return f"{TASK_ID_PREFIX}{generation_id}-{uuid.uuid4().hex[:12]}"


def _keys(options: dict) -> tuple[list[str], str, str]:
    prefix = options.get("global_keyprefix", "")
    sep = options.get("sep", "\x06\x16")
    steps = options.get("priority_steps", PRIORITY_STEPS)
    queues = [prefix + q + (f"{sep}{pri}" if pri else "") for q in GENERATION_QUEUES for pri in steps]
    unacked = prefix + options.get("unacked_key", "unacked")
    return queues, unacked, prefix + options.get("unacked_index_key", "unacked_index")


def _read_once(client: redis.Redis, queues: list[str], unacked: str, index: str, since: float) -> set[int]:
    pipe = client.pipeline(transaction=True)
    for key in queues:
        pipe.lrange(key, 0, -1)
    pipe.hgetall(unacked)
    pipe.zrangebyscore(index, since, "+inf")
    *waiting, delivered, recent = pipe.execute()
    recent = set(recent)
    messages = [raw for queue in waiting for raw in queue]
    messages += [raw for tag, raw in delivered.items() if tag in recent]
    found: set[int] = set()
    for raw in messages:
        found.update(int(m) for m in _TASK_ID.findall(raw))
    return found


def generations_in_broker(*, delivered_within_s: float = 120.0) -> set[int] | None:
    """Ids of the generations that have a message in the broker (waiting, or delivered to a
    worker in the last ``delivered_within_s`` and not acknowledged); ``None`` when the broker
    cannot be read (it is down: nothing can be sent again anyway)."""
    from webapp.config.celery import app

    url = app.conf.broker_url
    if not str(url).startswith(("redis://", "rediss://", "unix://")):
        return None
    keys = _keys(dict(app.conf.broker_transport_options or {}))
    since = time.time() - delivered_within_s
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        first = _read_once(client, *keys, since)
        time.sleep(0.05)
        return first | _read_once(client, *keys, since)
    except redis.RedisError as exc:
        logger.info("cannot read the broker's queues (%s); nothing is sent again now", exc)
        return None
    finally:
        client.close()
