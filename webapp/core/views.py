"""Pages of the core app: dashboard home and the health check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp.core import health


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The dashboard: the user's recent runs (empty for a new account)."""
    return render(request, "core/home.html", {})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis, channel layer and Celery worker status; 503 when a required part is down."""
    report = health.check_all()
    return JsonResponse(report, status=200 if report["ok"] else 503)
