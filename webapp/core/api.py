"""Account endpoints: API tokens (``POST /api/auth/token/``) and the page that shows one.

The API accepts a session (the browser) or ``Authorization: Token <key>`` (scripts). A user
gets their token either from the token page or by posting username and password here.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.permissions import AllowAny
from rest_framework.settings import api_settings

from webapp.core.fields import RefuseUnknownKeys, StrictCharField


class TokenRequestSerializer(RefuseUnknownKeys, AuthTokenSerializer):
    """DRF's ``AuthTokenSerializer`` read as every body of the API is: a key other than
    ``username`` and ``password`` (``{"usernme": ...}``, ``"token"``) is a 400 naming it, before
    any password is checked, and a number is not a username (DRF read ``123`` as ``"123"``)."""

    username = StrictCharField(label="Username", write_only=True)
    password = StrictCharField(
        label="Password", style={"input_type": "password"}, trim_whitespace=False, write_only=True
    )


class TokenView(ObtainAuthToken):
    """Exchange username and password for the user's API token (created on first use); an
    unknown key or a value that is not a string is a 400 naming it (:class:`TokenRequestSerializer`)."""

    serializer_class = TokenRequestSerializer
    permission_classes = [AllowAny]
    authentication_classes: list = []
    # DRF's ObtainAuthToken names its own parsers (plain JSONParser); use the project's, whose
    # nesting limit keeps a deeply nested body a 400.
    parser_classes = api_settings.DEFAULT_PARSER_CLASSES

    @extend_schema(
        summary="Get your API token",
        description="Send `username` and `password`; use the answer as `Authorization: Token <token>`.",
        request=TokenRequestSerializer,
        responses=inline_serializer("TokenResponse", {"token": serializers.CharField()}),
        auth=[],
    )
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)


@login_required
@require_http_methods(["GET", "POST"])
def token_page(request: HttpRequest) -> HttpResponse:
    """Show the user's API token; POST creates one, or replaces it (``regenerate``)."""
    token = Token.objects.filter(user=request.user).first()
    if request.method == "POST":
        if token is not None and request.POST.get("regenerate"):
            token.delete()
            token = None
        if token is None:
            Token.objects.create(user=request.user)
        return redirect("token")
    return render(request, "core/token.html", {"token": token})


@csrf_exempt  # it changes nothing; a POST to a wrong URL is a 404, not a CSRF page
def not_found(request: HttpRequest, *args, **kwargs) -> JsonResponse:
    """Any ``/api/`` URL no endpoint matches: a 404 in the API's error format."""
    return JsonResponse({"error": f"Not found: no API endpoint at {request.path!r}.", "fields": {}}, status=404)
