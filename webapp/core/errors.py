"""One application error type, mapped once to ``{"error": ..., "fields": {...}}`` (HTTP 400).

Services raise :class:`AppError` (or let ``webapp.engine.TrainerError`` through); DRF views
get the mapping from :func:`api_exception_handler`, plain views from :func:`error_response`.

This module is a leaf: it imports nothing from ``webapp``. ``webapp.engine`` tells it which
exception type the trainer raises (:func:`register_trainer_error`) when the engine loads, so
the handlers below convert a trainer error that got through to the single error format.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

logger = logging.getLogger(__name__)


class AppError(Exception):
    """A user-facing error: a message plus per-field messages.

    Args:
        message: one line for the user.
        fields: ``{"field_name": "what is wrong"}``; dotted names for nested fields.
        status: HTTP status (400 bad input, 404 not found, 409 conflict, 503 unavailable).
    """

    def __init__(
        self,
        message: str,
        *,
        fields: dict[str, Any] | None = None,
        status: int = 400,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        self.status = status
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        """The JSON body: ``error``, ``fields`` (field name -> message), and ``details`` (where
        in the input: ``file``, ``row``, ``ticker``, ``date``) when there are any."""
        out: dict[str, Any] = {"error": self.message, "fields": self.fields}
        if self.details:
            out["details"] = self.details
        return out

    @classmethod
    def from_trainer(cls, exc: Exception, *, prefix: str = "") -> AppError:
        """Convert a trainer error, keeping its field name (and row/ticker/date details).

        The trainer's message names its field first (``"train.end: 2010-01-01 is before
        ..."``, right for the CLI); ``error`` keeps it, while ``fields[name]`` says it once,
        without the name that is already its key.
        """
        details = dict(getattr(exc, "details", {}) or {})
        field = details.pop("field", None)
        name = f"{prefix}{field}" if field else (prefix.rstrip(".") or "non_field_errors")
        message = getattr(exc, "message", None) or str(exc)
        return cls(message, fields={name: without_field_name(field or name, message)}, details=details)

    def with_paths(self, path: Callable[[str], str]) -> AppError:
        """The same error with each field renamed by ``path`` (e.g. the trainer's ``test.end``
        as its place in the request body, ``splits.test.end``) and the message rebuilt from the
        renamed fields (:func:`fields_message`), never by editing the message's text. Without
        fields, or when no name changes, ``self``."""
        fields = {path(name): why for name, why in self.fields.items()}
        if fields == self.fields:
            return self
        return AppError(fields_message(fields), fields=fields, status=self.status, details=self.details)

    def with_names(self, names: dict[str, str]) -> AppError:
        """The same error with each server path of ``names`` replaced by what the user knows
        the file as (``{"/srv/var/uploads/datasets/2026/11/dup_x1.csv": "dup.csv"}``), in the
        message, the field messages and the details."""

        def shown(value: Any) -> Any:
            if not isinstance(value, str):
                return value
            for path, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
                value = value.replace(path, name)
            return value

        return AppError(
            shown(self.message),
            fields={k: shown(v) for k, v in self.fields.items()},
            status=self.status,
            details={k: shown(v) for k, v in self.details.items()},
        )


def fields_message(fields: Mapping[str, Any]) -> str:
    """The one-line ``error`` of field errors ``{name: why}``: ``"name: why"`` for one,
    ``"3 fields are invalid: a: why; b: why; c: why"`` for several."""
    items = list(fields.items())
    if len(items) == 1:
        return f"{items[0][0]}: {items[0][1]}"
    return f"{len(items)} fields are invalid: " + "; ".join(f"{k}: {v}" for k, v in items)


def without_field_name(name: str, message: str) -> str:
    """``message`` without ``name`` in front of it (``"env.initial_cash: must be > 0"`` ->
    ``"must be > 0"``), for showing it where the field is already named."""
    text = message.strip()
    if name and text.startswith(name) and text[len(name) : len(name) + 1] in (":", " "):
        return text[len(name) :].lstrip(": ") or text
    return text


def _flatten(detail: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(detail, dict):
        out: dict[str, Any] = {}
        for key, value in detail.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    if isinstance(detail, list) and detail and all(not isinstance(d, (dict, list)) for d in detail):
        return {prefix.rstrip(".") or "non_field_errors": " ".join(str(d) for d in detail)}
    if isinstance(detail, list):
        out = {}
        for i, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}{i}."))
        return out
    return {prefix.rstrip(".") or "non_field_errors": str(detail)}


#: The trainer's error type, set by ``webapp.engine`` when it loads (the web side's one door to
#: the trainer); until then no exception is taken for a trainer error.
_trainer_error_types: tuple[type[Exception], ...] = ()


def register_trainer_error(exc_type: type[Exception]) -> None:
    """Tell the handlers which exception type is the trainer's (called by ``webapp.engine``)."""
    global _trainer_error_types
    if exc_type not in _trainer_error_types:
        _trainer_error_types = (*_trainer_error_types, exc_type)


def _from_trainer_error(exc: Exception) -> Exception:
    """``exc`` as an :class:`AppError` when the trainer raised it, else unchanged."""
    return AppError.from_trainer(exc) if isinstance(exc, _trainer_error_types) else exc


def limit_error(exc: Exception) -> AppError | None:
    """Django's request-limit exceptions (raised where ``request.GET``, ``request.POST``,
    ``request.FILES`` or ``request.body`` is first read) as the 400/413 :class:`AppError` naming
    the limit and its setting (``details``: ``limit``, ``max``); ``None`` for anything else."""
    if isinstance(exc, TooManyFieldsSent):
        setting, status_code, what = "DATA_UPLOAD_MAX_NUMBER_FIELDS", 400, "too many form fields or query parameters"
    elif isinstance(exc, TooManyFilesSent):
        setting, status_code, what = "DATA_UPLOAD_MAX_NUMBER_FILES", 400, "too many files in one request"
    elif isinstance(exc, RequestDataTooBig):
        setting, status_code, what = "PADDOCK_REQUEST_MAX_BYTES", 413, "request body too large"
    else:
        return None
    limit = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE" if status_code == 413 else setting)
    unit = " bytes" if status_code == 413 else ""
    return AppError(
        f"{what}: the limit is {limit:,}{unit} ({setting})",
        status=status_code,
        details={"limit": setting, "max": limit},
    )


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF exception handler producing the single error format."""
    exc = _from_trainer_error(exc)
    exc = limit_error(exc) or exc
    if isinstance(exc, AppError):
        return Response(exc.to_dict(), status=exc.status)
    if isinstance(exc, Http404):
        return Response({"error": "Not found.", "fields": {}}, status=status.HTTP_404_NOT_FOUND)
    response = exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled API error")
        return Response({"error": "Internal error; it has been logged.", "fields": {}}, status=500)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        first = next(iter(fields.items()), ("", "Invalid input."))
        message = f"{first[0]}: {first[1]}" if first[0] != "non_field_errors" else str(first[1])
        response.data = {"error": message, "fields": fields}
    else:
        detail = getattr(exc, "detail", str(exc))
        response.data = {"error": str(detail), "fields": {}}
    return response


def error_response(exc: Exception) -> JsonResponse:
    """JSON response for plain Django views."""
    exc = _from_trainer_error(exc)
    return JsonResponse(exc.to_dict(), status=exc.status)
