"""ASGI entry point: HTTP through Django, WebSockets through Channels (session auth)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
# A pool of PostgreSQL connections for the web server (see settings: otherwise one new
# connection per request, about 9 ms of every API call on the 2-core development VM).
os.environ.setdefault("PADDOCK_DB_POOL", "1")

import sys  # noqa: E402

from django.core.asgi import get_asgi_application  # noqa: E402

from webapp.config.env import SettingsError  # noqa: E402

try:
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
