"""ASGI entry point: HTTP through Django, WebSockets through Channels (session auth)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")

import sys  # noqa: E402

from django.core.asgi import get_asgi_application  # noqa: E402

from webapp.config.env import SettingsError  # noqa: E402


def _pool_connections() -> None:
    """A pool of PostgreSQL connections for the web server (``PADDOCK_WEB_DB_POOL_SIZE`` in
    settings says why): otherwise one new connection per request, about 9 ms of every API call
    on the 2-core development VM. Set before the first connection is made."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql") and settings.PADDOCK_WEB_DB_POOL_SIZE > 0:
        db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": settings.PADDOCK_WEB_DB_POOL_SIZE,
            "timeout": 10,
        }
        db["CONN_HEALTH_CHECKS"] = True


try:
    _pool_connections()
    django_asgi_app = get_asgi_application()
except SettingsError as exc:
    # One line naming the variable, no traceback (daphne exits with this status).
    sys.stderr.write(f"configuration error: {exc}\n")
    sys.exit(2)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from webapp import engine  # noqa: E402
from webapp.config.routing import websocket_urlpatterns  # noqa: E402

# The first task validation would otherwise import torch inside a request (about 3 s).
engine.preload_trainer()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
