"""Request limits: how much a request may send (body bytes, upload bytes, form fields, files),
checked from the headers before the body is read and counted while it streams, every refusal
answered the same way (docs/limits.md).

Three places apply them, because a request passes three doors:

- :func:`early_refusal` and :func:`capped_receive`, called by the ASGI handler
  (``webapp/config/asgi.py``) before Django reads the body into its spool file: a
  ``Content-Length`` over the limit is answered 413 without reading a byte of the body, a body
  without one is cut off at the limit;
- :class:`RequestLimitsMiddleware` (first in ``MIDDLEWARE``): the same header check for the WSGI
  handler and the test client, then the query string and the form body parsed once, so that
  Django's own limits (``DATA_UPLOAD_MAX_NUMBER_FIELDS``, ``DATA_UPLOAD_MAX_NUMBER_FILES``,
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``) are met here and answered 400/413 instead of surfacing as a
  500 in whichever view or middleware first touched ``request.POST``;
- :class:`CappedUploadHandler` (the only ``FILE_UPLOAD_HANDLERS``): uploaded files stream to a
  temporary file on disk, never into memory, and an upload that grows past
  ``PADDOCK_UPLOAD_MAX_BYTES`` is stopped while it streams.

The API (paths under ``/api/``, or a client that accepts only JSON) gets the error format of
:mod:`webapp.core.errors` with the limit named in ``details``; pages get a page saying the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.template.loader import render_to_string

from webapp.core.errors import AppError, limit_error

logger = logging.getLogger(__name__)

#: Bytes a multipart body may carry beside its files: the other form fields and the part
#: headers (the body limit of an upload is ``PADDOCK_UPLOAD_MAX_BYTES`` plus this).
FORM_ALLOWANCE_BYTES = 1024 * 1024
UPLOAD_SETTING = "PADDOCK_UPLOAD_MAX_BYTES"
BODY_SETTING = "PADDOCK_REQUEST_MAX_BYTES"


def _is_multipart(content_type: str) -> bool:
    return content_type.strip().lower().startswith("multipart/form-data")


def body_limit(content_type: str) -> tuple[int, str]:
    """The most bytes a body of ``content_type`` may have, and the setting that says so.

    Returns:
        ``(bytes, setting name)``: an upload (``multipart/form-data``) may carry
        ``PADDOCK_UPLOAD_MAX_BYTES`` of files plus :data:`FORM_ALLOWANCE_BYTES`; any other body
        ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (set from ``PADDOCK_REQUEST_MAX_BYTES``).
    """
    if _is_multipart(content_type):
        return settings.PADDOCK_UPLOAD_MAX_BYTES + FORM_ALLOWANCE_BYTES, UPLOAD_SETTING
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE, BODY_SETTING


def too_large(setting: str, limit: int, *, size: int | None = None) -> AppError:
    """The 413 error of a body or upload over ``limit`` bytes (``size``: what the client said
    it sends, when it said so)."""
    what = "upload" if setting == UPLOAD_SETTING else "request body"
    shown = settings.PADDOCK_UPLOAD_MAX_BYTES if setting == UPLOAD_SETTING else limit
    said = f" ({size:,} bytes)" if size is not None else ""
    fields = {"file": f"larger than {shown:,} bytes"} if setting == UPLOAD_SETTING else {}
    return AppError(
        f"{what} too large{said}: the limit is {shown:,} bytes ({setting})",
        fields=fields,
        status=413,
        details={"limit": setting, "max": shown},
    )


def check_headers(content_type: str, content_length: str | None) -> None:
    """Refuse a body whose declared length is over its limit, before any of it is read.

    Raises:
        AppError: 413 naming the limit. A missing or unreadable ``Content-Length`` passes here
            (the body is then counted as it is read).
    """
    try:
        size = int(content_length) if content_length else None
    except ValueError:
        size = None
    if size is None:
        return
    limit, setting = body_limit(content_type)
    if size > limit:
        raise too_large(setting, limit, size=size)


def wants_json(path: str, accept: str = "") -> bool:
    """API paths, and clients that ask for JSON and not HTML, get JSON errors."""
    return path.startswith("/api/") or ("json" in accept and "html" not in accept)


def refusal_response(exc: AppError, *, path: str, accept: str = "", request: HttpRequest | None = None) -> HttpResponse:
    """The answer to a refused request: the JSON error on the API, a short page elsewhere."""
    logger.warning("request refused: %s %s", exc.status, exc.message)
    if wants_json(path, accept):
        return JsonResponse(exc.to_dict(), status=exc.status)
    html = render_to_string("core/refused.html", {"error": exc}, request=request)
    return HttpResponse(html, status=exc.status)


class RequestLimitsMiddleware:
    """Meets every request limit before the views do (first in ``MIDDLEWARE``, see the module
    docstring): the declared length, the query string's fields, then a POST's form body
    (fields, files, bytes) parsed once; the views read the parsed ``request.POST`` and
    ``request.FILES`` (DRF reuses them too)."""

    FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        content_type = request.META.get("CONTENT_TYPE", "")
        try:
            check_headers(content_type, request.META.get("CONTENT_LENGTH"))
            request.GET  # noqa: B018 (parsing the query string meets DATA_UPLOAD_MAX_NUMBER_FIELDS)
            if request.method == "POST" and content_type.strip().lower().startswith(self.FORM_TYPES):
                request.POST  # noqa: B018 (the form's fields, files and bytes are counted here)
                request.FILES  # noqa: B018
        except MultiPartParserError as exc:  # parsed here, so refused here: as DRF's parser would
            error = AppError(f"multipart body could not be read: {exc}")
            return refusal_response(
                error, path=request.path, accept=request.META.get("HTTP_ACCEPT", ""), request=request
            )
        except Exception as exc:
            error = exc if isinstance(exc, AppError) else limit_error(exc)
            if error is None:
                raise
            return refusal_response(
                error, path=request.path, accept=request.META.get("HTTP_ACCEPT", ""), request=request
            )
        return self.get_response(request)


class CappedUploadHandler(TemporaryFileUploadHandler):
    """Django's temporary-file upload handler (every file streams to disk as it arrives, none is
    held in memory) that stops an upload whose files pass ``PADDOCK_UPLOAD_MAX_BYTES`` in all.

    Raises:
        AppError: 413 naming ``PADDOCK_UPLOAD_MAX_BYTES``; the partial file is deleted first.
    """

    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int):
        self.received += len(raw_data)
        if self.received > settings.PADDOCK_UPLOAD_MAX_BYTES:
            self.upload_interrupted()
            raise too_large(UPLOAD_SETTING, settings.PADDOCK_UPLOAD_MAX_BYTES)
        return super().receive_data_chunk(raw_data, start)


# --- the ASGI door (webapp/config/asgi.py) ---------------------------------------------------------


def _header(scope: dict, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def early_refusal(scope: dict) -> HttpResponse | None:
    """The 413 answer to an HTTP request whose ``Content-Length`` is over its limit, decided
    from the ASGI scope alone (nothing of the body read yet), or ``None``."""
    try:
        check_headers(_header(scope, b"content-type"), _header(scope, b"content-length") or None)
    except AppError as exc:
        return refusal_response(exc, path=scope.get("path", ""), accept=_header(scope, b"accept"))
    return None


def capped_receive(scope: dict, receive: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
    """``receive`` that counts the body's bytes and raises a 413 :class:`AppError` (naming the
    limit) as soon as they pass the limit of the request's content type, for bodies sent
    without a (truthful) ``Content-Length``."""
    limit, setting = body_limit(_header(scope, b"content-type"))
    received = 0

    async def receive_capped() -> dict:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise too_large(setting, limit)
        return message

    return receive_capped
