"""The serve-tokens page: list, create (optionally for one agent) and revoke serve tokens."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from webapp.core.errors import AppError
from webapp.core.forms import id_message, whole_number
from webapp.serving import selectors, services


@login_required
@require_http_methods(["GET", "POST"])
def serve_tokens(request: HttpRequest) -> HttpResponse:
    """GET lists the user's serve tokens; POST ``name`` (+ ``agent``) creates one, ``revoke`` deletes one."""
    errors: dict[str, str] = {}
    created = None
    if request.method == "POST":
        revoke = request.POST.get("revoke")
        if revoke:
            token_id = whole_number(revoke)
            if token_id is not None:
                services.serve_token_revoke(owner=request.user, token_id=token_id)
                return redirect("serving:tokens")
            errors["revoke"] = id_message("a serve token", revoke)  # a hidden input: said, not dropped
        else:
            try:
                created = services.serve_token_create(
                    owner=request.user, name=request.POST.get("name", ""), agent=request.POST.get("agent", "")
                )
            except AppError as exc:
                errors.update(exc.fields or {"name": exc.message})
    tokens = selectors.serve_tokens_of(request.user)
    return render(
        request,
        "serving/tokens.html",
        {"tokens": tokens, "created": created, "errors": errors, "form": request.POST if errors else {},
         "agent_prefill": request.GET.get("agent", "")},
        status=400 if errors else 200,  # as the app's other forms answer bad input
    )  # fmt: skip
