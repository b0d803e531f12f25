"""ASGI entry point: HTTP through Django (middleware and view in one worker thread), WebSockets
through Channels (session auth)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")

import sys  # noqa: E402

import django  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.core.handlers.base import BaseHandler  # noqa: E402

from webapp.config.env import SettingsError  # noqa: E402


def _pool_connections() -> None:
    """A pool of PostgreSQL connections for the web server (``PADDOCK_WEB_DB_POOL_SIZE`` in
    settings says why): otherwise one new connection per request, about 9 ms of every API call
    on the 2-core development VM. Only in a process whose first connection is still to come:
    a connection opened without the pool cannot be handed back to it, so a pytest process
    (pytest-django opened the test database long before a test imports this module) keeps its
    plain connections; the servers the browser tests start are processes of their own and pool."""
    from django.conf import settings

    if "pytest" in sys.modules:
        return

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql") and settings.PADDOCK_WEB_DB_POOL_SIZE > 0:
        db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": settings.PADDOCK_WEB_DB_POOL_SIZE,
            "timeout": 10,
        }
        db["CONN_HEALTH_CHECKS"] = True


class OneThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, with the middleware chain and the view run in one worker thread.

    Django's own handler builds an async middleware chain: every ``MiddlewareMixin`` hook
    (``process_request``, ``process_response``...) then runs through ``sync_to_async`` and the
    sync-only WhiteNoise middleware sits between ``async_to_sync`` adapters, about 15 thread
    switches a request before the (sync) view even runs. Our views and middleware are all sync,
    so here the chain is built sync and entered once, as under WSGI: one switch to the worker
    thread and back. The async parts of the handler (reading the body, sending the response,
    noticing a disconnect) are unchanged. On the 2-core VM this took about 3 ms off every
    request (``benchmarks/serving.py``).

    Request limits (``webapp/core/limits.py``) are met here first: a ``Content-Length`` over its
    limit is answered 413 before a byte of the body is read into Django's spool file, and a body
    that arrives without one is cut off at the limit.
    """

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def handle(self, scope, receive, send):
        refusal = limits.early_refusal(scope)
        if refusal is None:
            try:
                return await super().handle(scope, limits.capped_receive(scope, receive), send)
            except AppError as exc:  # the body passed its limit while it streamed (413)
                refusal = limits.refusal_response(exc, path=scope.get("path", ""))
        await self.send_response(refusal, send)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


try:
    _pool_connections()
    django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does
    django_asgi_app = OneThreadASGIHandler()
except SettingsError as exc:
    # One line naming the variable, no traceback (daphne exits with this status).
    sys.stderr.write(f"configuration error: {exc}\n")
    sys.exit(2)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from webapp import engine  # noqa: E402
from webapp.config.routing import websocket_urlpatterns  # noqa: E402
from webapp.core import limits  # noqa: E402 (after django.setup: it imports DRF)
from webapp.core.errors import AppError  # noqa: E402

# The first task validation would otherwise import torch inside a request (about 3 s).
engine.preload_trainer()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
