"""Serializer fields of the API that take input as it was sent, without coercion.

DRF's ``CharField`` turns a JSON number into text (``"name": 123`` became the name ``"123"``),
so a client's type mistake was stored instead of refused. :class:`StrictCharField` refuses it
with a 400 naming the field. Likewise DRF's ``BooleanField`` reads ``"yes"``, ``"on"`` and
``1`` as true (:class:`StrictBooleanField` takes ``true``/``false`` only), its ``IntegerField``
and ``FloatField`` read the JSON string ``"2"`` as 2 (:class:`StrictIntegerField` and
:class:`StrictFloatField` take JSON numbers, and text from a form body only), and a
``Serializer`` drops the keys it does not define, so a misspelt option (``{"backtets":
true}``) answered 200 and did nothing (:class:`InputSerializer` refuses it, naming the key).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from django.db import models
from django.http import QueryDict
from rest_framework import serializers

from webapp.core.parsers import BODY_FIELD


class StrictCharField(serializers.CharField):
    """A ``CharField`` that accepts only JSON strings (and form text): a number, boolean, list or
    object is a validation error ``"must be a string, got a number"``."""

    default_error_messages = {"not_a_string": "must be a string, got {kind}"}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", kind=_kind(data))
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A ``BooleanField`` that accepts JSON ``true``/``false`` (and the form texts ``"true"``
    and ``"false"``) only: ``"yes"``, ``1`` or ``"on"`` is ``"must be true or false, got ..."``."""

    default_error_messages = {"not_a_boolean": "must be true or false, got {value}"}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data.lower() in ("true", "false"):
            return data.lower() == "true"
        self.fail("not_a_boolean", value=_kind(data) if not isinstance(data, str) else repr(data[:40]))


def from_form(field: serializers.Field) -> bool:
    """Whether ``field`` reads a form body (``application/x-www-form-urlencoded`` or multipart),
    whose values are all text; a JSON body's string is a string."""
    return isinstance(getattr(field.root, "initial_data", None), QueryDict)


class StrictIntegerField(serializers.IntegerField):
    """An ``IntegerField`` that accepts a JSON whole number (``2``, or ``2.0`` as the trainer's
    bounds count it) and the digits of a form body: the JSON string ``"2"``, a boolean or
    ``2.5`` is a validation error ``"must be a whole number, got a string"``."""

    default_error_messages = {"not_an_integer": "must be a whole number, got {kind}"}

    def to_internal_value(self, data):
        if isinstance(data, str) and from_form(self):
            return super().to_internal_value(data)
        if isinstance(data, float) and math.isfinite(data) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("not_an_integer", kind=repr(data) if isinstance(data, float) else _kind(data))
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A ``FloatField`` that accepts a JSON number and the text of a form body: the JSON string
    ``"0.5"`` or a boolean is a validation error ``"must be a number, got a string"``."""

    default_error_messages = {"not_a_number": "must be a number, got {kind}"}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not (isinstance(data, int | float) or (isinstance(data, str) and from_form(self))):
            self.fail("not_a_number", kind=_kind(data))
        return super().to_internal_value(data)


class RefuseUnknownKeys:
    """A serializer mixin: a key the body's serializer does not define (or defines read-only)
    is a 400 naming it and listing the keys the endpoint takes, and a body that is not an
    object is a 400 saying what it is, filed under ``body`` (as a malformed body is, see
    :mod:`webapp.core.parsers`)."""

    default_error_messages = {"not_an_object": "must be a JSON object, got {kind}"}

    def to_internal_value(self, data):
        if not isinstance(data, Mapping):
            message = self.error_messages["not_an_object"].format(kind=_kind(data))
            if self.parent is None:  # the request body: filed under ``body``, as a malformed one is
                raise serializers.ValidationError({BODY_FIELD: [f"the request body {message}"]})
            raise serializers.ValidationError([message])  # a nested object: under its own name
        writable = {name for name, field in self.fields.items() if not field.read_only}
        unknown = [str(key) for key in data if key not in writable]
        if unknown:
            taken = ", ".join(sorted(writable)) or "no keys"
            raise serializers.ValidationError(
                {key[:40]: [f"unknown field (this endpoint takes: {taken})"] for key in unknown[:5]}
            )
        return super().to_internal_value(data)


class InputSerializer(RefuseUnknownKeys, serializers.Serializer):
    """The base of the API's request bodies (:class:`RefuseUnknownKeys`); with no fields of
    its own, the check of an action that takes no body (``refuse_body``)."""


def refuse_body(data) -> None:
    """An action that takes no body: any key, or a body that is not an object, is a 400."""
    InputSerializer(data=data).is_valid(raise_exception=True)


def _kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return type(value).__name__


_INTEGER_COLUMNS = (
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveBigIntegerField,
    models.PositiveSmallIntegerField,
)


def strict_field_mapping(mapping: dict) -> dict:
    """``ModelSerializer.serializer_field_mapping`` with text columns as :class:`StrictCharField`
    and number columns as :class:`StrictIntegerField` / :class:`StrictFloatField`."""
    return {
        **mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        **dict.fromkeys(_INTEGER_COLUMNS, StrictIntegerField),
        models.FloatField: StrictFloatField,
    }
