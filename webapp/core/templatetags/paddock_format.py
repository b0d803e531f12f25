"""Template filters writing numbers and durations as the live pages' script does
(``webapp/core/formatting.py``, ``static/js/format.js``)."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.core import formatting

register = template.Library()


@register.filter
def number(value: Any, digits: int = 3) -> str:
    """``{{ x|number:3 }}``: fixed-point with ``digits`` decimals, ``–`` when missing."""
    return formatting.format_number(value, int(digits))


@register.filter
def count(value: Any) -> str:
    """``{{ n|count }}``: a whole number with thousands separators."""
    return formatting.format_count(value)


@register.filter
def duration(seconds: Any) -> str:
    """``{{ s|duration }}``: ``"1 h 30 min"``."""
    return formatting.format_duration(seconds)
