"""``manage.py worker_alive NODE``: exit 0 while Celery worker ``NODE`` writes its heartbeat
(a container probe), 1 when Redis answers without it."""

from __future__ import annotations

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from webapp.core.workers import HEARTBEAT_KEY, HEARTBEAT_TTL_S


class Command(BaseCommand):
    help = (
        "Probe of a Celery worker: exit 0 while its heartbeat (written to Redis every 2 s, kept "
        f"{HEARTBEAT_TTL_S} s) is there, 1 when it is missing. A Redis outage exits 0 with a "
        "warning: workers keep training through it, so it must not get them restarted."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("node", help="the worker's node name, e.g. gpu@$HOSTNAME (celery worker -n)")

    def handle(self, *args, node: str, **options) -> None:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            alive = bool(client.exists(HEARTBEAT_KEY + node))
        except redis.RedisError as exc:
            self.stderr.write(f"worker_alive: Redis does not answer ({exc.__class__.__name__}); not the worker's fault")
            return
        finally:
            client.close()
        if not alive:
            raise CommandError(f"worker {node}: no heartbeat in the last {HEARTBEAT_TTL_S} s", returncode=1)
        self.stdout.write(f"worker {node}: alive")
