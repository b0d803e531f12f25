"""Serializer fields of the API that take input as it was sent, without coercion.

DRF's ``CharField`` turns a JSON number into text (``"name": 123`` became the name ``"123"``),
so a client's type mistake was stored instead of refused. :class:`StrictCharField` refuses it
with a 400 naming the field.
"""

from __future__ import annotations

from django.db import models
from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A ``CharField`` that accepts only JSON strings (and form text): a number, boolean, list or
    object is a validation error ``"must be a string, got a number"``."""

    default_error_messages = {"not_a_string": "must be a string, got {kind}"}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", kind=_kind(data))
        return super().to_internal_value(data)


def _kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


#: ``ModelSerializer.serializer_field_mapping`` with text columns as :class:`StrictCharField`.
def strict_field_mapping(mapping: dict) -> dict:
    return {**mapping, models.CharField: StrictCharField, models.TextField: StrictCharField}
