"""The API's JSON parser: DRF's, with a nesting limit, so that a body of thousands of nested
``[`` is a 400 naming the limit instead of a ``RecursionError`` (a 500) in the parser or in
whatever walks the parsed value next; and a ``NaN`` or ``Infinity`` (which strict JSON, RFC
8259 section 6, does not allow) is a 400 naming the field that holds it."""

from __future__ import annotations

import io
import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


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
    """``application/json`` bodies of at most ``PADDOCK_JSON_MAX_DEPTH`` nested lists/objects.

    Raises:
        ParseError: (400) the body nests deeper, or is not JSON (DRF's message).
        AppError: (400) the body holds ``NaN`` or ``Infinity``, naming its field.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.PADDOCK_JSON_MAX_DEPTH
        too_deep = f"JSON nested deeper than {limit} levels (PADDOCK_JSON_MAX_DEPTH)"
        raw = stream.read() if stream is not None else b""  # the body, already within its size limit
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError(too_deep) from None
        except ParseError:
            found = nonfinite_field(raw.decode("utf-8", errors="replace"))
            if found is None:
                raise
            from webapp.core.errors import AppError  # errors imports DRF's views, which import this module

            field, constant = found
            why = f"{constant} is not a number JSON allows; send a finite number, or null where the field takes one"
            raise AppError(f"{field}: {why}", fields={field: why}) from None
        if nesting_depth(data, stop_at=limit) > limit:
            raise ParseError(too_deep)
        return data
