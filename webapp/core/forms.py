"""Form fields and input readers shared by the pages: JSON boxes read as the API reads a body,
and object ids typed or posted as text.

Django's ``forms.JSONField`` catches only ``json.JSONDecodeError``: a box nested a thousand
levels deep raised ``RecursionError`` and an integer of more than 4,300 digits ``ValueError``,
both a 500, while rendering the form again as well as while cleaning it.
:class:`BoundedJSONField` reads through :func:`webapp.core.parsers.loads_bounded` instead, so a
box is refused for what the API refuses in a body, with the error beside the field and the
typed text kept. :func:`whole_number` reads an id from a query or a hidden input: ASCII digits
only (``"²".isdigit()`` is true, yet ``int("²")`` raises) and at most 18 of them, so that a
value is either a number a 64-bit id column can hold or ``None``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput, JSONString

from webapp.core.parsers import MalformedJSON, loads_bounded

#: The most digits of an id read from text: every 18-digit number fits a signed 64-bit column.
MAX_ID_DIGITS = 18


def whole_number(value: Any) -> int | None:
    """``value`` (text from a form or a query string, surrounding spaces allowed) as an id,
    or ``None`` when it is not 1 to :data:`MAX_ID_DIGITS` ASCII digits."""
    text = str(value if value is not None else "").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_ID_DIGITS):
        return None
    return int(text)


def id_message(what: str, value: Any) -> str:
    """What is wrong with an id that :func:`whole_number` refused: ``"expected a budget id (a
    whole number), got 'abc'"`` for ``what="a budget"``."""
    return f"expected {what} id (a whole number), got {str(value)[:40]!r}"


class BoundedJSONField(forms.JSONField):
    """Django's ``JSONField`` read by :func:`~webapp.core.parsers.loads_bounded`: not JSON,
    nested deeper than ``PADDOCK_JSON_MAX_DEPTH``, an integer longer than Python reads, or a
    ``NaN``/``Infinity`` is a validation error of this field in plain words; the text typed is
    shown again as it was."""

    def to_python(self, value):
        if self.disabled or value in self.empty_values or not isinstance(value, str):
            return super().to_python(value)
        try:
            converted = loads_bounded(value)
        except MalformedJSON as exc:
            where = f"{exc.field}: " if exc.field and exc.field != "non_field_errors" else ""
            raise forms.ValidationError(f"{where}{exc.message}", code="invalid") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data, initial):
        if self.disabled or data is None or not isinstance(data, str):
            return super().bound_data(data, initial)
        try:
            return loads_bounded(data)
        except MalformedJSON:
            return InvalidJSONInput(data)  # shown back as typed
