"""Root URL configuration: pages, the REST API under ``/api/`` and its OpenAPI docs.

Each app's pages come from its ``urls`` module; the reports app adds its viewsets
(backtests) to the API router with ``webapp.reports.api.register``.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated
from rest_framework.routers import DefaultRouter

from webapp.core import api as core_api
from webapp.market import api as market_api
from webapp.reports import api as reports_api
from webapp.runs import api as runs_api
from webapp.serving import api as serving_api
from webapp.studies import api as studies_api

# The API docs' description: the REST overview plus the WebSocket protocol (docs/websocket.md).
API_DESCRIPTION = (
    settings.SPECTACULAR_SETTINGS.get("DESCRIPTION", "")
    + "\n\nAuthenticate with a session (browser) or `Authorization: Token <key>` "
    + "(get one at `/account/token/` or `POST /api/auth/token/`); without either the answer is "
    + "401 with `WWW-Authenticate: Token`. Errors are "
    + '`{"error": "...", "fields": {"name": "message"}}`, plus `"details": {"file", "row", "ticker", '
    + '"date"}` when bad data has a place; objects of other users are 404.\n\n'
    + (settings.BASE_DIR / "docs" / "websocket.md").read_text(encoding="utf-8")
)


class IdRouter(DefaultRouter):
    """Object URLs take numeric ids only (``/api/runs/12/``): any other segment is a JSON 404
    (``api_not_found``), never a view left to choke on ``int("abc")``."""

    def get_lookup_regex(self, viewset, lookup_prefix=""):
        if not hasattr(viewset, "lookup_value_regex"):
            viewset.lookup_value_regex = "[0-9]+"
        return super().get_lookup_regex(viewset, lookup_prefix)


router = IdRouter()
router.register("datasets", market_api.DatasetViewSet, basename="dataset")
router.register("tasks", runs_api.TaskViewSet, basename="task")
router.register("budgets", runs_api.BudgetViewSet, basename="budget")
router.register("runs", runs_api.RunViewSet, basename="run")
router.register("agents", runs_api.AgentViewSet, basename="agent")


reports_api.register(router)
studies_api.register(router)

api_patterns = [
    path("auth/token/", core_api.TokenView.as_view(), name="token"),
    # before the router: /api/agents/{id}/act (with or without the slash) is the serving endpoint
    path("agents/<int:agent_id>/act", serving_api.AgentActView.as_view(), name="agent-act"),
    path("agents/<int:agent_id>/act/", serving_api.AgentActView.as_view()),
    *router.urls,
]

urlpatterns = [
    path("", include("webapp.core.urls")),
    path("", include("webapp.runs.urls")),
    path("", include("webapp.market.urls")),
    path("", include("webapp.reports.urls")),
    path("", include("webapp.serving.urls")),
    path("", include("webapp.studies.urls")),
    path("account/token/", core_api.token_page, name="token"),
    path("admin/", admin.site.urls),
    path("api/", include((api_patterns, "api"), namespace="api")),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(
            permission_classes=[IsAuthenticated], custom_settings={"DESCRIPTION": API_DESCRIPTION}
        ),
        name="api-schema",
    ),
    path("api/docs/", login_required(SpectacularSwaggerView.as_view(url_name="api-schema")), name="api-docs"),
]

# Last: any other /api/ URL answers the API's error format (a JSON 404), not an HTML page.
urlpatterns.append(re_path(r"^api/", core_api.not_found, name="api-not-found"))
