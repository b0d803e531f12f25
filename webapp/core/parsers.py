"""The API's JSON parser: DRF's, with a nesting limit, so that a body of thousands of nested
``[`` is a 400 naming the limit instead of a ``RecursionError`` (a 500) in the parser or in
whatever walks the parsed value next; and a ``NaN`` or ``Infinity`` (which strict JSON, RFC
8259 section 6, does not allow) is a 400 naming the field that holds it.

:func:`loads_bounded` is that one reading of JSON text, with its refusals in plain words
(:class:`MalformedJSON`): the API's bodies (:class:`BoundedJSONParser`, filed under ``body``)
and the pages' JSON boxes (``webapp.core.forms.BoundedJSONField``) both read through it."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from django.conf import settings
from rest_framework.parsers import JSONParser

#: Where a malformed API body is filed in ``fields`` (the error format of ``webapp.core.errors``).
BODY_FIELD = "body"


class MalformedJSON(ValueError):
    """JSON text that :func:`loads_bounded` refuses.

    Attributes:
        message: what is wrong, in words a user can act on (no Python internals).
        field: the place in the value that holds the fault (``hyperparameters.learning_rate``)
            for a ``NaN`` or ``Infinity``, else ``None`` (the text as a whole).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def _too_long_integer(exc: ValueError) -> str:
    """The message of Python's refusal of an integer over ``sys.get_int_max_str_digits()``
    digits, without its advice to raise the interpreter's limit."""
    limit = sys.get_int_max_str_digits()
    found = re.search(r"value has (\d+) digits", str(exc))
    size = f" ({int(found.group(1)):,} digits)" if found else ""
    return f"holds an integer longer than {limit:,} digits{size}; no setting takes a number that long"


def loads_bounded(text: str | bytes) -> Any:
    """Parse JSON text nesting at most ``PADDOCK_JSON_MAX_DEPTH`` lists/objects, with every
    number finite and every integer at most ``sys.get_int_max_str_digits()`` digits long.

    The text is bounded already (the request's size limit); parsing is the C scanner's, and the
    walks over the result are iterative, so a hostile text costs time and memory in proportion
    to its length and no recursion beyond the interpreter's limit.

    Raises:
        MalformedJSON: not JSON (the decoder's reason and place), nested too deeply, an
            integer too long, or a ``NaN`` / ``Infinity`` (naming its place as ``field``).
    """
    limit = settings.PADDOCK_JSON_MAX_DEPTH
    too_deep = f"JSON nested deeper than {limit} levels (PADDOCK_JSON_MAX_DEPTH)"
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedJSON(f"not UTF-8 text (byte {exc.start + 1:,} cannot be read)") from None
    constants: list[_Constant] = []

    def constant(name: str) -> _Constant:
        constants.append(_Constant(name))
        return constants[-1]

    try:
        value = json.loads(text, parse_constant=constant)
    except RecursionError:
        raise MalformedJSON(too_deep) from None
    except json.JSONDecodeError as exc:
        raise MalformedJSON(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # the integer-length guard of CVE-2020-10735
        raise MalformedJSON(_too_long_integer(exc)) from None
    if nesting_depth(value, stop_at=limit) > limit:
        raise MalformedJSON(too_deep)
    found = _first_constant(value) if constants else None  # the walk only when there is one to find
    if found is not None:
        field, name = found
        why = f"{name} is not a number JSON allows; send a finite number, or null where the field takes one"
        raise MalformedJSON(why, field=field)
    return value


class _Constant:
    """Where a parsed body held ``NaN``, ``Infinity`` or ``-Infinity`` (``name``)."""

    def __init__(self, name: str) -> None:
        self.name = name


def nonfinite_field(text: str) -> tuple[str, str] | None:
    """``(path, constant)`` of the first ``NaN`` / ``Infinity`` / ``-Infinity`` in a JSON text
    (path dotted for object keys, ``[i]`` for list items, e.g. ``hyperparameters.learning_rate``
    or ``mutation.factors[1]``), or ``None`` when it holds none or does not parse. The walk
    is iterative (no recursion on deep bodies)."""
    try:
        value = json.loads(text, parse_constant=_Constant)
    except (ValueError, RecursionError):
        return None
    return _first_constant(value)


def _first_constant(value: Any) -> tuple[str, str] | None:
    """``(path, constant)`` of the first :class:`_Constant` in a parsed value, in text order."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Constant):
            return path or "non_field_errors", item.name
        if isinstance(item, dict):
            children = [(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))  # the first in the body is found first
    return None


def nesting_depth(value: Any, *, stop_at: int) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar is 0, ``[]`` 1, ``[[1]]`` 2),
    found without recursion; the walk stops once it passes ``stop_at``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, list | dict) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > stop_at:
            break
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, list | dict))
    return deepest


class BoundedJSONParser(JSONParser):
    """``application/json`` bodies read by :func:`loads_bounded`.

    Raises:
        AppError: (400) a malformed body: not JSON, nested deeper than
            ``PADDOCK_JSON_MAX_DEPTH``, or an integer too long, filed under ``body``; a body
            holding ``NaN`` or ``Infinity``, filed under the field that holds it.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""  # the body, already within its size limit
        try:
            return loads_bounded(raw)
        except MalformedJSON as exc:
            from webapp.core.errors import AppError  # errors imports DRF's views, which import this module

            field = exc.field or BODY_FIELD
            raise AppError(f"{field}: {exc.message}", fields={field: exc.message}) from None
