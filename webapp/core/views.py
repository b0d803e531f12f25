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
    """Database, Redis, channel layer and Celery worker status; 503 when a required part is down.
    Signed-in users and direct requests from the machine itself see each check; anyone else
    only ``{"ok", "status": "up" | "down"}``.

    ``?require=database,redis`` makes only those checks decide the status (a probe's choice:
    ``?require=database`` for readiness, ``?require=`` for liveness: 200 whenever the process
    answers); an unknown name is a 400 naming ``require``."""
    required = health.PARTS
    if "require" in request.GET:
        required = tuple(p.strip() for p in request.GET["require"].split(",") if p.strip())
        unknown = sorted(set(required) - set(health.PARTS))
        if unknown:
            message = f"unknown check {', '.join(unknown)}; expected some of {', '.join(health.PARTS)}"
            return JsonResponse({"error": f"require: {message}", "fields": {"require": message}}, status=400)
    report = health.check_all(required)
    status = 200 if report["ok"] else 503
    if not (request.user.is_authenticated or _from_this_machine(request)):
        # Without login: up or down, nothing about the machines, queues or errors.
        return JsonResponse({"ok": report["ok"], "status": "up" if report["ok"] else "down"}, status=status)
    return JsonResponse(report, status=status)


def _from_this_machine(request: HttpRequest) -> bool:
    """A direct request from the loopback interface (the launcher, an operator's curl on the
    server); one relayed by a proxy (``X-Forwarded-For``) is not."""
    if request.META.get("HTTP_X_FORWARDED_FOR") or request.META.get("HTTP_FORWARDED"):
        return False
    return request.META.get("REMOTE_ADDR", "") in ("127.0.0.1", "::1")
