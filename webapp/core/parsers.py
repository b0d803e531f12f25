"""The API's JSON parser: DRF's, with a nesting limit, so that a body of thousands of nested
``[`` is a 400 naming the limit instead of a ``RecursionError`` (a 500) in the parser or in
whatever walks the parsed value next."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


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
    """

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.PADDOCK_JSON_MAX_DEPTH
        too_deep = f"JSON nested deeper than {limit} levels (PADDOCK_JSON_MAX_DEPTH)"
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(too_deep) from None
        if nesting_depth(data, stop_at=limit) > limit:
            raise ParseError(too_deep)
        return data
